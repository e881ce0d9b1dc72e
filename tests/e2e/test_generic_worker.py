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
