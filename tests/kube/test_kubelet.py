"""The test kubelet runs a Job built by kube_objects: the item reaches the worker as the file
named by WORK_ITEM_FILE, and the Job's status and conditions follow batch/v1."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.support.kubelet import QUICK_BACKOFF, REAL_BACKOFF, Kubelet, backoff_delay
from tests.support.servers import wait_until

NS = "media"


@pytest.fixture
def worker(tmp_path):
    out = tmp_path / "seen.jsonl"
    script = tmp_path / "worker.sh"
    script.write_text(
        f'#!/bin/sh\ncat "$WORK_ITEM_FILE" >> {out}\necho >> {out}\n'
        'case "$(cat "$WORK_ITEM_FILE")" in *fail*) exit 3;; esac\n'
    )
    script.chmod(0o755)
    return script, out


def dispatch(kube, item, pod, data=None):
    kube.core.create_namespaced_config_map(NS, ko.config_map("q", NS, item, data or {"name": item}))
    return kube.batch.create_namespaced_job(NS, ko.job("q", NS, item, 1, pod))


def conditions(kube, name):
    status = kube.batch.read_namespaced_job_status(name, NS).status
    if status is None:  # the kubelet has not written any yet
        return {}, None
    return {c.type: c.status for c in status.conditions or []}, status


def test_a_job_runs_its_item_and_completes(apiserver, kube, worker):
    script, out = worker
    kubelet = Kubelet(apiserver, backoff=QUICK_BACKOFF)
    job = dispatch(kube, "a b.mp4", ko.PodOptions(image="w:1", command=[str(script)]))
    name = job.metadata.name
    wait_until(lambda: conditions(kube, name)[0].get("Complete") == "True")
    _, status = conditions(kube, name)
    assert status.succeeded == 1 and status.completion_time is not None
    assert json.loads(out.read_text().splitlines()[0]) == {"name": "a b.mp4"}
    assert kubelet.runs_of(name) == [0]


def test_a_failing_job_retries_to_its_backoff_limit_then_fails(apiserver, kube, worker):
    script, _ = worker
    kubelet = Kubelet(apiserver, backoff=QUICK_BACKOFF)
    pod = ko.PodOptions(image="w:1", command=[str(script)], backoff_limit=2)
    job = dispatch(kube, "will-fail", pod, {"name": "will-fail"})
    name = job.metadata.name
    wait_until(lambda: conditions(kube, name)[0].get("Failed") == "True")
    assert kubelet.runs_of(name) == [3, 3, 3]
    status = kube.batch.read_namespaced_job_status(name, NS).status
    assert status.failed == 3  # pods, not Jobs
    assert [(c.type, c.reason) for c in status.conditions] == [
        ("FailureTarget", "BackoffLimitExceeded"),
        ("Failed", "BackoffLimitExceeded"),
    ]
    assert status.completion_time is None  # set for a Job that succeeded only


def test_ttl_after_finished_deletes_the_job_and_what_it_owns(apiserver, kube, worker):
    script, _ = worker
    Kubelet(apiserver, backoff=QUICK_BACKOFF)
    pod = ko.PodOptions(image="w:1", command=[str(script)], ttl_seconds_after_finished=1)
    job_body = ko.job("q", NS, "t", 1, pod)
    job_body["metadata"].pop("finalizers")
    kube.core.create_namespaced_config_map(NS, ko.config_map("q", NS, "t", {"name": "t"}))
    job = kube.batch.create_namespaced_job(NS, job_body)
    ref = ko.owner_reference({"metadata": {"name": job.metadata.name, "uid": job.metadata.uid}})
    kube.core.patch_namespaced_config_map(
        job.metadata.name, NS, {"metadata": {"ownerReferences": [ref]}}
    )

    def gone(read):
        try:
            read(job.metadata.name, NS)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(lambda: gone(kube.batch.read_namespaced_job))
    wait_until(lambda: gone(kube.core.read_namespaced_config_map))


def test_the_image_entrypoint_is_used_when_the_job_has_no_command(apiserver, kube, worker):
    script, out = worker
    Kubelet(apiserver, backoff=QUICK_BACKOFF, images={"thumbnailer:1": [str(script)]})
    job = dispatch(kube, "x", ko.PodOptions(image="thumbnailer:1"))
    wait_until(lambda: conditions(kube, job.metadata.name)[0].get("Complete") == "True")
    assert out.exists()


def record_statuses(apiserver, name):
    """Every status the Job `name` is written with, in order."""
    seen = []
    apiserver.store.hooks.append(
        lambda kind, resource, obj: (
            seen.append(obj.get("status") or {})
            if resource == "jobs" and obj["metadata"]["name"] == name
            else None
        )
    )
    return seen


def kinds(status):
    return [c["type"] for c in status.get("conditions") or []]


def test_the_back_off_is_the_job_controllers_10_s_doubling_to_6_min(apiserver):
    """https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-backoff-failure-policy:
    "an exponential back-off delay (10s, 20s, 40s ...) capped at six minutes"."""
    assert Kubelet(apiserver).backoff == REAL_BACKOFF == (10.0, 360.0)
    delays = [backoff_delay(REAL_BACKOFF, n) for n in range(1, 9)]
    assert delays == [10, 20, 40, 80, 160, 320, 360, 360]
    assert backoff_delay(REAL_BACKOFF, 0) == 0  # the first pod starts at once


def test_a_failed_pod_is_replaced_only_after_the_back_off(apiserver, kube, tmp_path):
    stamps = tmp_path / "stamps"
    script = tmp_path / "w.sh"
    script.write_text(f"#!/bin/sh\ndate +%s.%N >> {stamps}\nexit 3\n")
    script.chmod(0o755)
    Kubelet(apiserver, backoff=(0.4, 0.6))
    pod = ko.PodOptions(image="w:1", command=[str(script)], backoff_limit=3)
    name = dispatch(kube, "x", pod).metadata.name
    wait_until(lambda: conditions(kube, name)[0].get("Failed") == "True", timeout=60)
    times = [float(t) for t in stamps.read_text().split()]
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert len(times) == 4 and gaps[0] >= 0.4 and gaps[1] >= 0.6 and gaps[2] >= 0.6


def test_a_job_ends_in_two_writes_and_counts_each_pod_on_the_way(apiserver, kube, worker):
    """https://kubernetes.io/docs/concepts/workloads/controllers/job/#termination-of-job-pods
    (1.31+: SuccessCriteriaMet/FailureTarget first, Complete/Failed once every pod has
    terminated) and the JobStatus reference (ready, terminating, uncountedTerminatedPods)."""
    script, _ = worker
    Kubelet(apiserver, backoff=QUICK_BACKOFF)
    job = ko.job("q", NS, "ok", 1, ko.PodOptions(image="w:1", command=[str(script)]))
    seen = record_statuses(apiserver, job["metadata"]["name"])
    kube.core.create_namespaced_config_map(NS, ko.config_map("q", NS, "ok", {"name": "ok"}))
    name = kube.batch.create_namespaced_job(NS, job).metadata.name
    wait_until(lambda: conditions(kube, name)[0].get("Complete") == "True")
    assert any(s.get("ready") == 1 and s.get("active") == 1 for s in seen)
    waiting = [s for s in seen if (s.get("uncountedTerminatedPods") or {}).get("succeeded")]
    assert waiting and not waiting[0].get("succeeded")  # uncounted first, then counted
    pod = next(o for (r, _, _), o in apiserver.store.objects.items() if r == "pods")
    assert waiting[0]["uncountedTerminatedPods"]["succeeded"] == [pod["metadata"]["uid"]]
    ends = [kinds(s) for s in seen if kinds(s)]
    assert ends[0] == ["SuccessCriteriaMet"] and ends[-1] == ["SuccessCriteriaMet", "Complete"]
    final = seen[-1]
    assert final["succeeded"] == 1 and final["uncountedTerminatedPods"] == {}
    assert final["ready"] == 0 and final["terminating"] == 0 and final["completionTime"]
