"""The poller: jittered periods, an outage logged once with nothing lost, and a source without
a watch stream polled instead."""

from __future__ import annotations

import logging
import random
import threading

from kube_workqueue.manager.runtime.poller import Poller, jittered
from kube_workqueue.manager.sources.http import SourceUnavailable


def test_jitter_stays_within_bounds_and_varies():
    rng = random.Random(1)
    periods = [jittered(10, 0.2, rng) for _ in range(1000)]
    assert min(periods) >= 8 and max(periods) <= 12
    assert len({round(p, 6) for p in periods}) > 900


class FlakyClient:
    base_url = "http://source.test"

    def __init__(self, answers):
        self.answers = list(answers)

    def list_items(self):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_an_outage_is_logged_once_and_nothing_is_lost(caplog):
    got = []
    down = SourceUnavailable("source http://source.test unreachable (timed out)")
    poller = Poller(FlakyClient([["a"], down, down, down, ["a", "b"]]), got.extend)
    with caplog.at_level(logging.INFO, logger="kube_workqueue.manager"):
        for _ in range(5):
            poller.poll_once()
    assert got == ["a", "a", "b"]
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, m in said if "unreachable" in m] == ["WARNING"]
    assert [level for level, m in said if "is back" in m] == ["INFO"]  # good news: not a warning


def test_a_source_without_watch_is_polled_instead(caplog):
    from kube_workqueue.manager.sources.http import WatchUnsupported

    class NoWatch(FlakyClient):
        def watch(self, timeout_seconds=None, read_timeout=None):
            raise WatchUnsupported("http://source.test has no watch stream (HTTP 400)")

    got = []
    stop = threading.Event()
    client = NoWatch([["a", "b"]])

    def enqueue(names):
        got.extend(names)
        stop.set()

    poller = Poller(client, enqueue, interval=0.01, stop=stop)
    with caplog.at_level(logging.WARNING, logger="kube_workqueue.manager"):
        poller.follow_watch()
    assert got == ["a", "b"]
    assert "polling every" in caplog.text
