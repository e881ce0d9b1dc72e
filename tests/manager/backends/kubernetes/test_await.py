"""Waiting for a Job's outcome when a rival manager records it first: its finalizer is gone
before this manager's cache saw the Job finish, so the outcome is read afresh from the record
instead of being waited for forever (a --once run of two rival managers once hung this way)."""

from __future__ import annotations

import threading

from kube_workqueue.manager.backends.kubernetes.dispatch.backend import KubernetesBackend
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from kube_workqueue.manager.backends.kubernetes.records.record import Entry

Q = "thumbs"
ITEM = "a.mp4"


class FakeCache:
    def __init__(self, job):
        self.job = job
        self.changed = threading.Condition()

    def get(self, name):
        return self.job

    def wait_for(self, predicate, timeout=None):
        return predicate()


class FakeRecord:
    def __init__(self, on_the_server):
        self.entries = {}
        self.on_the_server = on_the_server  # what a rival wrote to the shard ConfigMap
        self.reloads = 0

    def get(self, item_hash):
        return self.entries.get(item_hash)

    def entry(self, item_hash):
        found = self.entries.get(item_hash)
        return None if found is None else Entry(*found)

    def final(self, item_hash):
        return False

    def reload(self, item_hash):
        self.reloads += 1
        self.entries.update(self.on_the_server)


def finished_job(finalizers):
    return {
        "metadata": {
            "name": ko.object_name(Q, ITEM),
            "annotations": {ko.ATTEMPT_ANNOTATION: "1", ko.ITEM_ANNOTATION: ITEM},
            "finalizers": finalizers,
        },
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def backend(job, on_the_server):
    record = FakeRecord(on_the_server)
    return KubernetesBackend(None, Q, ko.PodOptions(image="x"), FakeCache(job), record), record


def test_an_outcome_a_rival_recorded_is_read_afresh():
    job = finished_job([])  # the rival recorded it and removed the finalizer already
    b, record = backend(job, {ko.item_hash(Q, ITEM): ("succeeded", 1)})
    outcome = b._await(ITEM, job, "where")
    assert outcome.succeeded and record.reloads == 1


def test_a_finished_job_nobody_recorded_fails_the_attempt_instead_of_hanging():
    job = finished_job([])
    b, record = backend(job, {})
    b._stopping.wait = lambda seconds: False  # no real waiting between looks
    outcome = b._await(ITEM, job, "where")
    assert not outcome.succeeded and not outcome.interrupted
    assert "nobody recorded it" in outcome.error and record.reloads == 10
