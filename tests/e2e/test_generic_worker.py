"""fetch-run-put, the generic worker: a real object store over HTTP on loopback (GET and PUT),
file:// locations, and a user script run without a shell."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

from .conftest import REPO

WORKER = REPO / "worker-images" / "generic" / "fetch-run-put"


class Store(BaseHTTPRequestHandler):
    objects: dict[str, bytes] = {}

    def do_GET(self):
        body = self.objects.get(unquote(self.path))
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        length = int(self.headers.get("Content-Length", 0))
        if self.path.startswith("/readonly/"):
            self.rfile.read(length)
            self.send_response(403)
            self.end_headers()
            return
        self.objects[unquote(self.path)] = self.rfile.read(length)
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def store():
    Store.objects = {"/in/a b.txt": b"hello object\n"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Store)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", Store.objects
    server.shutdown()


@pytest.fixture
def upper(tmp_path):
    script = tmp_path / "upper"
    script.write_text(
        '#!/bin/sh\necho "input is $(basename "$INPUT_FILE")" >&2\n'
        'tr a-z A-Z < "$INPUT_FILE" > "$OUTPUT_FILE"\n'
    )
    script.chmod(0o755)
    return str(script)


def run(tmp_path, item):
    item_file = tmp_path / "item.json"
    item_file.write_text(json.dumps(item))
    return subprocess.run(
        [str(WORKER)],
        env=dict(os.environ, WORK_ITEM_FILE=str(item_file)),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_fetch_run_put_over_http(tmp_path, store, upper):
    base, objects = store
    r = run(
        tmp_path,
        {"input": f"{base}/in/a%20b.txt", "script": [upper], "output": f"{base}/out/a.txt"},
    )
    assert r.returncode == 0, r.stderr
    assert objects["/out/a.txt"] == b"HELLO OBJECT\n"
    assert "input is a b.txt" in r.stderr


def test_file_locations_and_a_string_script(tmp_path, upper):
    (tmp_path / "in.txt").write_text("abc")
    out = tmp_path / "deep" / "out.txt"
    r = run(
        tmp_path,
        {"input": f"file://{tmp_path}/in.txt", "script": f"'{upper}'", "output": f"file://{out}"},
    )
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "ABC"


def test_failures_are_one_line(tmp_path, store, upper):
    base, _ = store
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\nexit 4\n")
    failing.chmod(0o755)
    lazy = tmp_path / "lazy"
    lazy.write_text("#!/bin/sh\ntrue\n")
    lazy.chmod(0o755)
    cases = [
        ({"input": f"{base}/missing", "script": [upper], "output": f"{base}/o"}, 1, "download of"),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [str(failing)], "output": f"{base}/o"},
            1,
            "failed with exit code 4",
        ),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [str(lazy)], "output": f"{base}/o"},
            1,
            "wrote no OUTPUT_FILE",
        ),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [upper], "output": f"{base}/readonly/o"},
            1,
            "HTTP 403",
        ),
        ({"input": "ftp://x/y", "script": [upper], "output": f"{base}/o"}, 2, "unsupported"),
        ({"input": f"{base}/in/a%20b.txt", "output": f"{base}/o"}, 2, "no 'script'"),
        (
            {"input": f"{base}/in/a%20b.txt", "script": [], "output": f"{base}/o"},
            2,
            "must be a command",
        ),
    ]
    for item, code, message in cases:
        r = run(tmp_path, item)
        assert r.returncode == code, (item, r.stderr)
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("fetch-run-put: ") and message in last, r.stderr


def run_with(tmp_path, item, *argv):
    """fetch-run-put in command-line mode: the item is the object, the command line the rest."""
    item_file = tmp_path / "item.json"
    item_file.write_text(json.dumps(item))
    return subprocess.run(
        [str(WORKER), *map(str, argv)], env=dict(os.environ, WORK_ITEM_FILE=str(item_file)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


UPPER = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
NAMES = ["clip?a.mp4", "clip?b.mp4", "x#1.mp4", "x#2.mp4", "a%20b.mp4", "a b.mp4", "été 🎬.mp4"]


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_every_items_output_lands_apart_whatever_its_name_holds(tmp_path, store, upper, scheme):
    """?, #, %XX, spaces and unicode in a name are the name, not URL syntax: seven items,
    seven outputs, each holding its own item's result."""
    base, objects = store
    videos, out = tmp_path / "videos", tmp_path / "out"
    videos.mkdir()
    template = f"file://{out}/{{stem}}.txt" if scheme == "file" else f"{base}/out/{{stem}}.txt"
    for name in NAMES:
        (videos / name).write_text(f"content of {name}\n")
        item = {"name": name, "path": str(videos / name)}
        r = run_with(tmp_path, item, "--input-root", videos, "--output", template, upper)
        assert r.returncode == 0, (name, r.stderr)
    for name in NAMES:
        stem = name.rsplit(".", 1)[0]
        body = (out / f"{stem}.txt").read_bytes() if scheme == "file" else \
            objects[f"/out/{stem}.txt"]  # fmt: skip
        expected = f"content of {name}\n".encode().translate(UPPER)  # (tr a-z A-Z: ASCII)
        assert body == expected, name
    if scheme == "file":
        assert len(list(out.iterdir())) == len(NAMES)


