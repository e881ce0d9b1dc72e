"""The ambassador serves lists whatever one client does, over real HTTP to a real `workqueue
ambassador` (gunicorn with its guarded worker) on loopback, bounded in count: slow heads hold no
thread (more of them than threads, and a list still answers), watches are capped in all and per
client (429 + Retry-After), an oversized line or head is refused at once (414, 431), a head
that never ends gets 408, every refusal is counted in /metrics, and keep-alive and pipelined
requests still work."""

from __future__ import annotations

import socket

import pytest
import requests

from tests.e2e.conftest import workqueue
from tests.support.servers import Server, free_port, wait_until


@pytest.fixture
def small(tmp_path):
    """An ambassador of one worker with 8 threads, watches capped at 4 (2 a client)."""
    folder = tmp_path / "videos"
    folder.mkdir()
    for i in range(3):
        (folder / f"clip-{i}.mp4").write_bytes(b"x")
    port = free_port()
    limits = ("--workers", "1", "--threads", "8", "--max-watches", "4",
              "--max-watches-per-client", "2", "--head-timeout", "2s")  # fmt: skip
    server = Server(folder, port, limits)
    server.wait_ready()
    yield server, port
    server.stop()


def raw(port: int, payload: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(payload)
    return s


def answer(s: socket.socket) -> bytes:
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def refused(url: str) -> dict[str, float]:
    text = requests.get(url + "/metrics", timeout=10).text
    return {
        line.split('reason="')[1].split('"')[0]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("ambassador_refused_total{")
    }


def test_more_slow_heads_than_threads_leave_lists_answering(small):
    server, port = small
    slow = [raw(port, b"GET /api/v1/items HTTP/1.1\r\nHost: x\r\n") for _ in range(40)]
    try:
        r = requests.get(server.url + "/api/v1/items", timeout=10)  # 40 heads, 8 threads
        assert r.status_code == 200 and len(r.json()["items"]) == 3
    finally:
        for s in slow:
            s.close()


def test_a_head_that_never_ends_gets_408_and_is_counted(small):
    server, port = small
    s = raw(port, b"GET /api/v1/items HTTP/1.1\r\nHost: x\r\n")
    s.settimeout(30)
    assert answer(s).startswith(b"HTTP/1.1 408 Request Timeout")  # after --head-timeout 2s
    s.close()
    assert refused(server.url).get("head_timeout") == 1


def test_an_oversized_line_or_head_is_refused_at_once(small):
    server, port = small
    s = raw(port, b"GET /")
    try:
        s.sendall(b"a" * (4 << 20) + b" HTTP/1.1\r\n\r\n")
    except OSError:
        pass  # refused and closed while it was still sending: the point
    assert answer(s).startswith(b"HTTP/1.1 414 URI Too Long")
    big = raw(port, b"GET /api/v1/items HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 40_000)
    assert answer(big).startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
    counts = refused(server.url)
    assert counts.get("line_too_long") == 1 and counts.get("head_too_large") == 1
    assert requests.get(server.url + "/api/v1/items", timeout=10).status_code == 200


def test_watches_are_capped_per_client_with_retry_after_and_lists_go_on(small):
    server, port = small
    streams = []
    try:
        for _ in range(2):
            streams.append(requests.get(server.url + "/api/v1/items", params={"watch": "true"},
                                        stream=True, timeout=30))  # fmt: skip
            assert streams[-1].status_code == 200
        third = requests.get(server.url + "/api/v1/items", params={"watch": "true"}, timeout=10)
        assert third.status_code == 429 and third.headers["Retry-After"] == "5"
        body = third.json()
        assert body["kind"] == "Status" and body["code"] == 429
        assert requests.get(server.url + "/api/v1/items", timeout=10).status_code == 200
        assert refused(server.url).get("watches_per_client") == 1
    finally:
        for stream in streams:
            stream.close()
    # a stream that ended gives its slot back
    wait_until(
        lambda: requests.get(server.url + "/api/v1/items", params={"watch": "true",
                             "timeoutSeconds": "1"}, timeout=10).status_code == 200,
        timeout=30,
    )  # fmt: skip


def test_keep_alive_and_pipelined_requests_still_answer(small):
    _, port = small
    request = b"GET /api/v1/items HTTP/1.1\r\nHost: x\r\n\r\n"
    s = raw(port, request + request)  # two at once, the second read ahead behind the first

    def until(count: int) -> bytes:
        got = b""
        while got.count(b"HTTP/1.1 200") < count or not got.endswith(b"}"):
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
        return got

    assert until(2).count(b'"kind":"ItemList"') == 2
    s.sendall(request)  # and the same connection again, kept alive
    assert until(1).count(b'"kind":"ItemList"') == 1
    s.close()


def test_impossible_limits_are_one_line(tmp_path):
    r = workqueue("ambassador", "--root", tmp_path, "--threads", "8", "--workers", "1",
                  "--max-watches", "100", "--port", "0")  # fmt: skip
    assert r.returncode == 2 and "leaves no thread for lists" in r.stderr, r.stderr


def test_a_watcher_that_never_reads_costs_what_it_read_not_the_folder(tmp_path):
    """The first listing of a watch goes out a page at a time as the client reads: one that
    never reads holds a page (4 KB of lines, or 32 names with their data), not 20,000 items'
    lines (0.8 MB each before, 2 with the data: well above the bound below, as 60,000 were
    and cost three times the files) - about 40 KB at the margin over 100 watchers, 60 with
    a page of 16 KB, 180 with 256 names' data."""
    from tests.support.abuse import unread_watcher_kb
    from tests.support.servers import Server, free_port

    for i in range(20_000):
        (tmp_path / f"clip-{i:06d}.mp4").touch()
    server = Server(tmp_path, free_port(), ())
    try:
        server.wait_ready()
        for query in ("watch=true", "watch=true&view=full"):
            cost = unread_watcher_kb(server, query=query)
            assert cost < 128, (query, cost)  # (the floor: a thread, its socket, one page)
    finally:
        server.stop()


def test_an_unread_watch_stream_holds_half_a_megabyte_queued_not_its_whole_listing(tmp_path):
    """A watch stream's send buffer is fixed (`watch_slots.bound_send_queue`): left to TCP's
    autotuning, a client that never read had the whole first listing made and queued for it -
    2.1 MB of the kernel's memory for this folder's full view (3.9 MB at 20,000 files), which
    no process's RSS shows, and the CPU of making every line."""
    from tests.support.abuse import unread_stream_queued

    for i in range(8_000):
        (tmp_path / f"clip-{i:06d}.mp4").touch()
    server = Server(tmp_path, free_port(), ("--workers", "1"))
    try:
        server.wait_ready()
        queued = unread_stream_queued(server.port)
        assert queued <= 1024 * 1024, queued  # (the kernel doubles the 256 KB asked)
    finally:
        server.stop()
