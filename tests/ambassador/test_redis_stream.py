"""The Redis stream source's own part (`ambassador/sources/redis_stream.py`): the log core's
fold, and the bad sources against a real redis-server. What every log source promises - the
shapes, versions, tombstones, trimming, outages, end to end - is the contract suite's:
test_log_sources.py."""

from __future__ import annotations

import json

import pytest

from kube_workqueue.ambassador.sources.log_records import LogShape
from kube_workqueue.ambassador.sources.registry import SourceConfigError
from tests.ambassador.test_redis_source import opened
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
