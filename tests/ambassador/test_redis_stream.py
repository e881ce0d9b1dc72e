"""The Redis stream source (a log, `ambassador/sources/redis_stream.py` over the log core)
against a real redis-server: both shapes, versions that are positions, tombstones, records
pushed as they come, a re-read that is the same version, the bad sources - and end to end, each
record run once by `workqueue run` and again by nothing after a restart, and records added
while the ambassador was killed run once after it restarts."""

from __future__ import annotations

import json
import os
import signal

import pytest
import requests

from kube_workqueue.ambassador.sources.log_records import LogShape
from kube_workqueue.ambassador.sources.registry import SourceConfigError
from tests.ambassador.test_redis_source import opened
from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.e2e.test_secrets_and_names import descendants
from tests.support.marks import marking_worker, read_marks
from tests.support.servers import Server, free_port, wait_until
from tests.support.stores import unique


def test_the_log_core_keeps_the_newest_record_per_key_and_a_tombstone_removes_it():
    shape = LogShape("file")
    items = shape.items([
        ("1-0", {"file": "a.mp4", "w": "1"}), ("2-0", {"file": "b.mp4"}),
        ("3-0", {"file": "a.mp4", "w": "2"}), ("4-0", {"file": "b.mp4", "deleted": "true"}),
        ("5-0", {"other": "no key"}),
    ])  # fmt: skip
    assert list(items) == ["a.mp4"] and json.loads(items["a.mp4"])["p"] == "3-0"
    every = LogShape(None).items([("1-0", {"x": "1"}), ("2-0", {"x": "2"})])
    assert list(every) == ["1-0", "2-0"]


def test_keyed_records_are_items_whose_version_is_their_newest_position(redis_store):
    r, key = redis_store.client(), unique("stream")
    first = r.xadd(key, {"file": "a.mp4", "width": "320", "priority": "5", "group": "acme"})
    r.xadd(key, {"file": "b.mp4", "name": "clash", "version": "v9"})
    source = opened(f"{redis_store.url}?stream={key}&name=file")
    _, events = source.subscribe()
    try:
        assert source.mode == "events" and source.page(None, None)[0] == ["a.mp4", "b.mp4"]
        a = source.get("a.mp4")
        assert a["version"] == f"o-{first}" and a["position"] == first and a["log"] == key
        assert (a["width"], a["priority"], a["group"]) == ("320", 5, "acme")
        b = source.get("b.mp4")  # the API's own keys stay the API's
        assert b["name"] == "b.mp4" and b["field.name"] == "clash" and b["field.version"] == "v9"
        assert source.priorities(None) == {"a.mp4": 5}
        newer = r.xadd(key, {"file": "a.mp4", "width": "640"})  # pushed: no polling
        wait_until(lambda: source.get("a.mp4")["version"] == f"o-{newer}")
        r.xadd(key, {"file": "b.mp4", "deleted": "true"})  # a tombstone
        wait_until(lambda: source.page(None, None)[0] == ["a.mp4"])
        seen = {(e["type"], e["item"]) for e in (events.get(timeout=5) for _ in range(2))}
        assert seen == {("ADDED", "a.mp4"), ("DELETED", "b.mp4")}
    finally:
        source.unsubscribe(events)
        source.stop()
    again = opened(f"{redis_store.url}?stream={key}&name=file")  # a restart reads the log again
    try:
        assert again.get("a.mp4")["version"] == f"o-{newer}"  # the same record, the same version
    finally:
        again.stop()


