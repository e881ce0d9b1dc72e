"""The folder source of `workqueue run`: the ambassador's own file-system source read in-process.
Its answers are the HTTP API's (compared with the real app's), its listing carries the snapshot
version, its watch is the stream's; and `workqueue run` loads no web stack at all."""

from __future__ import annotations

import json
import queue
import subprocess
import sys

from kube_workqueue.ambassador import create_app
from tests.support.folders import open_folder


def test_lists_and_answers_as_the_http_api_does(tmp_path):
    for name in ("b.x", "a.x", "skip.txt"):
        (tmp_path / name).write_bytes(b"data")
    source = open_folder(str(tmp_path), [".x"], settle=0)
    app = create_app({"ROOT": str(tmp_path), "SUFFIXES": [".x"], "SETTLE": 0})
    try:
        source.wait_settled()
        assert source.list_items() == ["a.x", "b.x"]
        assert isinstance(source.listing_version, int) and source.listing_version > 0
        client = app.test_client()
        for name in ("a.x", "b.x"):
            over_http = client.get(f"/api/v1/items/{name}").get_json()["data"]
            assert source.get_item(name) == over_http == source.peek(name)
        assert source.get_item("skip.txt") is None and source.get_item("../etc") is None
    finally:
        source.stop()
        app.extensions["workqueue.source"].stop()


def test_watch_says_added_then_deleted(tmp_path):
    (tmp_path / "a.x").touch()
    source = open_folder(str(tmp_path), [".x"], settle=0)
    try:
        events = source.watch(timeout_seconds=20)
        assert next(events) == {"type": "ADDED", "item": "a.x"}
        before = source.list_items() and source.listing_version
        (tmp_path / "a.x").unlink()
        assert next(events) == {"type": "DELETED", "item": "a.x"}
        events.close()
        assert source.list_items() == [] and source.listing_version > before
    finally:
        source.stop()


def test_workqueue_run_loads_no_web_stack(tmp_path):
    (tmp_path / "a.x").touch()
    state = tmp_path / "state"
    probe = (
        "import sys\n"
        "from kube_workqueue.manager.cli.main import main\n"
        f"code = main(['run', {str(tmp_path)!r}, '--suffix', '.x', '--settle', '0', "
        f"'--state-dir', {str(state)!r}, '--', 'true'])\n"
        "web = sorted(m for m in ('flask', 'werkzeug', 'waitress', 'requests', "
        "'prometheus_client') if m in sys.modules)\n"
        "print(json.dumps([code, web]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + probe], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    code, web = json.loads(out.stdout.splitlines()[-1])
    assert code == 0 and web == [], web


def test_run_opens_a_folder_with_every_option_it_was_given(tmp_path):
    """`workqueue run DIR --force-polling --poll-interval 5` reaches the folder source (it
    once went through a path that dropped both)."""
    from kube_workqueue.ambassador.sources.registry import resolve
    from kube_workqueue.manager.sources.folder import open_source

    (tmp_path / "a.x").write_bytes(b"x")
    spec = resolve(str(tmp_path), {"SUFFIXES": [".x"], "SETTLE": 0, "FORCE_POLLING": True,
                                   "POLL_INTERVAL": 5.0})  # fmt: skip
    source = open_source(spec.config, f"folder {tmp_path}")
    try:
        assert source.files.use_events is False and source.files.poll_interval == 5.0
        assert source.list_items() == ["a.x"]
    finally:
        source.stop()


def test_a_source_that_stops_following_keeps_its_listing_and_its_data(tmp_path):
    """`workqueue run` without --cancel-removed: the items are those there at the start, so the
    folder is no longer watched - what it lists and the data it gives stay as they were."""
    from tests.support.servers import wait_until

    for name in ("a.x", "b.x"):
        (tmp_path / name).write_bytes(b"data")
    source = open_folder(str(tmp_path), [".x"], settle=0)
    try:
        source.wait_settled()
        source.stop_following()
        thread = source.files._thread
        wait_until(lambda: not thread.is_alive(), timeout=30)  # nothing watches any more
        (tmp_path / "c.x").write_bytes(b"late")
        assert source.list_items() == ["a.x", "b.x"]
        assert source.get_item("a.x")["name"] == "a.x"
    finally:
        source.stop()


class ProtocolOnly:
    """A third-party source with the `ambassador.sources.Source` protocol and nothing else."""

    problem = None
    version = 1

    def __init__(self):
        self.items = {"a.x": {"name": "a.x", "version": "1"}}
        self.stopped = []

    def start(self):
        pass

    def stop(self, wait=True):
        self.stopped.append(wait)

    def page(self, after, limit):
        return sorted(self.items), 0, self.version

    def get(self, name):
        return self.items.get(name)

    def subscribe(self):
        return sorted(self.items), queue.SimpleQueue()

    def unsubscribe(self, q):
        pass

    def ready(self):
        return True

    def settling(self):
        return 0

    def __len__(self):
        return len(self.items)


def test_workqueue_runs_a_source_that_has_the_protocol_and_nothing_else():
    from kube_workqueue.manager.sources.folder import FolderSource

    files = ProtocolOnly()
    source = FolderSource(files, "words").start()
    source.wait_settled(timeout=5)
    source.stop_following()
    assert source.list_items() == ["a.x"] and source.listing_version == 1
    assert source.get_item("a.x") == {"name": "a.x", "version": "1"}
    assert next(source.watch(timeout_seconds=1)) == {"type": "ADDED", "item": "a.x"}
    source.stop()
    assert files.stopped == [False, False]
