"""The Redis source against a real redis-server: members as items, data from a hash, versions,
changes by keyspace notifications and by polling, and the bad sources."""

from __future__ import annotations

import pytest

from kube_workqueue.ambassador.sources.registry import SourceConfigError, resolve, source_type
from tests.support.servers import wait_until
from tests.support.stores import RedisServer, unique


def opened(url: str, **options):
    spec = resolve(url, options)
    kind = source_type(spec.kind)
    kind.check(spec.config)
    source = kind.open(spec.config)
    source.start()
    return source


def test_members_are_items_with_data_from_a_hash(redis_store):
    r, key, data = redis_store.client(), unique("set"), unique("hash")
    r.sadd(key, "a.mp4", "b c.mp4", "../odd.mp4", "notes.txt")
    r.hset(data, mapping={"a.mp4": '{"bitrate": 800, "name": "ignored"}', "b c.mp4": "plain"})
    source = opened(f"{redis_store.url}?set={key}&data={data}", SUFFIXES=[".mp4"])
    try:
        assert source.page(None, None)[0] == ["../odd.mp4", "a.mp4", "b c.mp4"]
        a = source.get("a.mp4")
        assert a["name"] == "a.mp4" and a["bitrate"] == 800 and a["contentType"] == "video/mp4"
        assert source.get("b c.mp4")["value"] == "plain"
        assert source.get("../odd.mp4")["version"] == "d-none"  # in the set, no data yet
        assert source.get("notes.txt") is None
    finally:
        source.stop()


def test_new_data_is_a_new_version_and_changes_are_pushed(redis_store):
    r, key, data = redis_store.client(), unique("set"), unique("hash")
    r.sadd(key, "a")
    r.hset(data, "a", '{"n": 1}')
    source = opened(f"{redis_store.url}?set={key}&data={data}")
    _, events = source.subscribe()
    try:
        assert source.mode == "events"  # the server sends keyspace notifications
        first = source.get("a")["version"]
        r.hset(data, "a", '{"n": 2}')
        wait_until(lambda: source.get("a")["version"] != first)
        assert source.get("a")["n"] == 2
        r.sadd(key, "b")
        r.srem(key, "a")
        wait_until(lambda: source.page(None, None)[0] == ["b"])
        seen = {(e["type"], e["item"]) for e in (events.get(timeout=5) for _ in range(2))}
        assert seen == {("ADDED", "b"), ("DELETED", "a")}
    finally:
        source.unsubscribe(events)
        source.stop()


def test_without_notifications_the_set_is_polled():
    server = RedisServer(notifications=False)
    try:
        r, key = server.client(), unique("set")
        r.sadd(key, "a")
        source = opened(f"{server.url}?set={key}", POLL_INTERVAL=0.1)
        try:
            assert source.mode == "polling"
            assert source.get("a")["version"] == "m-1"
            r.sadd(key, "b")
            wait_until(lambda: source.page(None, None)[0] == ["a", "b"])
            server.process.kill()  # an outage: the items stay, the source is not ready
            wait_until(lambda: not source.ready())
            assert source.page(None, None)[0] == ["a", "b"]
        finally:
            source.stop()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis://localhost:6379/0", "a Redis source is redis://host:port/db?set=KEY"),
        ("redis://localhost:6379/0?set=", "a Redis source is redis://host:port/db?set=KEY"),
        ("redis://localhost:6379/0?set=k&bad=1", "a Redis source is"),
        ("redis://localhost:6379/x?set=k", "the Redis database must be a number"),
        ("redis://localhost:99999/0?set=k", "not a port number"),
    ],
)
def test_malformed_redis_urls(url, said):
    with pytest.raises(SourceConfigError, match=said.replace("?", r"\?")):
        resolve(url, {})


def test_unreachable_or_wrong_keys_at_start(redis_store):
    kind = source_type("redis")
    with pytest.raises(SourceConfigError, match="cannot reach the server"):
        kind.check(resolve("redis://127.0.0.1:9/0?set=k", {}).config)
    r, key = redis_store.client(), unique("str")
    r.set(key, "not a set")
    with pytest.raises(SourceConfigError, match="holds a string, not a set"):
        kind.check(resolve(f"{redis_store.url}?set={key}", {}).config)
    with pytest.raises(SourceConfigError, match="--recursive applies to folder sources only"):
        resolve(f"{redis_store.url}?set={key}", {"RECURSIVE": True})


