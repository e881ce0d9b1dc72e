"""The real server, started by the CLI on a free loopback port: listing, the watch stream,
settling, files appearing and disappearing, and the CLI's answers to bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from ..conftest import wait_until


def test_list_and_get_over_real_http(tmp_path, ambassador_server):
    (tmp_path / "a.mp4").write_bytes(b"abc")
    server = ambassador_server(tmp_path)
    body = requests.get(server.url + "/api/v1/items", timeout=5).json()
    assert body["items"] == ["a.mp4"]
    item = requests.get(server.url + "/api/v1/items/a.mp4", timeout=5).json()
    assert item["data"]["size"] == 3
    # the full listing is sent from its cached file (sendfile): whole, with its length, and
    # a new version is a new file - asked from many connections at once, every answer whole
    names = [f"clip-{i:04d}.mp4" for i in range(2000)]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    wanted = sorted(["a.mp4", *names])

    def listing():
        r = requests.get(server.url + "/api/v1/items", timeout=10)
        assert int(r.headers["Content-Length"]) == len(r.content)
        return r.json()["items"]

    wait_until(lambda: listing() == wanted, timeout=20)
    with ThreadPoolExecutor(8) as pool:
        assert all(got == wanted for got in pool.map(lambda _: listing(), range(40)))


def test_watch_streams_current_items_then_changes(tmp_path, ambassador_server):
    (tmp_path / "a.mp4").write_bytes(b"x")
    server = ambassador_server(tmp_path, "--workers", "1")
    events = []
    r = requests.get(
        server.url + "/api/v1/items?watch=true&timeoutSeconds=8", stream=True, timeout=15
    )
    assert r.headers["Content-Type"].startswith("application/x-ndjson")

    def read():
        try:
            for line in r.iter_lines(chunk_size=None):
                if line:
                    events.append(json.loads(line))
        except (requests.RequestException, AttributeError, ValueError):
            pass  # the test closed the stream

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_until(lambda: {"type": "ADDED", "item": "a.mp4"} in events)
    started = time.monotonic()
    (tmp_path / "b.mp4").write_bytes(b"x")
    wait_until(lambda: {"type": "ADDED", "item": "b.mp4"} in events)
    latency = time.monotonic() - started
    (tmp_path / "a.mp4").unlink()
    wait_until(lambda: {"type": "DELETED", "item": "a.mp4"} in events)
    r.close()
    assert latency < 5  # reported, not asserted tightly: well under a poll interval in practice


def test_a_watch_of_an_empty_folder_starts_before_its_first_event(tmp_path, ambassador_server):
    """The stream's headers go out at once, whatever there is to list: an empty source's watch
    used to send nothing until its first event or heartbeat (15 s), and a client waiting on
    the response's start timed out first."""
    server = ambassador_server(tmp_path, "--workers", "2")
    url = server.url + "/api/v1/items?watch=true&timeoutSeconds=60"
    with requests.get(url, stream=True, timeout=(10, 10)) as r:  # the heartbeat is 15 s away
        assert r.status_code == 200
        (tmp_path / "a.mp4").write_bytes(b"x")
        lines = (json.loads(line) for line in r.iter_lines() if line)
        assert next(lines) == {"type": "ADDED", "item": "a.mp4"}


def test_settle_holds_a_new_file_back(tmp_path, ambassador_server):
    server = ambassador_server(tmp_path, "--settle", "3")
    (tmp_path / "a.mp4").write_bytes(b"x")
    written = time.monotonic()
    listed = requests.get(server.url + "/api/v1/items", timeout=5).json()["items"]
    if time.monotonic() - written < 2.5:  # (a machine so loaded that 3 s went by proves nothing)
        assert listed == []
    wait_until(
        lambda: requests.get(server.url + "/api/v1/items", timeout=5).json()["items"] == ["a.mp4"]
    )


