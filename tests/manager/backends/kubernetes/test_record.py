"""`ClusterLedger` (the ledger view of the Kubernetes backend) over fakes of the Job cache and
the durable record: which source of truth wins, and how attempts are counted."""

from __future__ import annotations

from manager.backends.kubernetes import objects as ko
from manager.backends.kubernetes.record import ClusterLedger

Q = "thumbs"


class FakeCache:
    def __init__(self) -> None:
        self.jobs: dict[str, dict] = {}

    def get(self, name):
        return self.jobs.get(name)

    def put(self, item, *, attempt=1, condition=None, deleting=False):
        meta = {
            "name": ko.object_name(Q, item),
            "annotations": {ko.ATTEMPT_ANNOTATION: str(attempt)},
        }
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        status = {}
        if condition:
            status["conditions"] = [{"type": condition, "status": "True"}]
        self.jobs[meta["name"]] = {"metadata": meta, "status": status}


class FakeRecord:
    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, int]] = {}

    def get(self, item_hash):
        return self.entries.get(item_hash)

    def put(self, item, state, attempts):
        self.entries[ko.item_hash(Q, item)] = (state, attempts)


def ledger():
    cache, record = FakeCache(), FakeRecord()
    return ClusterLedger(Q, cache, record, namespace="media"), cache, record


def test_an_unknown_item_has_no_state_and_the_ledger_names_its_queue():
    view, _, _ = ledger()
    assert view.state("a.mp4") is None
    assert view.where == "namespace media, queue thumbs"


def test_the_job_in_the_cache_wins_over_the_record():
    view, cache, record = ledger()
    record.put("a.mp4", "failed", 1)
    cache.put("a.mp4", attempt=2)
    assert view.state("a.mp4") == ("running", 2)
    cache.put("a.mp4", attempt=2, condition="Complete")
    assert view.state("a.mp4") == ("succeeded", 2)


def test_a_job_being_deleted_gives_way_to_the_record():
    view, cache, record = ledger()
    record.put("a.mp4", "succeeded", 1)
    cache.put("a.mp4", condition="Complete", deleting=True)
    assert view.state("a.mp4") == ("succeeded", 1)


def test_attempts_continue_from_the_record_and_local_running_wins():
    view, _, record = ledger()
    record.put("a.mp4", "failed", 2)
    assert view.start("a.mp4", "job/x") == 3
    assert view.state("a.mp4") == ("running", 3)
    view.finish("a.mp4", False, 1, "Job failed")
    assert view.state("a.mp4") == ("failed", 2)  # the record speaks until the Job is recorded
    view.requeue("a.mp4")


def test_rows_and_counts_cover_what_this_manager_saw():
    view, cache, record = ledger()
    assert view.see(["a.mp4", "b.mp4", "a.mp4"]) == ["a.mp4", "b.mp4"]
    assert view.see(["a.mp4"]) == []
    record.put("a.mp4", "succeeded", 1)
    cache.put("b.mp4")
    assert [r.name for r in view.rows("running")] == ["b.mp4"]
    assert view.counts() == {
        "pending": 0,
        "running": 1,
        "succeeded": 1,
        "failed": 0,
        "cancelled": 0,
    }
    assert view.take_retry_requests() == []
