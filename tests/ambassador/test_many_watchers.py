"""Many watchers at once on a real two-worker server: each watch stream holds a thread for its
whole life, so with 16 threads a worker the 33rd watcher waited for a free one and got
nothing. Now 300 watchers (over both workers) each receive every event - additions and a
removal - and a watcher left quiet gets a heartbeat (an empty line) so a client that went
away is noticed."""

from __future__ import annotations

import json
import selectors
import socket
import time

from kube_workqueue.ambassador import api

WATCHERS = 300
REQUEST = b"GET /api/v1/items?watch=true HTTP/1.1\r\nHost: test\r\n\r\n"


def events_in(buffer: bytes) -> list[dict]:
    """The JSON event lines of a chunked HTTP body read raw (chunk sizes are hex lines)."""
    found = []
    for line in buffer.split(b"\r\n"):
        for part in line.split(b"\n"):
            if part.startswith(b"{"):
                found.append(json.loads(part))
    return found


def test_every_one_of_hundreds_of_watchers_receives_every_event(tmp_path, ambassador_server):
    (tmp_path / "first.mp4").write_bytes(b"x")
    server = ambassador_server(tmp_path, "--workers", "2")
    host, port = "127.0.0.1", server.port
    selector = selectors.DefaultSelector()
    buffers: dict[socket.socket, bytearray] = {}
    for _ in range(WATCHERS):
        sock = socket.create_connection((host, port), timeout=10)
        sock.sendall(REQUEST)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        buffers[sock] = bytearray()

    def pump_until(done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            for key, _ in selector.select(0.1):
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                buffers[key.fileobj] += data

    def all_saw(kind: str, item: str):
        want = {"type": kind, "item": item}
        return lambda: all(want in events_in(bytes(b)) for b in buffers.values())

    try:
        pump_until(all_saw("ADDED", "first.mp4"), 60)
        assert all_saw("ADDED", "first.mp4")(), "a watcher never got the current items"
        for name in ("a.mp4", "b.mp4"):
            (tmp_path / name).write_bytes(b"x")
        (tmp_path / "first.mp4").unlink()
        for kind, item in (("ADDED", "a.mp4"), ("ADDED", "b.mp4"), ("DELETED", "first.mp4")):
            pump_until(all_saw(kind, item), 30)
            missing = sum(
                {"type": kind, "item": item} not in events_in(bytes(b)) for b in buffers.values()
            )
            assert missing == 0, f"{missing} of {WATCHERS} watchers missed {kind} {item}"
    finally:
        for sock in buffers:
            sock.close()


def test_a_quiet_watch_sends_a_heartbeat(tmp_path, monkeypatch):
    from kube_workqueue.ambassador import create_app

    monkeypatch.setattr(api, "HEARTBEAT_SECONDS", 0.2)
    app = create_app({"ROOT": str(tmp_path), "SUFFIXES": [".mp4"], "SETTLE": 0})
    try:
        r = app.test_client().get("/api/v1/items?watch=true&timeoutSeconds=1", buffered=False)
        body = b"".join(r.response)
        assert b"\n" in body and body.strip() == b""  # no items: heartbeats only
    finally:
        app.extensions["workqueue.source"].stop()