def test_metrics_aggregate_across_worker_processes(tmp_path, ambassador_server):
    server = ambassador_server(tmp_path, "--workers", "2")
    for _ in range(20):
        requests.get(server.url + "/api/v1/items", timeout=5)
    text = requests.get(server.url + "/metrics", timeout=5).text
    line = next(
        ln
        for ln in text.splitlines()
        if ln.startswith("ambassador_requests_total") and 'route="/api/v1/items"' in ln
    )
    assert float(line.split()[-1]) == 20


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_bad_root_is_one_line_and_exit_2(tmp_path):
    r = run_cli("ambassador", "--root", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "not a folder" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_flags_are_one_line_and_exit_2(tmp_path):
    for args in (["--port", "99999"], ["--settle", "-1"], ["--workers", "0"], ["--suffix", ""]):
        r = run_cli("ambassador", "--root", str(tmp_path), *args)
        assert r.returncode == 2, args
        assert "Traceback" not in r.stderr


def test_a_long_uri_gets_a_status_body_not_gunicorns_html(tmp_path, ambassador_server):
    server = ambassador_server(tmp_path)
    r = requests.get(server.url + "/api/v1/items/" + "a" * 12_000 + ".mp4", timeout=10)
    assert r.status_code == 414
    body = r.json()
    assert body["kind"] == "Status" and body["reason"] == "RequestURITooLong"


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        r = run_cli("ambassador", "--root", str(tmp_path), "--port", str(taken.getsockname()[1]))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "Address already in use" in r.stderr


def test_the_server_says_where_it_listens(tmp_path):
    (tmp_path / "notes.txt").write_text("not an item")  # (and a hint, at once, on stderr)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kube_workqueue.manager.cli",
            "ambassador",
            "--root",
            str(tmp_path),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"workqueue ambassador: serving {tmp_path} on http://127.0.0.1:")
        hint = proc.stderr.readline()
        assert hint.startswith(f"hint: {tmp_path} has 1 file(s), none ending with .mp4"), hint
        url = line.split(" on ")[1].strip()
        from tests.support.servers import wait_until

        wait_until(lambda: _ready(url), timeout=60)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err, err


def _ready(url: str) -> bool:
    try:
        return requests.get(url + "/readyz", timeout=5).status_code == 200
    except requests.RequestException:  # not up yet, or slow to answer on a loaded machine
        return False


def test_one_snapshot_whatever_the_workers_a_listing_never_goes_back(tmp_path, ambassador_server):
    """Two gunicorn workers serve one published snapshot: while files arrive, consecutive
    listings (each on a new connection, so either worker may answer) never show fewer items or
    an older resourceVersion than the one before."""
    import threading

    server = ambassador_server(tmp_path, "--workers", "2")
    done = threading.Event()

    def arrive():
        for i in range(3_000):
            (tmp_path / f"clip-{i:05d}.mp4").write_bytes(b"x")
        done.set()

    threading.Thread(target=arrive, daemon=True).start()
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until every file is listed
        with requests.get(server.url + "/api/v1/items", timeout=10) as r:
            body = r.json()
        seen.append((int(body["metadata"]["resourceVersion"]), len(body["items"])))
        if done.is_set() and len(body["items"]) == 3_000:
            break
    versions = [v for v, _ in seen]
    counts = [n for _, n in seen]
    assert versions == sorted(versions) and counts == sorted(counts), seen
    assert counts[-1] == 3_000 and len(set(counts)) > 1  # it did watch the folder fill up


def test_a_worker_leaves_with_its_exit_handlers_run_its_streams_flushed_and_its_code():
    """A gunicorn worker ends without the interpreter's teardown (`server._worker_leaves`),
    but as an exit would: its exit handlers run (logging's flush), what it wrote is flushed,
    and its exit code is gunicorn's (a boot error's 3; a message is said, exit code 1)."""
    code = (
        "import atexit, sys\n"
        "from kube_workqueue.ambassador.server import _worker_leaves\n"
        "atexit.register(lambda: sys.stderr.write('handlers ran\\n'))\n"
        "sys.stdout.write('buffered, no newline')\n"
        "_worker_leaves(eval(sys.argv[1]))\n"
        "print('never here')\n"
    )
    for given, code_out, said in ((3, 3, ""), (None, 0, ""), ("why", 1, "why\n")):
        done = subprocess.run([sys.executable, "-c", code, repr(given)], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == code_out, (given, done.stderr)
        assert done.stdout == "buffered, no newline"
        assert done.stderr == "handlers ran\n" + said


def test_a_folder_of_files_none_of_which_is_an_item_gets_a_hint(tmp_path):
    """Only .txt files under the default `--suffix .mp4`: `workqueue run` and the ambassador
    said "0 items" and nothing more - now a hint names the suffix the files have; a folder
    with one item, or none at all, gets none."""
    from kube_workqueue.ambassador.source_options import suffix_hint
    from tests.e2e.conftest import workqueue

    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    config = {"ROOT": str(tmp_path), "SUFFIXES": [".mp4"]}
    said = f"hint: {tmp_path} has 2 file(s), none ending with .mp4; most end with .txt: give " \
        "--suffix .txt"  # fmt: skip
    assert suffix_hint(config) == said
    done = workqueue("run", tmp_path, "--settle", "0", "--state-dir", tmp_path / "state", "--",
                     "true")  # fmt: skip
    assert done.returncode == 0 and said in done.stdout, done.stdout
    (tmp_path / "c.mp4").write_text("c")
    assert suffix_hint(config) is None
    assert suffix_hint({"ROOT": str(tmp_path / "state" / "logs"), "SUFFIXES": [".mp4"]}) is None
