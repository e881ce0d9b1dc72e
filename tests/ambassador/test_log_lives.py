"""The log contract, part two: a log's lives and what it holds - for every log source (Redis
Streams, NATS JetStream, Kafka; `tests/support/logs.py`). A log made again while it is read,
lost with its server's storage, and made again while its ambassador is killed with -9: every
record of each new log runs once, nothing of an old one runs again, and `status` says the log
started over. A position that goes back within one life is held, never taken as done. A
listing is never served short: a reader held back, and a client that drops messages for a
slow consumer (forced on NATS, the one client that can), still find every record."""

from __future__ import annotations

import json
import signal

import pytest

from kube_workqueue.ambassador.sources import log_records, nats_stream
from tests.ambassador.test_redis_source import opened
from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.support.logs import on_a_server_of_its_own
from tests.support.marks import marking_worker, read_marks
from tests.support.servers import Server, free_port, wait_until


@pytest.fixture(params=["redis", "nats", "kafka"])
def fresh_log(request):
    """A log on a server of its own that keeps nothing across a restart (its storage lost)."""
    yield from on_a_server_of_its_own(request.param)


def test_a_log_made_again_runs_each_new_record_once_and_nothing_of_the_old_again(
    tmp_path, fresh_log
):
    """Every record an item, named by position: three lives of one log - made again while
    served (JetStream: deleted and added; Redis: deleted; Kafka: the broker lost it), then
    again while the ambassador was killed with -9 - each record runs once by the workers'
    marks, though the positions repeat, and `status` says the log started over."""
    log, state = fresh_log, tmp_path / "state"
    url = log.url(keyed=False)
    for i in range(3):
        log.append(f"first-{i}.mp4")
    port = free_port()
    ambassador = Server(url, port, ("--relist-interval", "1"))
    ambassador.wait_ready()
    worker, marks = marking_worker(tmp_path, 0.0)
    manager = spawn_workqueue(
        "manager", "--source", f"http://127.0.0.1:{port}", "--poll-interval", "0.2",
        "--state-dir", state, "--worker-cmd", worker, "--parallelism", "2",
    )  # fmt: skip
    ends = lambda: [n for e, _, n in read_marks(marks) if e == "end"]  # noqa: E731
    try:
        wait_until(lambda: len(ends()) == 3, timeout=60)
        log.remake()  # mid-run: the same log's name, its positions from the start again
        for i in range(3):
            log.append(f"second-{i}.mp4")
        wait_until(lambda: len(ends()) == 6, timeout=90)

        def said() -> dict:
            done = workqueue("status", "--state-dir", state, "--json")
            facts = (json.loads(done.stdout).get("manager") or {}) if done.returncode == 0 else {}
            return (facts.get("source_log") or {}).get("startedOver") or {}

        wait_until(lambda: said(), timeout=60)
        shown = workqueue("status", "--state-dir", state).stdout
        assert "source: its log started over at" in shown, shown
        ambassador.kill_9()
        log.remake()  # while nobody reads it
        for i in range(3):
            log.append(f"third-{i}.mp4")
        ambassador = Server(url, port, ("--relist-interval", "1"))  # the same address
        ambassador.wait_ready()
        wait_until(lambda: len(ends()) == 9, timeout=90)
    finally:
        manager.send_signal(signal.SIGTERM)
        manager.wait(30)
        ambassador.stop()
    starts = [n for e, _, n in read_marks(marks) if e == "start"]
    assert len(starts) == 9 and len(set(starts)) == 9, starts  # each once, none again


def test_a_position_that_goes_back_within_one_life_is_held(fresh_log):
    """The same log, positions below ones already read (a Redis stream made again with ids
    given by hand): the listing is held as it was and says why - its new records are never
    taken for ones that ran. JetStream never gives a stream's sequence twice in one life and
    Tansu never truncates a partition, so only Redis can be made to do it here."""
    if fresh_log.kind != "redis":
        pytest.skip(f"the {fresh_log.kind} server under test cannot put a position back "
                    "within one life of a log")  # fmt: skip
    client, key = fresh_log.client, fresh_log.key
    for i in range(1, 4):
        client.xadd(key, {"file": f"a{i}.mp4"}, id=f"{i}-1")
    source = opened(fresh_log.url(keyed=False))
    try:
        client.delete(key)
        client.xadd(key, {"file": "b.mp4"}, id="2-5")  # at or below ids already read
        wait_until(lambda: source.problem is not None, timeout=30)  # the feed looked, and held
        assert "its ids go back to 2-5" in source.problem and "held" in source.problem
        assert not source.ready()  # /readyz: 503, and why
        assert source.page(None, None)[0] == ["1-1", "2-1", "3-1"]  # kept, not taken as done
    finally:
        source.stop()


def test_a_listing_is_never_served_short(fresh_log, monkeypatch):
    """A reader held back (every record's fold waits) and, on NATS, a client made to drop
    what its feed cannot keep up with (a pending limit of 8 messages and a slow callback): the
    cold listing and the records that come after it are each there, once; the drops counted."""
    log = fresh_log
    log.append_many([f"cold-{i}.mp4" for i in range(1500)])
    held_back = log_records.LogShape.change

    def slow_change(self, position, fields):
        if position.endswith("7"):
            import time

            time.sleep(0.001)
        return held_back(self, position, fields)

    monkeypatch.setattr(log_records.LogShape, "change", slow_change)
    if log.kind == "nats":
        monkeypatch.setattr(nats_stream.JetStreamLister, "feed_pending", 8)
        quick = nats_stream.JetStreamLister._deliver_to

        def slow_delivery(deliver):
            handed = quick(deliver)

            async def slowly(msg) -> None:
                import asyncio

                await asyncio.sleep(0.002)
                await handed(msg)

            return slowly

        monkeypatch.setattr(nats_stream.JetStreamLister, "_deliver_to", staticmethod(slow_delivery))
    source = opened(log.url(keyed=False))
    try:
        assert len(source) == 1500  # the cold listing, whole
        log.append_many([f"hot-{i}.mp4" for i in range(1500)])
        wait_until(lambda: len(source) == 3000, timeout=120)
        if log.kind == "nats":
            assert source.lister.dropped > 0  # dropped, said and listed again: never lost
    finally:
        source.stop()
