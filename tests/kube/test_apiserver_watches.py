"""The API-server stand-in's watches behave as kube-apiserver's do where the manager relies
on them - from a resourceVersion, through a label selector, and from one compacted away -
checked through the official `kubernetes` client over real HTTP."""

from __future__ import annotations

import threading

from tests.kube.stand_in_objects import NS, cm, raw, read_watch


def test_watch_from_a_resource_version_sees_added_modified_deleted(kube):
    first = raw(
        kube.core.create_namespaced_config_map(NS, cm("a", {"q": "x"}), _preload_content=False)
    )
    rv = first["metadata"]["resourceVersion"]
    stream = kube.core.list_namespaced_config_map(
        NS,
        label_selector="q=x",
        watch=True,
        resource_version=rv,
        timeout_seconds=5,
        _preload_content=False,
    )

    def changes():
        kube.core.create_namespaced_config_map(NS, cm("b", {"q": "x"}))
        kube.core.create_namespaced_config_map(NS, cm("other", {"q": "y"}))
        kube.core.patch_namespaced_config_map("b", NS, {"data": {"k": "2"}})
        kube.core.delete_namespaced_config_map("b", NS)

    writer = threading.Thread(target=changes)
    writer.start()
    events = read_watch(stream, 3)
    stream.release_conn()
    writer.join(30)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("MODIFIED", "b"),
        ("DELETED", "b"),
    ]


def test_a_watch_with_a_selector_sees_an_object_arrive_and_leave_as_its_labels_change(kube):
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes:
    a selector watch reports an object relabelled into the selection as ADDED and one
    relabelled out of it as DELETED (the manager's informer would otherwise keep a Job that
    no longer belongs to it)."""
    first = raw(kube.core.create_namespaced_config_map(NS, cm("a"), _preload_content=False))
    stream = kube.core.list_namespaced_config_map(
        NS,
        label_selector="q=x",
        watch=True,
        resource_version=first["metadata"]["resourceVersion"],
        timeout_seconds=5,
        _preload_content=False,
    )

    def changes():
        kube.core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"q": "x"}}})
        kube.core.patch_namespaced_config_map("a", NS, {"data": {"k": "2"}})
        kube.core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"q": "y"}}})
        kube.core.patch_namespaced_config_map("a", NS, {"data": {"k": "3"}})  # unseen

    writer = threading.Thread(target=changes)
    writer.start()
    events = read_watch(stream, 3)
    stream.release_conn()
    writer.join(30)  # its last change made before the server is torn down
    assert [(e["type"], e["object"]["metadata"]["labels"]["q"]) for e in events] == [
        ("ADDED", "x"),
        ("MODIFIED", "x"),
        ("DELETED", "y"),  # the object as it now is, no longer matching
    ]


def test_watch_from_a_compacted_resource_version_is_410(kube, apiserver):
    for i in range(60):  # history is 50 changes
        kube.core.create_namespaced_config_map(NS, cm(f"c{i}"))
    stream = kube.core.list_namespaced_config_map(
        NS, watch=True, resource_version="101", timeout_seconds=2, _preload_content=False
    )
    events = read_watch(stream, 1)
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
