"""The test kubelet runs a Job built by kube_objects: the item reaches the worker as the file
named by WORK_ITEM_FILE, and the Job's status and conditions follow batch/v1."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from manager.backends.kubernetes import objects as ko
from tests.support.kubelet import Kubelet
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
    kubelet = Kubelet(apiserver)
    job = dispatch(kube, "a b.mp4", ko.PodOptions(image="w:1", command=[str(script)]))
    name = job.metadata.name
    wait_until(lambda: conditions(kube, name)[0].get("Complete") == "True")
    _, status = conditions(kube, name)
    assert status.succeeded == 1 and status.completion_time is not None
    assert json.loads(out.read_text().splitlines()[0]) == {"name": "a b.mp4"}
    assert kubelet.runs_of(name) == [0]


def test_a_failing_job_retries_to_its_backoff_limit_then_fails(apiserver, kube, worker):
    script, _ = worker
    kubelet = Kubelet(apiserver)
    pod = ko.PodOptions(image="w:1", command=[str(script)], backoff_limit=2)
    job = dispatch(kube, "will-fail", pod, {"name": "will-fail"})
    name = job.metadata.name
    wait_until(lambda: conditions(kube, name)[0].get("Failed") == "True")
    assert kubelet.runs_of(name) == [3, 3, 3]
    status = kube.batch.read_namespaced_job_status(name, NS).status
    assert status.failed == 1 and status.conditions[0].reason == "BackoffLimitExceeded"


def test_ttl_after_finished_deletes_the_job_and_what_it_owns(apiserver, kube, worker):
    script, _ = worker
    Kubelet(apiserver)
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
    Kubelet(apiserver, images={"thumbnailer:1": [str(script)]})
    job = dispatch(kube, "x", ko.PodOptions(image="thumbnailer:1"))
    wait_until(lambda: conditions(kube, job.metadata.name)[0].get("Complete") == "True")
    assert out.exists()
