"""The manager takes item data with the listing when the ambassador offers `view=full` (no
request per item), and falls back to per-item GETs against a source that does not."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import requests

from tests.support.folders import make_items
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)

from .conftest import manager_once


def item_gets(server) -> float:
    text = requests.get(server.url + "/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("ambassador_requests_total{") and "/items/<path:name>" in line:
            total += float(line.split()[-1])
    return total


def test_with_the_full_view_there_is_no_request_per_item(
    tmp_path, ambassador_server, marker_worker
):
    names = [f"clip-{i}.mp4" for i in range(12)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    r = manager_once(server, marker_worker, tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert sorted(marker_worker.ended()) == sorted(names)
    assert item_gets(server) == 0  # every item's data came with the listing


class OldAmbassador(BaseHTTPRequestHandler):
    """An ambassador from before `view=full`: it refuses the parameter, as unknown ones are."""

    items = ["a.mp4", "b.mp4"]
    root = ""
    gets: list[str] = []

    def log_message(self, *args):
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/api/v1/items":
            if "view" in parse_qs(url.query):
                return self._send(400, {"kind": "Status", "code": 400, "message": "unknown"})
            return self._send(200, {"kind": "ItemList", "apiVersion": "v1", "items": self.items})
        name = unquote(url.path.removeprefix("/api/v1/items/"))
        self.gets.append(name)
        data = {"name": name, "path": f"{self.root}/{name}"}
        return self._send(200, {"kind": "Item", "apiVersion": "v1", "data": data})


def test_against_a_source_without_the_full_view_each_item_is_fetched(tmp_path, marker_worker):
    class Old(OldAmbassador):  # its own GETs, and the items the class says (never another test's)
        root, gets = str(tmp_path), []

    http = ThreadingHTTPServer(("127.0.0.1", 0), Old)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:

        class Source:
            url = f"http://127.0.0.1:{http.server_port}"

        r = manager_once(Source, marker_worker, tmp_path / "state")
    finally:
        http.shutdown()
    assert r.returncode == 0, r.stderr
    assert sorted(marker_worker.ended()) == ["a.mp4", "b.mp4"]
    assert sorted(Old.gets) == ["a.mp4", "b.mp4"]  # one GET per item