def test_every_record_is_an_item_named_by_its_position(redis_store):
    r, key = redis_store.client(), unique("stream")
    ids = [r.xadd(key, {"n": str(i)}) for i in range(3)]
    source = opened(f"{redis_store.url}?stream={key}")
    try:
        assert source.page(None, None)[0] == ids
        assert source.get(ids[1])["n"] == "1"
        r.xtrim(key, maxlen=1, approximate=False)  # retention: the trimmed records leave
        source._relist()
        assert source.page(None, None)[0] == ids[2:]
    finally:
        source.stop()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda r, key: None, "no such stream"),
        (lambda r, key: r.sadd(key, "x"), "the key holds a set, not a stream"),
    ],
)
def test_a_stream_that_is_not_there_is_one_line(redis_store, make, said):
    r, key = redis_store.client(), unique("stream")
    make(r, key)
    with pytest.raises(SourceConfigError, match=said):
        opened(f"{redis_store.url}?stream={key}")


def test_a_stream_is_served_and_run_once_end_to_end(tmp_path, redis_store, ambassador_server):
    r, key = redis_store.client(), unique("stream")
    for i in range(4):
        r.xadd(key, {"file": f"clip-{i}.mp4"})
    r.xadd(key, {"file": "clip-0.mp4"})  # clip-0 again: a new record, a new version
    url = f"{redis_store.url}?stream={key}&name=file"
    server = ambassador_server(url)
    full = requests.get(f"{server.url}/api/v1/items", params={"view": "full"}, timeout=10).json()
    assert [i["name"] for i in full["items"]] == [f"clip-{i}.mp4" for i in range(4)]
    worker, marks = marking_worker(tmp_path, 0.0)
    command = ("run", url, "--state-dir", tmp_path / "state", "--", worker)
    done = workqueue(*command, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "4 items: 4 succeeded" in done.stdout
    again = workqueue(*command, timeout=120)  # the log read again: nothing new to run
    assert "0 succeeded, 4 already done" in again.stdout, again.stdout
    starts = [n for e, _, n in read_marks(marks) if e == "start"]
    assert sorted(starts) == [f"clip-{i}.mp4" for i in range(4)]  # each once


def test_records_added_while_the_ambassador_was_killed_run_once_after_its_restart(
    tmp_path, redis_store
):
    """`kill -9` of the stream's ambassador mid-stream: the manager keeps polling (an outage),
    the records added meanwhile are read from the retained stream at the restart, and by the
    workers' marks each record ran exactly once - none lost, none twice."""
    r, key = redis_store.client(), unique("stream")
    url = f"{redis_store.url}?stream={key}&name=file"
    for i in range(5):
        r.xadd(key, {"file": f"early-{i}.mp4"})
    port = free_port()
    ambassador = Server(url, port, ())
    ambassador.wait_ready()
    worker, marks = marking_worker(tmp_path, 0.05)
    manager = spawn_workqueue(
        "manager", "--source", f"http://127.0.0.1:{port}", "--poll-interval", "0.2",
        "--state-dir", tmp_path / "state", "--worker-cmd", worker, "--parallelism", "2",
    )  # fmt: skip
    ends = lambda: sorted(n for e, _, n in read_marks(marks) if e == "end")  # noqa: E731
    try:
        wait_until(lambda: len(ends()) == 5, timeout=60)
        for pid in [ambassador.process.pid, *descendants(ambassador.process.pid)]:
            os.kill(pid, signal.SIGKILL)  # the whole ambassador at once, as a pod's end
        ambassador.process.wait(10)
        for i in range(5):
            r.xadd(key, {"file": f"while-down-{i}.mp4"})
        r.xadd(key, {"file": "early-0.mp4"})  # a new version of one that ran: not run again
        ambassador = Server(url, port, ())  # the same address: the manager finds it again
        ambassador.wait_ready()
        wait_until(lambda: len(ends()) == 10, timeout=60)
    finally:
        manager.send_signal(signal.SIGTERM)
        manager.wait(30)
        ambassador.stop()
    starts = sorted(n for e, _, n in read_marks(marks) if e == "start")
    assert starts == sorted([f"early-{i}.mp4" for i in range(5)]
                            + [f"while-down-{i}.mp4" for i in range(5)])  # fmt: skip
