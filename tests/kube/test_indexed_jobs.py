"""The stand-in's Indexed Jobs, as the Job controller reports them: one pod per index with its
JOB_COMPLETION_INDEX, each index retried on its own (backoffLimitPerIndex), the outcome of every
index in completedIndexes / failedIndexes, the Failed condition with reason FailedIndexes - and
the API server's validation of such Jobs."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kube_workqueue.manager.backends.kubernetes.manifests import batch_objects as bo
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.support.indexed import compress
from tests.support.kubelet import QUICK_BACKOFF, Kubelet
from tests.support.servers import wait_until

NS = "media"


@pytest.fixture
def worker(tmp_path):
    """Appends its item and index to seen.jsonl; exit 3 for an item named *fail*, 4 for
    *fatal*, and *flaky* fails its first run only."""
    out = tmp_path / "seen.jsonl"
    script = tmp_path / "worker.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'printf \'%s %s\\n\' "$JOB_COMPLETION_INDEX" "$(cat "$WORK_ITEM_FILE")" >> {out}\n'
        'case "$(cat "$WORK_ITEM_FILE")" in\n'
        "  *fatal*) exit 4;;\n"
        "  *fail*) exit 3;;\n"
        f"  *flaky*) [ -e {tmp_path}/flaked ] || {{ touch {tmp_path}/flaked; exit 3; }};;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return script, out


def submit(kube, names, pod, seq=1, max_attempts=2):
    members = [bo.member(n, {"name": n}, 1) for n in names]
    kube.core.create_namespaced_config_map(NS, bo.config_map("q", NS, seq, members))
    body = bo.job("q", NS, seq, len(members), pod, max_attempts)
    body["metadata"].pop("finalizers")
    return kube.batch.create_namespaced_job(NS, body).metadata.name


def status_of(apiserver, name):
    return apiserver.store.get("jobs", NS, name).get("status") or {}


def finished(apiserver, name):
    conditions = status_of(apiserver, name).get("conditions") or []
    return {c["type"]: c for c in conditions if c["status"] == "True"}


def test_ranges_are_compressed_as_the_job_status_writes_them():
    assert compress([]) == ""
    assert compress([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert bo.parse_indexes("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}
    assert bo.parse_indexes("") == set() and bo.parse_indexes(None) == set()


def test_each_index_gets_its_own_item_and_the_job_completes(apiserver, kube, worker):
    script, out = worker
    kubelet = Kubelet(apiserver, backoff=QUICK_BACKOFF)
    names = ["a.mp4", "b c.mp4", "ünï.mp4"]
    name = submit(kube, names, ko.PodOptions(image="w:1", command=[str(script)]))
    wait_until(lambda: "Complete" in finished(apiserver, name))
    seen = sorted(line.split(" ", 1) for line in out.read_text().splitlines())
    assert [(i, json.loads(body)["name"]) for i, body in seen] == list(
        zip(["0", "1", "2"], names, strict=True)
    )
    status = status_of(apiserver, name)
    assert status["completedIndexes"] == "0-2" and status["succeeded"] == 3
    assert status["failedIndexes"] == "" and status["failed"] == 0
    assert set(finished(apiserver, name)) == {"SuccessCriteriaMet", "Complete"}
    pods = [p for (r, _, _), p in apiserver.store.objects.items() if r == "pods"]
    assert sorted(p["metadata"]["annotations"][bo.INDEX_ANNOTATION] for p in pods) == [
        "0",
        "1",
        "2",
    ]
    for pod in pods:
        index = pod["metadata"]["annotations"][bo.INDEX_ANNOTATION]
        assert pod["metadata"]["labels"][bo.INDEX_ANNOTATION] == index
        assert pod["metadata"]["name"].startswith(f"{name}-{index}-")
    assert sorted(kubelet.runs) == [(f"{name}/{i}", 0) for i in range(3)]


def test_a_failing_index_is_retried_alone_and_fails_alone(apiserver, kube, worker):
    script, _ = worker
    kubelet = Kubelet(apiserver, backoff=QUICK_BACKOFF)
    names = ["ok.mp4", "will-fail.mp4", "flaky.mp4", "ok-2.mp4"]
    name = submit(kube, names, ko.PodOptions(image="w:1", command=[str(script)]), max_attempts=3)
    wait_until(lambda: "Failed" in finished(apiserver, name))
    status = status_of(apiserver, name)
    assert status["completedIndexes"] == "0,2-3" and status["failedIndexes"] == "1"
    assert status["succeeded"] == 3 and status["failed"] == 4  # 3 tries of 1, 1 of flaky
    failed = finished(apiserver, name)["Failed"]
    assert failed["reason"] == "FailedIndexes" and "FailureTarget" in finished(apiserver, name)
    assert kubelet.runs_of(f"{name}/1") == [3, 3, 3]
    assert kubelet.runs_of(f"{name}/2") == [3, 0]
    assert kubelet.runs_of(f"{name}/0") == [0]


def test_fail_index_ends_one_index_at_once_and_disruptions_are_not_counted(apiserver, kube, worker):
    script, _ = worker
    kubelet = Kubelet(apiserver, backoff=QUICK_BACKOFF)
    kubelet.disrupt["preempted"] = 2
    pod = ko.PodOptions(image="w:1", command=[str(script)], fail_fast_exit_codes=[4])
    name = submit(kube, ["fatal.mp4", "preempted.mp4"], pod, max_attempts=3)
    wait_until(lambda: "Failed" in finished(apiserver, name))
    status = status_of(apiserver, name)
    assert status["failedIndexes"] == "0" and status["completedIndexes"] == "1"
    assert kubelet.runs_of(f"{name}/0") == [4]  # FailIndex: no second try
    assert kubelet.runs_of(f"{name}/1") == [137, 137, 0]  # ignored: still three tries left
    assert [ignored for _, ignored in kubelet.disruptions] == [True, True]


def test_a_job_failed_while_pods_run_says_failed_only_once_they_have_terminated(
    apiserver, kube, worker
):
    """https://kubernetes.io/docs/concepts/workloads/controllers/job/#termination-of-job-pods:
    FailureTarget as soon as a FailJob rule matches, the running pods counted as terminating
    while they stop, Failed once none is left."""
    script, _ = worker
    slow = script.parent / "slow.sh"
    armed = script.parent / "armed"  # the long pod's trap is set: only then may fatal fail
    slow.write_text(
        '#!/bin/sh\ncase "$(cat "$WORK_ITEM_FILE")" in\n'
        f'  *fatal*) while [ ! -e "{armed}" ]; do sleep 0.02; done; exit 4;;\nesac\n'
        f"trap 'sleep 0.3; exit 143' TERM\ntouch \"{armed}\"\n"
        "while :; do sleep 0.05; done\n"
    )
    slow.chmod(0o755)
    kubelet = Kubelet(apiserver, backoff=QUICK_BACKOFF)
    pod = ko.PodOptions(image="w:1", command=[str(slow)])
    members = [bo.member(n, {"name": n}, 1) for n in ["long.mp4", "fatal.mp4"]]
    kube.core.create_namespaced_config_map(NS, bo.config_map("q", NS, 7, members))
    body = bo.job("q", NS, 7, 2, pod, 1)
    body["metadata"].pop("finalizers")
    body["spec"]["parallelism"] = 2
    body["spec"]["podFailurePolicy"] = {
        "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [4]}}]
    }
    seen = []
    apiserver.store.hooks.append(
        lambda kind, resource, obj: (
            seen.append(obj.get("status") or {}) if resource == "jobs" else None
        )
    )
    name = kube.batch.create_namespaced_job(NS, body).metadata.name
    wait_until(lambda: "Failed" in finished(apiserver, name), timeout=60)
    ends = [(s, [c["type"] for c in s.get("conditions") or []]) for s in seen]
    interim = next(s for s, types in ends if types == ["FailureTarget"])
    assert interim["terminating"] == 1 and interim["active"] == 0
    final = next(s for s, types in ends if "Failed" in types)
    assert final["terminating"] == 0 and final["conditions"][0]["reason"] == "PodFailurePolicy"
    assert kubelet.runs_of(f"{name}/0") == [143]  # stopped, and it had ended before Failed


def test_more_failed_indexes_than_allowed_ends_the_job(apiserver, kube, worker):
    script, _ = worker
    Kubelet(apiserver, backoff=QUICK_BACKOFF)
    members = [bo.member(n, {"name": n}, 1) for n in ["fail-1", "fail-2", "ok"]]
    kube.core.create_namespaced_config_map(NS, bo.config_map("q", NS, 9, members))
    body = bo.job("q", NS, 9, 3, ko.PodOptions(image="w:1", command=[str(script)]), 1)
    body["metadata"].pop("finalizers")
    body["spec"].update(maxFailedIndexes=0, parallelism=1)
    name = kube.batch.create_namespaced_job(NS, body).metadata.name
    wait_until(lambda: "Failed" in finished(apiserver, name))
    assert finished(apiserver, name)["Failed"]["reason"] == "MaxFailedIndexesExceeded"
    status = status_of(apiserver, name)
    assert status["failedIndexes"] == "0" and status["completedIndexes"] == ""  # 1, 2 never ran


def test_instant_mode_completes_every_index_at_once(apiserver, kube):
    Kubelet(apiserver, instant=True)
    name = submit(kube, [f"{i}.x" for i in range(1000)], ko.PodOptions(image="w:1"))
    wait_until(lambda: "Complete" in finished(apiserver, name))
    assert status_of(apiserver, name)["completedIndexes"] == "0-999"


def test_the_api_server_refuses_what_kubernetes_refuses(kube):
    pod = ko.PodOptions(image="w:1")

    def refused(change):
        body = bo.job("q", NS, 3, 2, pod, 2)
        change(body["spec"])
        with pytest.raises(ApiException) as caught:
            kube.batch.create_namespaced_job(NS, body)
        return caught.value.status, json.loads(caught.value.body)["message"]

    assert refused(lambda s: s.update(completionMode="NonIndexed"))[0] == 422
    status, message = refused(lambda s: s.update(completions=100_001, parallelism=1))
    assert status == 422 and "spec.completions" in message
    assert "maxFailedIndexes" in refused(lambda s: s.update(maxFailedIndexes=3))[1]
    assert (
        "FailIndex"
        in refused(
            lambda s: (
                s.pop("backoffLimitPerIndex"),
                s.pop("maxFailedIndexes"),
                s.update(completionMode="Indexed"),
                s["podFailurePolicy"]["rules"].append(
                    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [2]}}
                ),
            )
        )[1]
    )
    created = kube.batch.create_namespaced_job(NS, bo.job("q", NS, 4, 2, pod, 2))
    with pytest.raises(ApiException) as caught:  # completions is immutable ...
        kube.batch.patch_namespaced_job(created.metadata.name, NS, {"spec": {"completions": 3}})
    assert caught.value.status == 422
    # ... but parallelism is not
    kube.batch.patch_namespaced_job(created.metadata.name, NS, {"spec": {"parallelism": 1}})


def test_a_config_map_holds_at_most_one_mebibyte(kube):
    body = {"metadata": {"name": "big"}, "data": {"x": "a" * (1024 * 1024)}}
    with pytest.raises(ApiException) as caught:
        kube.core.create_namespaced_config_map(NS, body)
    assert caught.value.status == 422 and "1048576 bytes" in caught.value.body
