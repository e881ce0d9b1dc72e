"""Workers never write outside their own folders, whatever an item says: the one rule for a file
name made from an item (`safe_base_name`) is word for word the same in every worker image and
holds against hostile names; fetch-run-put run for real on a URL whose last segment decodes to
`../../tmp/x`, and the thumbnailer on names that climb, start at the root, hide NULs and
backslashes, or run to 5,000 characters."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGES = {
    "generic": REPO / "worker-images" / "generic" / "fetch-run-put",
    "thumbnailer": REPO / "worker-images" / "thumbnailer" / "thumbnail",
    "multiworker": REPO / "worker-images" / "multiworker" / "steps" / "contact-sheet",
}
HOSTILE = [
    "../../tmp/x", "..", ".", "...", "", "/", "/etc/passwd", "a\\..\\..\\evil.sh",
    "nul\x00here.mp4", "new\nline.mp4", "\u202egnp.exe", ".hidden", "..%2F..%2Fx",
    "ok name.mp4", "ünï 視頻.mp4", "x" * 5000 + ".mp4", "é" * 3000, "\x1b[2Jclear.mp4",
]  # fmt: skip


def rule_of(script: Path):
    """The script's `safe_base_name` (its source, and the function itself)."""
    tree = ast.parse(script.read_text())
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "safe_base_name"]
    assert found, f"{script} has no safe_base_name"
    source = ast.get_source_segment(script.read_text(), found[0])
    space: dict = {}
    exec("import os, unicodedata\nMAX_NAME_BYTES = 200\n" + source, space)  # noqa: S102
    return source, space["safe_base_name"]


def test_every_image_has_the_same_rule_word_for_word():
    sources = {name: rule_of(path)[0] for name, path in IMAGES.items()}
    assert len(set(sources.values())) == 1, "the images' safe_base_name differ"
    for path in IMAGES.values():
        assert "MAX_NAME_BYTES = 200" in path.read_text()


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_name_becomes_one_plain_name(text):
    _, safe = rule_of(IMAGES["generic"])
    name = safe(text, "fallback")
    assert name and "/" not in name and "\\" not in name and "\x00" not in name
    assert not name.startswith(".") and name not in (".", "..")
    assert all(ch.isprintable() for ch in name), repr(name)
    assert len(name.encode()) <= 200


def test_what_the_rule_keeps():
    _, safe = rule_of(IMAGES["generic"])
    assert safe("../../tmp/x", "f") == "x"
    assert safe("a\\..\\..\\evil.sh", "f") == "evil.sh"
    assert safe("..", "f") == "f" and safe("", "f") == "f"
    assert safe("ünï 視頻.mp4", "f") == "ünï 視頻.mp4"
    long = safe("x" * 5000 + ".mp4", "f")
    assert long.endswith(".mp4") and len(long.encode()) == 200
    assert safe("é" * 3000, "f") == "é" * 100  # cut on a character, not inside one


class AnyPath(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"video")

    def do_PUT(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    "tail", ["..%2F..%2Ftmp%2Fescaped-x", "%2Fetc%2Fescaped-y", "..%5C..%5Cescaped-z",
             "a%00b", "x" * 5000],
)  # fmt: skip
def test_fetch_run_put_keeps_a_download_in_its_folder(tmp_path, tail):
    server = ThreadingHTTPServer(("127.0.0.1", 0), AnyPath)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = tmp_path / "where"
    script.write_text('#!/bin/sh\necho "$INPUT_FILE" > "$OUTPUT_FILE"\n')
    script.chmod(0o755)
    base = f"http://127.0.0.1:{server.server_port}"
    item = tmp_path / "item.json"
    item.write_text(json.dumps({"input": f"{base}/in/{tail}", "script": [str(script)],
                                "output": f"file://{tmp_path}/result"}))  # fmt: skip
    try:
        env = dict(os.environ, WORK_ITEM_FILE=str(item))
        done = subprocess.run([str(IMAGES["generic"])], capture_output=True, text=True, env=env,
                              timeout=60)  # fmt: skip
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    input_file = Path((tmp_path / "result").read_text().strip())
    assert input_file.parent.name.startswith("fetch-run-put-")  # its private folder, and no other
    assert "/" not in input_file.name and len(input_file.name.encode()) <= 200
    assert not list(Path("/tmp").glob("escaped-*")) and not list(Path("/etc").glob("escaped-*"))


@pytest.mark.parametrize(
    "name", ["../../escaped.mp4", "/etc/escaped.mp4", "a/../../../escaped.mp4",
             "nul\x00here.mp4", "..\\..\\escaped.mp4", "sub/" + "x" * 5000 + ".mp4"],
)  # fmt: skip
def test_the_thumbnailer_writes_inside_output_dir(tmp_path, name, sample_videos, ffmpeg_env):
    video = sorted(p for p in sample_videos.iterdir() if p.name != "broken.mp4")[0]
    item = tmp_path / "item.json"
    item.write_text(json.dumps({"name": name, "path": str(video)}))
    out = tmp_path / "out"
    done = subprocess.run([str(IMAGES["thumbnailer"])], capture_output=True, text=True,
                          env=dict(ffmpeg_env, WORK_ITEM_FILE=str(item), OUTPUT_DIR=str(out)),
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    made = [p for p in out.rglob("*") if p.is_file()]
    assert len(made) == 1 and made[0].suffix == ".png"
    assert made[0].resolve().is_relative_to(out.resolve())
    assert all(len(part.encode()) <= 200 for part in made[0].relative_to(out).parts)


def test_the_thumbnailer_refuses_a_folder_that_leads_out(tmp_path, sample_videos, ffmpeg_env):
    video = sorted(p for p in sample_videos.iterdir() if p.name != "broken.mp4")[0]
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "link").symlink_to(elsewhere)  # a sub-folder someone made a symlink
    item = tmp_path / "item.json"
    item.write_text(json.dumps({"name": "link/a.mp4", "path": str(video)}))
    done = subprocess.run([str(IMAGES["thumbnailer"])], capture_output=True, text=True,
                          env=dict(ffmpeg_env, WORK_ITEM_FILE=str(item), OUTPUT_DIR=str(out)),
                          timeout=120)  # fmt: skip
    assert done.returncode == 2 and "outside OUTPUT_DIR" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []


def test_the_thumbnailer_makes_output_dir_itself_but_never_its_parents(
    tmp_path, sample_videos, ffmpeg_env
):
    """OUTPUT_DIR missing: made when its parent is there; a mistyped one whose parent is not
    (`/nonexistent/dir`, which as root made `/nonexistent`) is one line, exit 2, nothing made."""
    video = sorted(p for p in sample_videos.iterdir() if p.name != "broken.mp4")[0]
    item = tmp_path / "item.json"
    item.write_text(json.dumps({"name": "a.mp4", "path": str(video)}))

    def thumbnail(out):
        return subprocess.run([str(IMAGES["thumbnailer"])], capture_output=True, text=True,
                              env=dict(ffmpeg_env, WORK_ITEM_FILE=str(item), OUTPUT_DIR=str(out)),
                              timeout=120)  # fmt: skip

    deep = tmp_path / "nonexistent" / "dir"
    done = thumbnail(deep)
    assert done.returncode == 2 and "no such folder" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "nonexistent").exists()
    done = thumbnail(tmp_path / "thumbs")  # its parent is there: made
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thumbs" / "a.png").is_file()
