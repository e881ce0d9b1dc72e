"""The S3 source against moto's S3 server over HTTP: listing, names that are not paths,
versions on overwrite, arrivals and removals, SQS notifications, and the bad sources."""

from __future__ import annotations

import re

import pytest

from kube_workqueue.ambassador.sources.registry import SourceConfigError, resolve, source_type
from tests.support.servers import wait_until

HOSTILE = ["a b.mp4", "ünïcødé.mp4", "plus+sign.mp4", "100%.mp4", "../up.mp4", "x/../y.mp4"]


def opened(url: str, **options):
    spec = resolve(url, {"SUFFIXES": [".mp4"], **options})
    kind = source_type(spec.kind)
    kind.check(spec.config)
    source = kind.open(spec.config)
    source.start()
    return spec, source


def test_lists_keys_under_the_prefix_as_names(s3):
    bucket = s3.bucket("in/a.mp4", "in/b.MP4", "in/notes.txt", "in/sub/deep.mp4", "out/c.mp4")
    _, source = opened(f"s3://{bucket}/in/")
    try:
        assert source.page(None, None)[0] == ["a.mp4", "b.MP4"]
    finally:
        source.stop()
    _, deep = opened(f"s3://{bucket}/in", RECURSIVE=True)
    try:
        assert deep.page(None, None)[0] == ["a.mp4", "b.MP4", "sub/deep.mp4"]
    finally:
        deep.stop()


def test_keys_are_names_never_paths(s3):
    bucket = s3.bucket(*(f"in/{k}" for k in HOSTILE))
    _, source = opened(f"s3://{bucket}/in/", RECURSIVE=True)
    try:
        names = source.page(None, None)[0]
        assert sorted(names) == sorted(HOSTILE)
        for name in HOSTILE:
            data = source.get(name)
            assert data["key"] == f"in/{name}" and data["bucket"] == bucket
            assert data["url"] == f"s3://{bucket}/in/{name}"
            assert "path" not in data  # nothing joins a key to a folder
        assert source.get("nope.mp4") is None
    finally:
        source.stop()


def test_item_data_and_versions_follow_the_bytes(s3):
    bucket = s3.bucket("a.mp4", "b.mp4", body=b"same bytes")
    _, source = opened(f"s3://{bucket}/", POLL_INTERVAL=0.1)
    try:
        a, b = source.get("a.mp4"), source.get("b.mp4")
        assert a["size"] == len(b"same bytes") and a["contentType"] == "video/mp4"
        assert a["modified"].endswith("Z") and a["etag"]
        assert a["version"] == b["version"]  # the same bytes: the same version
        before = source.version
        s3.client().copy_object(Bucket=bucket, Key="a.mp4", CopySource=f"{bucket}/b.mp4")
        s3.client().put_object(Bucket=bucket, Key="b.mp4", Body=b"new bytes")
        wait_until(lambda: source.get("b.mp4")["version"] != b["version"])
        assert source.get("a.mp4")["version"] == a["version"]  # copied again: unchanged
        assert source.version > before  # an overwrite is a new listing version
    finally:
        source.stop()


def test_arrivals_and_removals_by_polling(s3):
    bucket = s3.bucket("a.mp4")
    _, source = opened(f"s3://{bucket}/", POLL_INTERVAL=0.1)
    _, events = source.subscribe()
    try:
        s3.client().put_object(Bucket=bucket, Key="b.mp4", Body=b"x")
        s3.client().delete_object(Bucket=bucket, Key="a.mp4")
        wait_until(lambda: source.page(None, None)[0] == ["b.mp4"])
        seen = [events.get(timeout=5) for _ in range(2)]
        assert {(e["type"], e["item"]) for e in seen} == {("ADDED", "b.mp4"), ("DELETED", "a.mp4")}
        assert source.mode == "polling"
    finally:
        source.unsubscribe(events)
        source.stop()