@pytest.mark.parametrize(
    "item",
    [
        {"name": "x.mp4", "url": "file:///etc/shadow"},
        {"name": "x.mp4", "input": "file:///proc/self/environ"},
        {"name": "x.mp4", "path": "/etc/passwd"},
        {"name": "x.mp4", "path": "{videos}/../secret.txt"},
        {"name": "x.mp4", "path": "{videos}/link-out.mp4"},
    ],
    ids=["url", "input", "path", "dotdot", "symlink"],
)
def test_an_item_can_name_no_local_file_outside_the_input_roots(tmp_path, upper, item):
    videos = tmp_path / "videos"
    videos.mkdir()
    (tmp_path / "secret.txt").write_text("the secret")
    (videos / "link-out.mp4").symlink_to(tmp_path / "secret.txt")
    item = {k: v.replace("{videos}", str(videos)) for k, v in item.items()}
    out = tmp_path / "out"
    r = run_with(tmp_path, item, "--input-root", videos, "--output", f"file://{out}/{{stem}}",
                 upper)  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "under no --input-root" in lines[0] or "must not have" in lines[0]
    assert not out.exists()  # nothing copied anywhere
    plain = run_with(tmp_path, item, "--output", f"file://{out}/{{stem}}", upper)
    assert plain.returncode == 2 and not out.exists()  # no --input-root: no local file at all


def test_a_stream_records_fields_are_a_request(tmp_path, store, upper):
    """A Redis stream record (`XADD jobs * job j1 input … script … output …`) as the
    ambassador serves it (`log_records.describe`): its fields are the request."""
    from kube_workqueue.ambassador.sources.log_records import LogShape, describe

    base, objects = store
    fields = {"job": "j1", "input": f"{base}/in/a%20b.txt", "script": upper,
              "output": f"{base}/out/j1.txt"}  # fmt: skip
    name, meta = LogShape("job").change("1733250000000-0", fields)
    r = run(tmp_path, describe(name, meta, "jobs"))
    assert r.returncode == 0, r.stderr
    assert objects["/out/j1.txt"] == b"HELLO OBJECT\n"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [({"body": "render me"}, b"RENDER ME"), ({"body.base64": "aGk="}, b"HI"),
     ({"width": "320"}, b'"WIDTH": "320"')],
    ids=["text", "bytes", "fields"],
)  # fmt: skip
def test_a_log_record_that_names_no_object_is_its_own_input(tmp_path, upper, fields, expected):
    """A record (a NATS message, a Redis stream entry) served by the log core: its payload -
    the body as sent, else its fields as JSON - is INPUT_FILE, named after the item."""
    from kube_workqueue.ambassador.sources.log_records import LogShape, describe

    name, meta = LogShape(None).change("000000000007", fields)
    out = tmp_path / "out"
    r = run_with(tmp_path, describe(name, meta, "RENDERS"), "--output", f"file://{out}/{{name}}",
                 upper)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert expected in (out / "000000000007").read_bytes()
    assert "input is 000000000007" in r.stderr
    assert "record RENDERS 000000000007 ->" in r.stdout
