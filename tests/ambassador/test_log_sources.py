"""One contract, every log source (Redis Streams, NATS JetStream, Kafka: `tests/support/logs.py`
puts each server behind one face): both shapes, versions that are positions, tombstones, records
pushed as they come, a re-read that is the same version, retention taking records away, an
outage that keeps the listing and then catches up, the backlog on /metrics - and end to end,
each record run once by `workqueue run`, and once only across a `kill -9` of the ambassador."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import requests

from kube_workqueue.ambassador.sources.log_records import Backlog
from kube_workqueue.manager.sources.held_data import DATA_PAGE
from tests.ambassador.test_redis_source import opened
from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.support.logs import KafkaLog, NatsLog, RedisLog, on_a_server_of_its_own
from tests.support.marks import marking_worker, read_marks
from tests.support.servers import Server, free_port, wait_until


@pytest.fixture(params=["redis", "nats", "kafka"])
def log(request):
    """A fresh log (a stream or topic of its own) on the session's server of each kind."""
    if request.param == "redis":
        return RedisLog(request.getfixturevalue("redis_store"))
    if request.param == "kafka":
        return KafkaLog(request.getfixturevalue("kafka_store"))
    return NatsLog(request.getfixturevalue("nats_store"))


@pytest.fixture(params=["redis", "nats", "kafka"])
def own_log(request, tmp_path):
    """A log on a server of its own that keeps its records across a restart (to stop it)."""
    kafka_keeps_in = request.getfixturevalue("object_store") if request.param == "kafka" else None
    yield from on_a_server_of_its_own(request.param, redis_keeps_in=tmp_path,
                                      kafka_keeps_in=kafka_keeps_in)  # fmt: skip


def trimmed(log) -> None:
    """Skip a test of trimming on a server that cannot trim (Tansu: `KafkaLog`)."""
    if not log.trims:
        pytest.skip(f"the {log.kind} broker under test cannot trim a log (DeleteRecords)")


def test_keyed_records_are_items_whose_version_is_their_newest_position(log):
    first = log.append("a.mp4", width="320", priority="5", group="acme")
    log.append("b.mp4", name="clash")
    source = opened(log.url(keyed=True))
    _, events = source.subscribe()
    try:
        assert source.mode == "events" and source.page(None, None)[0] == ["a.mp4", "b.mp4"]
        a = source.get("a.mp4")
        assert a["version"] == log.version(first) and a["position"] == first
        assert (a["width"], a["priority"], a["group"]) == ("320", 5, "acme")
        assert source.get("b.mp4")["field.name"] == "clash"  # the API's own keys stay its own
        assert source.priorities(None) == {"a.mp4": 5}
        newer = log.append("a.mp4", width="640")  # pushed: no polling
        wait_until(lambda: source.get("a.mp4")["version"] == log.version(newer))
        log.tombstone("b.mp4")
        wait_until(lambda: source.page(None, None)[0] == ["a.mp4"])
        seen = {(e["type"], e["item"]) for e in (events.get(timeout=5) for _ in range(2))}
        assert seen == {("ADDED", "a.mp4"), ("DELETED", "b.mp4")}
        wait_until(lambda: source.backlog() == (0, 0.0))  # all read is served
    finally:
        source.unsubscribe(events)
        source.stop()
    again = opened(log.url(keyed=True))  # a restart reads the log again
    try:
        assert again.get("a.mp4")["version"] == log.version(newer)  # the same record, version
    finally:
        again.stop()


def test_every_record_is_an_item_named_by_its_position_and_retention_takes_it_away(log):
    positions = [log.append(f"clip-{i}.mp4", n=str(i)) for i in range(3)]
    names = [log.name(p) for p in positions]  # positions, within the log's identity
    source = opened(log.url(keyed=False))
    try:
        assert source.page(None, None)[0] == names  # names sort in log order
        assert source.get(names[1])["n"] == "1" and source.get(names[1])["position"] == positions[1]
        later = log.name(log.append("clip-3.mp4"))
        wait_until(lambda: source.page(None, None)[0] == [*names, later])
        trimmed(log)  # (what follows needs a log that can be trimmed)
        log.trim(keep=1)  # retention: the trimmed records leave at the next full listing
        source._relist()
        assert source.page(None, None)[0] == [later]
    finally:
        source.stop()


def test_an_outage_keeps_the_listing_and_the_feed_catches_up_after_it(own_log):
    own_log.append("a.mp4")
    source = opened(own_log.url(keyed=True))
    source.poll_interval = 0.2
    try:
        own_log.server.stop()
        wait_until(lambda: source.problem is not None, timeout=60)  # not ready: a 503
        assert source.page(None, None)[0] == ["a.mp4"]  # never "everything was removed"
        own_log.server.start()
        wait_until(lambda: source.problem is None and source.mode == "events", timeout=60)
        own_log.append("b.mp4")  # read by the new feed, pushed
        wait_until(lambda: source.page(None, None)[0] == ["a.mp4", "b.mp4"], timeout=30)
    finally:
        source.stop()