def test_a_sorted_set_ranks_its_members_by_score_and_a_new_score_is_no_new_version(redis_store):
    r, key, data = redis_store.client(), unique("zset"), unique("hash")
    r.zadd(key, {"a": 0, "b": 10, "c": -2.5, "d": 3})
    r.hset(data, mapping={"a": '{"priority": 99, "n": 1}'})  # a score wins over data
    source = opened(f"{redis_store.url}?zset={key}&data={data}")
    _, events = source.subscribe()
    try:
        assert source.ranks and source.mode == "events"  # sorted sets notify too (`z`)
        assert source.page(None, None)[0] == ["a", "b", "c", "d"]
        assert source.priorities(None) == {"b": 10, "c": -3, "d": 3}  # a fraction rounds down
        assert source.priorities(["a", "b", "gone"]) == {"b": 10}
        a = source.get("a")
        assert a["priority"] == 0 and a["n"] == 1
        version = source.get("d")["version"]
        r.zadd(key, {"d": 50})
        wait_until(lambda: source.priorities(["d"]) == {"d": 50})
        assert source.get("d")["version"] == version  # a priority is not content
        assert events.get(timeout=10) == {"type": "ADDED", "item": "d"}  # told again
    finally:
        source.unsubscribe(events)
        source.stop()


def test_a_plain_set_ranks_by_its_data_priority_and_a_set_without_data_not_at_all(redis_store):
    r, key, data = redis_store.client(), unique("set"), unique("hash")
    r.sadd(key, "a", "b", "c")
    r.hset(data, mapping={"a": '{"priority": 4}', "b": '{"priority": "high"}', "c": "priority"})
    source = opened(f"{redis_store.url}?set={key}&data={data}")
    bare = opened(f"{redis_store.url}?set={key}")
    try:
        assert source.priorities(None) == {"a": 4}  # not an integer: no priority
        assert not bare.ranks and bare.priorities(None) == {}
    finally:
        source.stop()
        bare.stop()


@pytest.mark.parametrize(
    "query, message",
    [("set=a&zset=b", "set=KEY (or zset=KEY)"), ("zset=", "set=KEY (or zset=KEY)")],
)
def test_a_set_or_a_sorted_set_not_both(redis_store, query, message):
    with pytest.raises(SourceConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(f"{redis_store.url}?{query}", {})


def test_a_sorted_set_source_refuses_a_plain_set(redis_store):
    r, key = redis_store.client(), unique("set")
    r.sadd(key, "a")
    spec = resolve(f"{redis_store.url}?zset={key}", {})
    with pytest.raises(SourceConfigError, match="holds a set, not a sorted set"):
        source_type(spec.kind).check(spec.config)


def skipped_count(reason: str) -> float:
    """`ambassador_names_skipped_total{reason}` in this process."""
    from prometheus_client import CollectorRegistry

    from kube_workqueue.ambassador.metrics import skipped_names_counter

    registry = CollectorRegistry()
    registry.register(skipped_names_counter())
    try:
        value = registry.get_sample_value("ambassador_names_skipped_total", {"reason": reason})
    finally:
        registry.unregister(skipped_names_counter())
    return value or 0.0


@pytest.mark.parametrize("sorted_set", [False, True], ids=["set", "zset"])
def test_a_member_no_client_could_ask_for_is_skipped_with_a_word_and_never_stops_the_source(
    redis_store, caplog, sorted_set
):
    """Not UTF-8, a NUL, a line break: each said once (escaped), counted, and left out - at
    the first listing and when added later - while every other member is served."""
    r, key = redis_store.client(), unique("set")
    add = (lambda *m: r.zadd(key, dict.fromkeys(m, 1))) if sorted_set else (
        lambda *m: r.sadd(key, *m))  # fmt: skip
    before = {why: skipped_count(why) for why in ("not_utf8", "nul", "line_break")}
    add(b"good-1", b"bad-\xff\xfe", b"nul\x00x", b"line\nbreak", b"cr\rhere")
    query = "zset" if sorted_set else "set"
    source = opened(f"{redis_store.url}?{query}={key}", POLL_INTERVAL=0.1)
    try:
        assert source.page(None, None)[0] == ["good-1"]
        add(b"good-2", b"\xc3\x28late")  # added while running: the source goes on
        wait_until(lambda: source.page(None, None)[0] == ["good-1", "good-2"])
        assert source.ready() and source.problem is None
    finally:
        source.stop()
    assert skipped_count("not_utf8") - before["not_utf8"] == 2
    assert skipped_count("nul") - before["nul"] == 1
    assert skipped_count("line_break") - before["line_break"] == 2
    said = [m for m in caplog.messages if "not listed" in m]
    assert len(said) == 5, said  # once each, whatever the number of listings
    assert any("b'bad-\\xff\\xfe'" in m for m in said)  # escaped, never raw
    assert any("'line\\nbreak'" in m for m in said)
