"""What only the S3 source does, against moto's S3 and SQS server over HTTP: changes from the
bucket's notifications through SQS. What every object store does is the one contract suite's
(test_object_sources.py)."""

from __future__ import annotations

from tests.ambassador.test_object_sources import opened
from tests.support.servers import wait_until


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