def test_the_backlog_counts_records_read_and_not_served_and_the_oldest_ones_age():
    backlog = Backlog()
    backlog.read([100.0, 101.0, 102.0], beyond=4)
    assert backlog.figures(now=110.0) == (7, 10.0)
    backlog.served(2)
    assert backlog.figures(now=110.0) == (5, 8.0)
    backlog.served(5)
    backlog.read([], beyond=0)
    assert backlog.figures(now=110.0) == (0, 0.0)


def test_the_backlog_is_on_metrics(log, ambassador_server):
    log.append("a.mp4")
    server = ambassador_server(log.url(keyed=True))
    log.append("b.mp4")

    def figures():
        text = requests.get(f"{server.url}/metrics", timeout=10).text
        lines = [line for line in text.splitlines() if line.startswith("ambassador_log_")]
        return sorted(line.split()[0] for line in lines), lines

    wait_until(lambda: requests.get(f"{server.url}/api/v1/items", timeout=10).json()["items"]
               and len(figures()[0]) == 2)  # fmt: skip
    names, lines = figures()
    assert names == ["ambassador_log_oldest_unread_age_seconds", "ambassador_log_unread_records"]
    wait_until(lambda: all(line.split()[1] == "0.0" for line in figures()[1]))


def test_a_log_is_served_and_run_once_end_to_end(tmp_path, log, ambassador_server):
    for i in range(4):
        log.append(f"clip-{i}.mp4")
    log.append("clip-0.mp4")  # clip-0 again: a new record, a new version
    url = log.url(keyed=True)
    server = ambassador_server(url)
    full = requests.get(f"{server.url}/api/v1/items", params={"view": "full"}, timeout=10).json()
    assert [i["name"] for i in full["items"]] == [f"clip-{i}.mp4" for i in range(4)]
    assert "removals" not in full["metadata"]  # keyed: a tombstone's removal is a removal
    worker, marks = marking_worker(tmp_path, 0.0)
    command = ("run", url, "--state-dir", tmp_path / "state", "--", worker)
    done = workqueue(*command, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "4 items: 4 succeeded" in done.stdout
    again = workqueue(*command, timeout=120)  # the log read again: nothing new to run
    assert "0 succeeded, 4 already done" in again.stdout, again.stdout
    starts = [n for e, _, n in read_marks(marks) if e == "start"]
    assert sorted(starts) == [f"clip-{i}.mp4" for i in range(4)]  # each once


def test_records_added_while_the_ambassador_was_killed_run_once_after_its_restart(tmp_path, log):
    """`kill -9` of the log's ambassador mid-stream: the manager keeps polling (an outage),
    the records added meanwhile are read from the retained log at the restart, and by the
    workers' marks each record ran exactly once - none lost, none twice."""
    url = log.url(keyed=True)
    for i in range(5):
        log.append(f"early-{i}.mp4")
    port = free_port()
    ambassador = Server(url, port, ())  # (its folders, left by the kill, go at the restart)
    ambassador.wait_ready()
    worker, marks = marking_worker(tmp_path, 0.05)
    manager = spawn_workqueue(
        "manager", "--source", f"http://127.0.0.1:{port}", "--poll-interval", "0.2",
        "--state-dir", tmp_path / "state", "--worker-cmd", worker, "--parallelism", "2",
    )  # fmt: skip
    ends = lambda: sorted(n for e, _, n in read_marks(marks) if e == "end")  # noqa: E731
    try:
        wait_until(lambda: len(ends()) == 5, timeout=60)
        ambassador.kill_9()  # the whole ambassador at once, as a pod's end
        for i in range(5):
            log.append(f"while-down-{i}.mp4")
        log.append("early-0.mp4")  # a new version of one that ran: not run again
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


GATED_WORKER = """#!{python}
import json, os, sys, time
data = json.load(open(os.environ["WORK_ITEM_FILE"]))
with open({started!r}, "a") as f:
    f.write(data["name"] + " " + data.get("n", "?") + "\\n")
while not os.path.exists({gate!r}):
    time.sleep(0.05)
"""


def test_records_trimmed_by_retention_are_never_cancelled(tmp_path, log):
    """Every record an item, `--cancel-removed`: the log trims records that wait (and the one
    that runs) - the listing says its items leave by retention only, so nothing is cancelled:
    the running one finishes, and the waiting ones run from the data the manager holds."""
    trimmed(log)
    positions = [log.append(f"clip-{i}.mp4", n=str(i)) for i in range(4)]
    started, gate = tmp_path / "started.txt", tmp_path / "gate.open"
    worker = tmp_path / "worker.py"
    worker.write_text(GATED_WORKER.format(python=sys.executable, started=str(started),
                                          gate=str(gate)))  # fmt: skip
    worker.chmod(0o755)
    port = free_port()
    ambassador = Server(log.url(keyed=False), port, ("--relist-interval", "0.5"))
    ambassador.wait_ready()
    listing = requests.get(f"{ambassador.url}/api/v1/items", timeout=10).json()
    assert listing["items"] == [log.name(p) for p in positions]
    assert listing["metadata"]["removals"] == "retention"
    manager_log = tmp_path / "manager.log"
    with open(manager_log, "w") as err:
        manager = subprocess.Popen(
            [sys.executable, "-m", "kube_workqueue.manager.cli", "manager", "--source",
             ambassador.url, "--poll-interval", "0.2", "--cancel-removed",
             "--state-dir", str(tmp_path / "state"), "--worker-cmd", str(worker),
             "--parallelism", "1"],
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        wait_until(lambda: started.exists() and started.read_text().strip(), timeout=60)
        log.trim(keep=0)  # every record, the running one's too
        wait_until(lambda: "by its retention" in manager_log.read_text(), timeout=60)
        gate.touch()
        wait_until(lambda: len(started.read_text().split("\n")) > 4, timeout=60)
    finally:
        gate.touch()
        manager.send_signal(signal.SIGTERM)
        manager.wait(30)
        ambassador.stop()
    ran = sorted(started.read_text().split("\n")[:-1])
    assert ran == sorted(f"{log.name(p)} {i}" for i, p in enumerate(positions))  # data whole
    said = workqueue("status", "--state-dir", tmp_path / "state", "--json").stdout
    assert json.loads(said)["counts"]["cancelled"] == 0


GATED_SHELL_WORKER = """#!/bin/sh
while [ ! -e {gate} ]; do sleep 0.05; done
position=$(sed -n 's/.*"position": *"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "$position" >> {ran}
"""


def test_records_trimmed_mid_burst_run_from_the_data_the_manager_listed(tmp_path, log):
    """A burst of more records than a page of data, every one listed by the manager, then
    trimmed by retention before most of them ran (the ambassador relists every 0.5 s): a listed
    record is a promise - each runs once from the data the manager took with its listing."""
    trimmed(log)
    count = DATA_PAGE + 100
    log.append_many([f"clip-{i}.mp4" for i in range(count)])
    ran, gate = tmp_path / "ran.txt", tmp_path / "gate.open"
    worker = tmp_path / "worker.sh"
    worker.write_text(GATED_SHELL_WORKER.format(gate=gate, ran=ran))
    worker.chmod(0o755)
    ambassador = Server(log.url(keyed=False), free_port(), ("--relist-interval", "0.5"))
    ambassador.wait_ready()
    names = requests.get(f"{ambassador.url}/api/v1/items", params={"limit": count + 1},
                         timeout=10).json()["items"]  # fmt: skip
    assert len(names) == count
    state, manager_log = tmp_path / "state", tmp_path / "manager.log"
    with open(manager_log, "w") as err:
        manager = subprocess.Popen(
            [sys.executable, "-m", "kube_workqueue.manager.cli", "manager", "--source",
             ambassador.url, "--poll-interval", "0.2", "--state-dir", str(state),
             "--worker-cmd", str(worker), "--parallelism", "2"],
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:

        def listed() -> int:
            said = workqueue("status", "--state-dir", state, "--json")
            return said.returncode == 0 and sum(json.loads(said.stdout)["counts"].values())

        wait_until(lambda: listed() == count, timeout=60)
        log.trim(keep=0)
        wait_until(lambda: not requests.get(f"{ambassador.url}/api/v1/items", timeout=10)
                   .json()["items"], timeout=60)  # relisted: trimmed there too  # fmt: skip
        gate.touch()
        wait_until(lambda: ran.exists() and len(ran.read_text().split()) >= count, timeout=120)
        wait_until(lambda: json.loads(workqueue("status", "--state-dir", state, "--json").stdout)
                   ["counts"].get("pending", 0) == 0, timeout=60)  # fmt: skip
    finally:
        gate.touch()
        manager.send_signal(signal.SIGTERM)
        manager.wait(30)
        ambassador.stop()
    ran_names = [log.name(p) for p in ran.read_text().split()]  # (each wrote its position)
    assert sorted(ran_names) == sorted(names)  # each once, none gone
