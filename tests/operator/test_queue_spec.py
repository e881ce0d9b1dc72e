"""A WorkQueue's spec as the options its manager runs with (`manager.operator.queue_spec`),
and the reasons a spec cannot run."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.operator.queue_spec import Settings, SpecProblem, plan

SETTINGS = Settings(image="registry.example/workqueue:1")


def queue(**spec) -> dict:
    base = {"source": {"url": "https://items.example/"}, "worker": {"image": "w:1"}}
    return {"metadata": {"name": "q", "namespace": "media", "generation": 1},
            "spec": {**base, **spec}}  # fmt: skip


def test_an_items_api_is_read_as_it_is_and_needs_no_ambassador():
    made = plan(queue(), SETTINGS)
    assert made.source_url == "https://items.example" and made.ambassador is None
    assert made.kube.queue == "q" and made.kube.namespace == "media"
    assert not made.kube.leader_elect  # the operator holds one Lease for all its queues
    assert made.manager.parallelism == 1 and made.manager.max_attempts == 3


def test_a_served_source_gets_an_ambassador_reached_by_the_url_template():
    made = plan(queue(source={"url": "redis://r:6379/0?zset=jobs", "credentialsSecret": "rc"}),
                SETTINGS)  # fmt: skip
    assert made.source_url == "http://q-ambassador.media.svc:8080"
    assert made.ambassador.args == ["--source=redis://r:6379/0?zset=jobs"]
    assert made.ambassador.credentials_secret == "rc" and made.secrets == ("rc",)


def test_an_object_store_s_workers_may_read_the_objects_it_lists():
    """fetch-run-put reads the objects the source lists without an --input-url (and nothing
    else a record names): the workers are told the prefix, unless the spec says otherwise."""
    made = plan(queue(source={"url": "s3://incoming/reports/"}), SETTINGS)
    assert made.kube.pod().env == {"WORKQUEUE_SOURCE_OBJECTS": "s3://incoming/reports/"}
    own = {"image": "w:1", "env": [{"name": "WORKQUEUE_SOURCE_OBJECTS", "value": "s3://x/"}]}
    made = plan(queue(source={"url": "s3://incoming/reports/"}, worker=own), SETTINGS)
    assert made.kube.pod().env == {"WORKQUEUE_SOURCE_OBJECTS": "s3://x/"}
    assert plan(queue(source={"url": "redis://r:6379/0?set=jobs"}), SETTINGS).kube.pod().env == {}


def test_a_folder_on_a_claim_is_mounted_in_the_ambassador_and_the_workers():
    made = plan(queue(source={"volume": {"claimName": "media", "path": "in/", "writable": True},
                              "suffixes": [".mov"]}), SETTINGS)  # fmt: skip
    assert made.ambassador.args == ["--root=/data/in", "--suffix=.mov"]
    assert made.ambassador.claim == "media"
    assert (made.kube.pvc, made.kube.mount_path, made.kube.volume_writable) == (
        "media", "/data", True)  # fmt: skip
    with pytest.raises(SpecProblem, match="may not leave the volume"):
        plan(queue(source={"volume": {"claimName": "m", "path": "../etc"}}), SETTINGS)


def test_the_worker_fields_reach_the_pod():
    secret_ref = {"secretKeyRef": {"name": "s", "key": "k"}}
    made = plan(queue(worker={
        "image": "w:2", "command": ["run"], "args": ["--fast"],
        "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": secret_ref}],
        "envFrom": [{"secretRef": {"name": "all"}}],
        "resources": {"requests": {"cpu": "1"}}, "serviceAccountName": "worker",
        "podTemplate": {"priorityClassName": "batch"},
    }, timeout="30m", retryBackoff="10s", maxAttempts=5), SETTINGS)  # fmt: skip
    pod = made.kube.pod()
    assert (pod.image, pod.command, pod.args, pod.env) == ("w:2", ["run"], ["--fast"], {"A": "1"})
    assert pod.service_account == "worker" and pod.active_deadline_seconds == 1800
    (container,) = pod.pod_spec_patch["containers"]
    assert container["env"] == [{"name": "B", "valueFrom": secret_ref}]
    assert container["envFrom"] == [{"secretRef": {"name": "all"}}]
    assert pod.pod_spec_patch["priorityClassName"] == "batch"
    assert (made.manager.retry_backoff, made.manager.max_attempts) == (10.0, 5)


def test_drain_reaches_the_queues_manager_and_changing_it_restarts_it():
    """`spec.drain` is the manager's `--drain`: written at its start (joining.join), so a
    change restarts the manager; unset, the ledger's drain (workqueue drain) stands."""
    ledger = {"ledgerSecret": {"name": "ledger"}}
    assert plan(queue(**ledger), SETTINGS).kube.drain is None
    drained = plan(queue(**ledger, drain=True), SETTINGS)
    undrained = plan(queue(**ledger, drain=False), SETTINGS)
    assert drained.kube.drain is True and undrained.kube.drain is False
    assert drained.fingerprint != undrained.fingerprint


def test_placement_reaches_the_queues_manager_read_as_its_flags_read_it():
    ledger = {"ledgerSecret": {"name": "ledger"}}
    placement = {"offers": ["gpu=a100", "region=eu"], "needs": ["render/*=gpu,region in (eu,ch)"],
                 "prefers": "spot!=true", "spillAfter": "2m"}  # fmt: skip
    kube = plan(queue(**ledger, placement=placement), SETTINGS).kube
    assert kube.offers == [("gpu", "a100"), ("region", "eu")]
    assert [(glob, need.text) for glob, need in kube.needs] == [
        ("render/*", "gpu,region in (ch,eu)")
    ]
    assert kube.prefers.text == "spot!=true" and kube.spill_after == 120.0
    assert kube.needs_from_data is False
    with_data = plan(queue(**ledger, placement={"needsFromData": True}), SETTINGS).kube
    assert with_data.needs_from_data is True
    with pytest.raises(SpecProblem, match=r"spec.placement.needs: .*unknown operator"):
        plan(queue(**ledger, placement={"needs": ["*=gpu>2"]}), SETTINGS)


def test_what_a_running_manager_follows_does_not_restart_it():
    first = plan(queue(parallelism=2), SETTINGS).fingerprint
    assert plan(queue(parallelism=9, paused=True, limits=["a=1"]), SETTINGS).fingerprint == first
    assert plan(queue(worker={"image": "w:2"}), SETTINGS).fingerprint != first


@pytest.mark.parametrize(
    ("spec", "reason", "words"),
    [
        ({"source": {"url": "ftp://x/in/"}}, "UnknownSource", "ftp"),
        ({"worker": {}}, "InvalidSpec", "image"),
        ({"group": "no-capture"}, "InvalidSpec", "capture group"),
        ({"timeout": "soon"}, "InvalidSpec", "spec.timeout"),
        ({"priorities": ["urgent/[ab=3"]}, "InvalidSpec", "nothing closes"),
        ({"source": {}}, "InvalidSpec", "url or volume"),
    ],
)
def test_a_spec_that_cannot_run_says_why(spec, reason, words):
    with pytest.raises(SpecProblem) as problem:
        plan(queue(**spec), SETTINGS)
    assert problem.value.reason == reason and words in problem.value.message
