"""The record of batches against the API-server stand-in, through the official client: claims
by number (a refused number is read and skipped, members a known batch holds are left out),
the record that replaces the item data, releases for retries, rival writers, and the compact
index behind it."""

from __future__ import annotations

import random

import pytest

from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi
from kube_workqueue.manager.backends.kubernetes.manifests import batch_objects as bo
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from kube_workqueue.manager.backends.kubernetes.records import hash_index
from kube_workqueue.manager.backends.kubernetes.records.batch_record import BatchRecords
from kube_workqueue.manager.backends.kubernetes.records.hash_index import HashIndex

NS, Q = "media", "thumbs"


@pytest.fixture
def api(apiserver):
    client = KubeApi(NS, apiserver.client_configuration(), qps=0)
    yield client
    client.close()


def members(*names, version="s-1"):
    return [bo.member(n, {"name": n, "version": version}, 1) for n in names]


def h(name):
    return ko.item_hash(Q, name)


def test_claims_are_numbered_and_a_refused_number_is_read_and_skipped(api):
    mine, rival = BatchRecords(api, Q), BatchRecords(api, Q)
    mine.load(), rival.load()
    assert rival.claim(NS, members("a", "b"))[0] == 1
    seq, claimed, taken = mine.claim(NS, members("b", "c"))  # 1 is taken, and holds b
    assert seq == 2 and [m.name for m in claimed] == ["c"] and [m.name for m in taken] == ["b"]
    assert mine.lookup(h("a")).seq == 1 and mine.lookup(h("c")).state == "running"
    seq, claimed, taken = mine.claim(NS, members("a"))  # a known batch holds it already
    assert seq is None and [m.name for m in taken] == ["a"]


def test_a_batch_read_another_way_never_moves_the_numbering(api):
    """Only claim and load move it: a rival's batch recorded here must not make this manager
    skip a number whose batch it has not read (it would claim that batch's items again)."""
    mine, rival = BatchRecords(api, Q), BatchRecords(api, Q)
    mine.load(), rival.load()
    rival.claim(NS, members("a"))
    rival.claim(NS, members("b"))
    mine.record(2, {0: ("succeeded", 1)})  # its completion controller records batch 2
    seq, claimed, taken = mine.claim(NS, members("a", "c"))
    assert seq == 3 and [m.name for m in taken] == ["a"]


def test_the_record_replaces_the_item_data_once_and_says_per_member(api):
    records = BatchRecords(api, Q)
    records.load()
    records.claim(NS, members("a", "b", "c"))
    records.record(1, {0: ("succeeded", 1), 2: ("failed", 3)})  # b never finished: failed
    cm = api.get("configmaps", bo.batch_name(Q, 1))
    assert set(cm["data"]) == {"record"}
    assert cm["data"]["record"].splitlines() == [
        f"{h('a')}\ts\t1\ts-1", f"{h('b')}\tf\t1\ts-1", f"{h('c')}\tf\t3\ts-1",
    ]  # fmt: skip
    records.record(1, {0: ("failed", 1)})  # recorded already: it stands
    again = BatchRecords(api, Q)
    again.load()
    assert [again.lookup(h(n)).state for n in "abc"] == ["succeeded", "failed", "failed"]
    assert again.lookup(h("c")).attempts == 3 and again.lookup(h("a")).version == "s-1"
    assert len(again) == 3


def test_release_lets_go_of_one_member_and_a_newer_batch_speaks_for_it(api):
    records = BatchRecords(api, Q)
    records.load()
    records.claim(NS, members("a", "b"))
    assert not records.release(h("a"))  # running: nothing to let go of
    records.record(1, {0: ("failed", 1), 1: ("succeeded", 1)})
    assert records.release(h("a")) and records.lookup(h("a")) is None
    assert records.lookup(h("b")).state == "succeeded"  # its sibling stays
    assert records.claim(NS, members("a", version="s-2"))[0] == 2
    fresh = BatchRecords(api, Q)
    fresh.load()
    found = fresh.lookup(h("a"))
    assert (found.seq, found.state, found.version) == (2, "running", "s-2")
    assert api.get("configmaps", bo.batch_name(Q, 1))["data"]["released"] == "0"


def test_rival_writers_of_one_record_lose_nothing(api):
    one, two = BatchRecords(api, Q), BatchRecords(api, Q)
    one.load()
    one.claim(NS, members("a", "b"))
    one.record(1, {0: ("failed", 1), 1: ("failed", 1)})
    two.load()
    assert one.amend(h("a"), "cancelled")  # each change is a read-modify-write of the
    assert two.release(h("b"))  # ConfigMap as the API server has it now, guarded by its version
    final = BatchRecords(api, Q)
    final.load()
    assert final.lookup(h("a")).state == "cancelled" and final.lookup(h("b")) is None


def test_the_hash_index_behaves_as_a_dict(monkeypatch):
    monkeypatch.setattr(hash_index, "MIN_RECENT", 3)  # merge often
    rng = random.Random(7)
    for _ in range(50):
        index, model = HashIndex(), {}
        for _ in range(300):
            key = rng.randrange(2**64) if rng.random() < 0.3 else rng.randrange(50)
            if rng.random() < 0.7:
                value = rng.randrange(2**40)
                index.set(key, value)
                model[key] = value
            else:
                index.delete(key)
                model.pop(key, None)
            assert len(index) == len(model)
        assert dict(index.items()) == model
        assert all(index.get(k) == v for k, v in model.items())
        assert index.get(2**64 - 1) == model.get(2**64 - 1)


def test_an_index_built_at_once_is_the_one_set_entry_by_entry():
    """A start's load builds the index in one sort; the last value of a repeated key wins, as
    when the entries are set one by one, and what is set afterwards goes on as usual."""
    from array import array

    rng = random.Random(11)
    for size, repeats in ((0, 0.5), (1, 0.5), (50, 0.5), (9000, 0.5), (3000, 0.0)):
        keys, values, one_by_one = array("Q"), array("Q"), HashIndex()
        for _ in range(size):  # `repeats`: the share of keys from a small range (they repeat)
            small = rng.random() < repeats
            key = rng.randrange(size // 3 + 1) if small else rng.randrange(2**64)
            value = rng.randrange(2**40)
            keys.append(key)
            values.append(value)
            one_by_one.set(key, value)
        built = HashIndex.built(keys, values)
        assert len(built) == len(one_by_one) and dict(built.items()) == dict(one_by_one.items())
        built.set(7, 1)
        built.delete(keys[0]) if size else None
        one_by_one.set(7, 1)
        one_by_one.delete(keys[0]) if size else None
        assert dict(built.items()) == dict(one_by_one.items())


def test_member_bytes_bound_what_a_batch_takes_of_its_config_map(api):
    """The dispatcher fills a batch while the sum of `member_bytes` stays within
    MAX_BATCH_BYTES: that sum never falls short of the ConfigMap's real size."""
    rng = random.Random(3)
    batch, used = [], 0
    while True:
        name = "ü" * rng.randrange(1, 250) + f"-{len(batch)}.mp4"
        m = bo.member(name, {"name": name, "blob": "x" * rng.randrange(0, 20_000)}, 1)
        if used + bo.member_bytes(m) > bo.MAX_BATCH_BYTES:
            break
        batch.append(m)
        used += bo.member_bytes(m)
    cm = bo.config_map(Q, NS, 1, batch)
    real = sum(len(k) + len(v.encode("utf-8")) for k, v in cm["data"].items())
    assert real <= used <= bo.MAX_BATCH_BYTES
    api.create("configmaps", cm)  # the API server takes it (it refuses more than 1 MiB)
