"""The Kubernetes objects for one item: names, labels, manifests - each checked against the
official schemas with kubernetes-validate (strict) for Kubernetes 1.30 and the newest version
it knows."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.support.kube_schemas import validate as validate_strictly

VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
HOSTILE = [
    "a.mp4",
    'it\'s "quoted" $(rm -rf ~).mp4',
    "ünïcødé 視頻.mp4",
    "x" * 250,
    "....",
    "-leading-dash-.mp4",
    "UPPER CASE.MP4",
    "sub/dir/clip.mp4",
    "\t\n",
]


def validate(obj):
    for version in VERSIONS:
        validate_strictly(obj, version, strict=True)


@pytest.mark.parametrize("item", HOSTILE)
def test_names_are_dns1123_labels_for_any_item(item):
    name = ko.object_name("thumbs", item)
    assert len(name) <= 63 and DNS1123_LABEL.match(name), name
    assert name.startswith("thumbs-")
    for value in ko.labels("thumbs", item).values():
        assert len(value) <= 63 and LABEL_VALUE.match(value)


@given(st.text(min_size=1, max_size=300))
def test_names_are_always_valid_and_deterministic(item):
    name = ko.object_name("q", item)
    assert len(name) <= 63 and DNS1123_LABEL.match(name)
    assert ko.object_name("q", item) == name


def test_names_differ_by_item_and_queue_even_when_slugs_collide():
    assert ko.object_name("q", "a b.mp4") != ko.object_name("q", "a-b.mp4")
    assert ko.object_name("q", "a.mp4") != ko.object_name("r", "a.mp4")
    long_a, long_b = "x" * 250 + "a", "x" * 250 + "b"
    assert ko.object_name("q", long_a) != ko.object_name("q", long_b)


@pytest.mark.parametrize("queue", ["", "UPPER", "-x", "x-", "a" * 31, "a_b"])
def test_bad_queue_names_are_refused(queue):
    with pytest.raises(ko.InvalidQueueName):
        ko.check_queue_name(queue)


@pytest.mark.parametrize("item", HOSTILE)
def test_minimal_objects_are_valid(item):
    cm = ko.config_map("thumbs", "media", item, {"name": item, "path": f"/data/{item}"})
    validate(cm)
    assert json.loads(cm["data"]["item.json"])["name"] == item
    assert cm["metadata"]["annotations"][ko.ITEM_ANNOTATION] == item
    job = ko.job("thumbs", "media", item, 1, ko.PodOptions(image="thumbnailer:1.0"))
    validate(job)
    assert job["metadata"]["name"] == cm["metadata"]["name"]
    assert job["metadata"]["finalizers"] == [ko.RECORD_FINALIZER]


def test_every_pod_option_is_valid_and_locked_down():
    pod = ko.PodOptions(
        image="registry.example/thumbnailer:1.2.3",
        command=["/usr/local/bin/thumbnail"],
        args=["--width", "320"],
        env={"OUTPUT_DIR": "/data/thumbnails", "THUMB_WIDTH": "320"},
        resources={
            "requests": {"cpu": "250m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        pvc="videos",
        mount_path="/data",
        read_only_volume=False,
        service_account="thumbnailer",
        node_selector={"kubernetes.io/os": "linux"},
        tolerations=[{"key": "batch", "operator": "Exists", "effect": "NoSchedule"}],
        backoff_limit=2,
        active_deadline_seconds=600,
        ttl_seconds_after_finished=3600,
        pod_spec_patch={
            "priorityClassName": "batch-low",
            "containers": [{"name": "worker", "workingDir": "/tmp"}],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    )
    job = ko.job("thumbs", "media", "a.mp4", 3, pod)
    validate(job)
    spec = job["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["env"][0] == {
        "name": "WORK_ITEM_FILE",
        "value": "/var/run/workqueue/item.json",
    }
    assert {"name": "work-item", "mountPath": "/var/run/workqueue", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert container["workingDir"] == "/tmp" and container["image"] == pod.image
    assert [v["name"] for v in spec["volumes"]] == ["work-item", "shared", "scratch"]
    assert spec["priorityClassName"] == "batch-low"
    assert job["spec"]["backoffLimit"] == 2 and job["spec"]["ttlSecondsAfterFinished"] == 3600
    assert job["metadata"]["annotations"][ko.ATTEMPT_ANNOTATION] == "3"


def test_an_item_too_large_for_a_config_map_is_a_clear_error():
    with pytest.raises(ko.ItemTooLarge, match="at most"):
        ko.config_map("q", "ns", "big", {"blob": "x" * (1024 * 1024)})


def test_owner_reference_points_at_the_created_job():
    job = ko.job("q", "ns", "a", 1, ko.PodOptions(image="i:1"))
    job["metadata"]["uid"] = "1234-abcd"
    ref = ko.owner_reference(job)
    assert ref == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": "1234-abcd",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    cm = ko.config_map("q", "ns", "a", {})
    cm["metadata"]["ownerReferences"] = [ref]
    validate(cm)


def test_merge_rules():
    base = {"a": 1, "b": {"c": 2}, "containers": [{"name": "w", "x": 1}], "tags": [1, 2]}
    patch = {"b": {"d": 3}, "containers": [{"name": "w", "y": 2}, {"name": "side"}], "tags": [9]}
    assert ko.merge(base, patch) == {
        "a": 1,
        "b": {"c": 2, "d": 3},
        "containers": [{"name": "w", "x": 1, "y": 2}, {"name": "side"}],
        "tags": [9],
    }


def pod_with(patch: dict) -> dict:
    options = ko.PodOptions(
        image="w:1",
        pvc="shared-claim",
        mount_path="/data",
        env={"A": "1"},
        pod_spec_patch=patch,
    )
    job = ko.job("q", "ns", "a.mp4", 1, options)
    validate(job)
    return job["spec"]["template"]["spec"]


def test_a_second_mount_of_the_shared_volume_is_added_not_swapped():
    """volumeMounts merge by mountPath, as Kubernetes merges them: a mount of the same volume
    at /out beside /data (the case that used to replace /data)."""
    spec = pod_with(
        {
            "containers": [
                {"name": "worker", "volumeMounts": [{"name": "shared", "mountPath": "/out"}]}
            ]
        }
    )
    mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
    assert mounts == {"/var/run/workqueue": "work-item", "/data": "shared", "/out": "shared"}


def test_a_mount_at_the_same_path_is_changed_in_place():
    spec = pod_with(
        {
            "containers": [
                {"name": "worker", "volumeMounts": [{"mountPath": "/data", "subPath": "in"}]}
            ]
        }
    )
    data = [m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == "/data"]
    assert data == [{"name": "shared", "mountPath": "/data", "readOnly": True, "subPath": "in"}]


def test_env_merges_by_name_and_ports_by_container_port():
    spec = pod_with(
        {
            "containers": [
                {
                    "name": "worker",
                    "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                    "ports": [{"containerPort": 9100, "name": "metrics"}],
                }
            ]
        }
    )
    env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    assert env["A"] == "2" and env["B"] == "3" and "WORK_ITEM_FILE" in env
    base = {"ports": [{"containerPort": 80, "name": "a"}]}
    patch = {"ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}]}
    assert ko.merge(base, patch)["ports"] == [
        {"containerPort": 80, "name": "a", "protocol": "TCP"},
        {"containerPort": 81},
    ]


def test_containers_volumes_and_pull_secrets_merge_by_name_tolerations_are_replaced():
    spec = pod_with(
        {
            "initContainers": [{"name": "fetch", "image": "busybox:1"}],
            "containers": [{"name": "sidecar", "image": "log:1"}],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "regcred"}],
        }
    )
    assert [c["name"] for c in spec["containers"]] == ["worker", "sidecar"]
    assert [v["name"] for v in spec["volumes"]] == ["work-item", "shared", "scratch"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    base = {"tolerations": [{"key": "a", "operator": "Exists"}]}
    patch = {"tolerations": [{"key": "b", "operator": "Exists"}]}
    assert ko.merge(base, patch) == patch  # no merge key in Kubernetes: replaced