def test_an_outage_keeps_the_items_and_makes_it_unready(s3, monkeypatch):
    from kube_workqueue.ambassador.sources.s3 import client

    bucket = s3.bucket("a.mp4")
    spec, source = opened(f"s3://{bucket}/", POLL_INTERVAL=0.1)
    try:
        working = source.lister.s3
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
        source.lister.s3 = client(spec.config)  # the store goes away
        s3.client().delete_object(Bucket=bucket, Key="a.mp4")
        wait_until(lambda: not source.ready())
        assert "cannot reach the endpoint" in source.problem
        assert source.page(None, None)[0] == ["a.mp4"]  # never "every item was removed"
        source.lister.s3 = working  # back
        wait_until(source.ready)
        assert source.page(None, None)[0] == []
    finally:
        source.stop()


def test_notifications_through_sqs_cost_no_listing(s3):
    bucket = s3.bucket("a.mp4")
    queue_url = s3.notifying_queue(bucket)
    _, source = opened(f"s3://{bucket}/", SQS_QUEUE_URL=queue_url, RELIST_INTERVAL=3600)
    try:
        assert source.mode == "events"
        s3.client().put_object(Bucket=bucket, Key="new clip.mp4", Body=b"x")
        wait_until(lambda: "new clip.mp4" in source.page(None, None)[0], timeout=30)
        s3.client().delete_object(Bucket=bucket, Key="a.mp4")
        wait_until(lambda: "a.mp4" not in source.page(None, None)[0], timeout=30)
        version = source.version
        s3.notify(queue_url, bucket, "new clip.mp4")  # delivered twice: nothing changes
        s3.notify(queue_url, bucket, "a.mp4")  # late "created" for a deleted key: still gone
        s3.client().put_object(Bucket=bucket, Key="marker.mp4", Body=b"x")
        wait_until(lambda: "marker.mp4" in source.page(None, None)[0], timeout=30)
        assert source.page(None, None)[0] == ["marker.mp4", "new clip.mp4"]
        assert source.version == version + 1  # only the marker's arrival
        assert source.listings == 1  # every change came by notification
    finally:
        source.stop()


@pytest.mark.parametrize(
    ("url", "options", "said"),
    [
        ("s3://", {}, "an S3 source is s3://bucket/prefix/"),
        ("s3://Bad_Bucket!/", {}, "an S3 source is s3://bucket/prefix/"),
        ("s3://bkt/?x=1", {}, "an S3 source is s3://bucket/prefix/"),
        ("s3://bkt/", {"SETTLE": 1.0}, "--settle applies to folder sources only"),
        ("s3://bkt/", {"S3_ENDPOINT_URL": "ftp://x"}, "--endpoint-url must be an http(s) URL"),
        ("gopher://x/", {}, "unknown source scheme 'gopher'"),
    ],
)
def test_malformed_sources_are_one_line(url, options, said):
    with pytest.raises(SourceConfigError, match=re.escape(said)):
        resolve(url, options)


def test_unreachable_sources_are_one_line_at_start(s3, monkeypatch):
    kind = source_type("s3")
    with pytest.raises(SourceConfigError, match="the bucket does not exist"):
        kind.check(resolve("s3://no-such-bucket-here/", {}).config)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(SourceConfigError, match="cannot reach the endpoint"):
        kind.check(resolve("s3://any-bucket/", {}).config)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(SourceConfigError, match="no AWS credentials"):
        kind.check(resolve("s3://any-bucket/", {}).config)


def test_a_notification_during_a_listing_is_not_undone_by_it(s3):
    """The listing began before the notification and saw the store as it was: the item the
    notification added stays, the one it removed stays gone."""
    from kube_workqueue.ambassador.sources.listed import ListedSource

    class SlowLister:
        where = "test"

        def __init__(self):
            self.calls = 0

        def list_all(self):
            self.calls += 1
            listing = [("old.mp4", "1\t1\t1")]
            if self.calls == 2:  # the second listing: a notification lands while it runs
                source.apply([("new.mp4", "2\t2\t2"), ("old.mp4", None)])
            return listing

        def describe(self, name, meta):
            return {"name": name, "version": meta}

        def changes(self, stop):
            return None

    source = ListedSource(SlowLister(), poll_interval=3600)
    source.start()
    try:
        source._relist()
        assert source.page(None, None)[0] == ["new.mp4"]
        source._relist()  # a listing that began after the change sees it as it is
        assert source.page(None, None)[0] == ["old.mp4"]
    finally:
        source.stop()
