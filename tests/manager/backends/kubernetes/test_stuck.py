"""The stuck-pod detector with an injected clock: the timeout counts from the pod's creation,
the pod is read afresh before its item is failed, and only reasons no retry fixes count."""

from __future__ import annotations

from kube_workqueue.manager.backends.kubernetes.steering.leader import micro_time
from kube_workqueue.manager.backends.kubernetes.steering.stuck import StuckDetector

NOW = 1_800_000_000.0


class Items:
    def __init__(self, objects):
        self.objects = objects

    def items(self):
        return list(self.objects)


def job(name, finished=False):
    status = {"conditions": [{"type": "Failed", "status": "True"}]} if finished else {}
    return {"metadata": {"name": name, "annotations": {}}, "status": status}


def pod(job_name, reason, created=NOW - 120):
    waiting = {"waiting": {"reason": reason}} if reason else {"running": {}}
    return {
        "metadata": {
            "name": f"{job_name}-x",
            "labels": {"batch.kubernetes.io/job-name": job_name},
            "creationTimestamp": micro_time(created),
        },
        "status": {"phase": "Pending", "containerStatuses": [{"name": "w", "state": waiting}]},
    }


def detector(jobs, pods, fresh=None, timeout=60.0):
    failed = []
    fresh = fresh if fresh is not None else {p["metadata"]["name"]: p for p in pods}
    d = StuckDetector(
        Items(jobs),
        Items(pods),
        fresh.get,
        lambda j, why: failed.append((j["metadata"]["name"], why)),
        timeout=timeout,
        clock=lambda: NOW,
    )
    return d, failed


def test_only_reasons_no_retry_fixes_count_and_only_past_the_timeout():
    jobs = [job("pull"), job("node"), job("young"), job("cfg"), job("done", finished=True)]
    pods = [
        pod("pull", "ImagePullBackOff"),
        pod("node", None),
        pod("young", "ErrImagePull", created=NOW - 10),
        pod("cfg", "CreateContainerConfigError"),
        pod("done", "ImagePullBackOff"),
    ]
    d, failed = detector(jobs, pods)
    assert d.counts() == {"ImagePullBackOff": 1, "ErrImagePull": 1, "CreateContainerConfigError": 1}
    assert d.check() == 2
    assert sorted(name for name, _ in failed) == ["cfg", "pull"]
    why = dict(failed)["pull"]
    assert why.startswith("stuck: ImagePullBackOff for 120s")


def test_a_pod_that_started_meanwhile_is_left_alone():
    jobs = [job("pull")]
    cached = [pod("pull", "ImagePullBackOff")]
    d, failed = detector(jobs, cached, fresh={"pull-x": pod("pull", None)})
    assert d.check() == 0 and failed == []
    d, failed = detector(jobs, cached, fresh={})  # gone meanwhile
    assert d.check() == 0 and failed == []


def batch(name, size, completed="", failed=""):
    """A batch's Job as the cache keeps it (no spec: its size is its annotation)."""
    return {
        "metadata": {
            "name": name,
            "labels": {"workqueue.dev/batch": "1"},
            "annotations": {"workqueue.dev/batch-size": str(size)},
        },
        "status": {"completedIndexes": completed, "failedIndexes": failed},
    }


def member(job_name, index, reason, created=NOW - 120):
    out = pod(job_name, reason, created)
    out["metadata"]["name"] = f"{job_name}-{index}-x"
    out["metadata"]["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    return out


def test_a_batch_is_stuck_when_every_unfinished_member_is():
    jobs = [batch("b", 4, completed="0", failed="1")]
    pods = [member("b", 0, None), member("b", 2, "ImagePullBackOff"),
            member("b", 3, "ImagePullBackOff", created=NOW - 90)]  # fmt: skip
    d, failed = detector(jobs, pods)
    assert d.counts() == {"ImagePullBackOff": 2}
    assert d.check() == 1 and [name for name, _ in failed] == ["b"]
    assert dict(failed)["b"].startswith("stuck: ImagePullBackOff for 90s")  # the youngest


def test_a_batch_with_a_member_running_or_waiting_its_turn_is_not_stuck():
    running = [member("b", 0, None), member("b", 1, "ImagePullBackOff")]
    d, failed = detector([batch("b", 2)], running)
    assert d.check() == 0 and failed == []
    assert d.counts() == {"ImagePullBackOff": 1}  # counted, though the batch is not stuck
    no_pod_yet = [member("b", 0, "ImagePullBackOff")]  # index 1 has no pod yet
    d, failed = detector([batch("b", 2)], no_pod_yet)
    assert d.check() == 0 and failed == []
    young = [member("b", 0, "ImagePullBackOff"), member("b", 1, "ErrImagePull", NOW - 10)]
    d, failed = detector([batch("b", 2)], young)
    assert d.check() == 0 and failed == []  # one of them has not waited the timeout yet
