"""`ClusterLedger` (the ledger view of the Kubernetes backend) over fakes of the Job cache and
the durable record: which source of truth wins, and how attempts are counted."""

from __future__ import annotations

from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from kube_workqueue.manager.backends.kubernetes.records.ledger import ClusterLedger
from kube_workqueue.manager.backends.kubernetes.records.record import Entry

Q = "thumbs"


class FakeCache:
    def __init__(self) -> None:
        self.jobs: dict[str, dict] = {}

    def get(self, name):
        return self.jobs.get(name)

    def indexed(self, item_hash):
        return [
            j
            for j in self.jobs.values()
            if j["metadata"]["labels"][ko.ITEM_HASH_LABEL] == item_hash
        ]

    def put(self, item, *, attempt=1, condition=None, deleting=False, version=None):
        annotations = {ko.ATTEMPT_ANNOTATION: str(attempt)}
        if version is not None:
            annotations[ko.VERSION_ANNOTATION] = version
        meta = {
            "name": ko.object_name(Q, item, version),
            "labels": ko.labels(Q, item),
            "annotations": annotations,
            "creationTimestamp": f"2026-01-01T00:00:{len(self.jobs):02d}Z",
        }
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        status = {}
        if condition:
            status["conditions"] = [{"type": condition, "status": "True"}]
        self.jobs[meta["name"]] = {"metadata": meta, "status": status}


class FakeRecord:
    """The `RecordStore` faces the ledger uses, in memory; `outcome` records by item name."""

    def __init__(self) -> None:
        self.by_hash: dict[str, Entry] = {}

    def entry(self, item_hash):
        return self.by_hash.get(item_hash)

    def get(self, item_hash):
        entry = self.by_hash.get(item_hash)
        return None if entry is None else (entry.state, entry.attempts)

    def version(self, item_hash):
        entry = self.by_hash.get(item_hash)
        return None if entry is None else entry.version

    def final(self, item_hash):
        entry = self.by_hash.get(item_hash)
        return entry is not None and entry.final

    def put(self, item_hash, state, attempts, *, final=False, version=None):
        self.by_hash[item_hash] = Entry(state, attempts, final, version)

    def outcome(self, item, state, attempts, *, version=None):
        self.put(ko.item_hash(Q, item), state, attempts, version=version)

    def rerun(self, item_hash, version):
        earlier = self.by_hash.get(item_hash)
        history = ((earlier.state, earlier.attempts, earlier.version, 0.0),) if earlier else ()
        self.by_hash[item_hash] = Entry("pending", 0, False, version, history)


def ledger():
    cache, record = FakeCache(), FakeRecord()
    return ClusterLedger(Q, cache, record, namespace="media"), cache, record


def test_an_unknown_item_has_no_state_and_the_ledger_names_its_queue():
    view, _, _ = ledger()
    assert view.state("a.mp4") is None
    assert view.where == "namespace media, queue thumbs"


def test_the_job_in_the_cache_wins_over_the_record():
    view, cache, record = ledger()
    record.outcome("a.mp4", "failed", 1)
    cache.put("a.mp4", attempt=2)
    assert view.state("a.mp4") == ("running", 2)
    cache.put("a.mp4", attempt=2, condition="Complete")
    assert view.state("a.mp4") == ("succeeded", 2)


def test_a_job_being_deleted_gives_way_to_the_record():
    view, cache, record = ledger()
    record.outcome("a.mp4", "succeeded", 1)
    cache.put("a.mp4", condition="Complete", deleting=True)
    assert view.state("a.mp4") == ("succeeded", 1)


def test_attempts_continue_from_the_record_and_local_running_wins():
    view, _, record = ledger()
    record.outcome("a.mp4", "failed", 2)
    assert view.start("a.mp4", "job/x") == 3
    assert view.state("a.mp4") == ("running", 3)
    view.finish("a.mp4", False, 1, "Job failed")
    assert view.state("a.mp4") == ("failed", 2)  # the record speaks until the Job is recorded


def test_rows_and_counts_cover_what_this_manager_saw():
    view, cache, record = ledger()
    assert view.see(["a.mp4", "b.mp4", "a.mp4"]) == ["a.mp4", "b.mp4"]
    assert view.see(["a.mp4"]) == []
    record.outcome("a.mp4", "succeeded", 1)
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


def test_a_rerun_at_a_new_version_leaves_the_old_versions_job_as_history():
    view, cache, record = ledger()
    cache.put("a.mp4", condition="Complete", version="v1")
    record.outcome("a.mp4", "succeeded", 1, version="v1")
    assert view.state("a.mp4") == ("succeeded", 1) and view.version_ran("a.mp4") == "v1"
    assert view.rerun("a.mp4", "v2") is True
    assert view.state("a.mp4") == ("pending", 0)  # the v1 Job is history now
    assert view.version_ran("a.mp4") == "v2"
    assert record.entry(ko.item_hash(Q, "a.mp4")).history[0][:3] == ("succeeded", 1, "v1")
    assert view.start("a.mp4", "log", "v2") == 1  # a new attempt series
    cache.put("a.mp4", version="v2")
    assert view.state("a.mp4") == ("running", 1)
    assert view.rerun("a.mp4", "v3") is False  # running: nothing to re-run


def test_the_record_has_the_later_word_on_a_finished_attempt():
    view, cache, record = ledger()
    view.see(["a.mp4", "b.mp4"])
    cache.put("a.mp4", condition="Failed")
    record.outcome("a.mp4", "failed", 1)
    assert view.cancel("a.mp4") is True  # failed, waiting to retry: the source dropped it
    assert view.state("a.mp4") == ("cancelled", 1)  # not the Job's "failed"
    assert view.cancel("a.mp4") is False
    assert view.state("b.mp4") == ("pending", 0)  # seen, never started
    assert view.cancel("b.mp4") is True and view.state("b.mp4") == ("cancelled", 0)
    assert view.rerun("b.mp4") is True and view.state("b.mp4") == ("pending", 0)  # it came back
    assert view.cancel("never-seen.mp4") is False


def test_rows_of_items_run_here_are_kept_for_the_newest_only(monkeypatch):
    """A million items run here cost no million rows: the record holds every outcome, the
    ledger the newest RECENT_ROWS rows (and as many failures, which a run's summary names);
    older items still answer with their state and first sight."""
    from kube_workqueue.manager.backends.kubernetes.records import ledger as module

    monkeypatch.setattr(module, "RECENT_ROWS", 3)
    view, _, record = ledger()
    names = [f"{i}.mp4" for i in range(8)]
    view.see(names)
    for i, name in enumerate(names):
        view.start(name, "kubectl logs -l batch")
        view.finish(name, i != 1, None if i != 1 else 2, None if i != 1 else "exit 2")
        record.outcome(name, "succeeded" if i != 1 else "failed", 1)
    assert set(view._recent) == {"5.mp4", "6.mp4", "7.mp4"}
    assert set(view._failures) == {"1.mp4"} and view.row("1.mp4").last_error == "exit 2"
    old = view.row("0.mp4")
    assert old.state == "succeeded" and old.started is None and old.first_seen > 0
    assert view.row("7.mp4").started is not None and view.row("7.mp4").log_path
    assert sorted(r.name for r in view.live_rows()) == ["1.mp4", "5.mp4", "6.mp4", "7.mp4"]
    assert len({id(view.row(n).log_path) for n in names[5:]}) == 1  # one string, not one each
    view.start("0.mp4", "kubectl logs -l batch")  # a re-run of an old one: a row again
    assert view.row("0.mp4").state == "running"
