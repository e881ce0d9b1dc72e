"""Each concern of the API-server stand-in on its own, without HTTP: patches, faults and the
store's rules (the HTTP face is tested through the official client in test_apiserver.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.apiserver import ApiError, Faults, Store, json_patch, merge_patch
from tests.support.apiserver.patches import apply_patch, strategic_merge


def test_merge_patch_sets_replaces_and_removes_with_null():
    doc = {"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]}
    out = merge_patch(doc, {"a": None, "b": {"c": 9}, "l": [3]})
    assert out == {"b": {"c": 9, "d": 3}, "l": [3]}
    assert doc["b"]["c"] == 2  # the original is left alone


def test_strategic_merge_keys_directives_and_content_types():
    """Strategic merge as the API server does it (patches.py cites the sources): merge keys,
    `$patch: replace`/`delete`, `$deleteFromPrimitiveList`, null removes a key."""
    doc = {
        "metadata": {"finalizers": ["x"], "ownerReferences": [{"uid": "1", "name": "a"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}], "n": 1},
        "spec": {"volumes": [{"name": "v", "emptyDir": {}}], "args": ["a", "b"]},
    }
    out = strategic_merge(
        doc,
        {
            "metadata": {"ownerReferences": [{"uid": "2", "name": "b"}],
                         "$deleteFromPrimitiveList/finalizers": ["x"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "n": None},
            "spec": {"volumes": [{"name": "v", "$patch": "delete"}], "args": ["c"]},
        },
    )  # fmt: skip
    assert out["metadata"] == {"finalizers": [], "ownerReferences": [
        {"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}  # fmt: skip
    assert out["status"] == {"conditions": [{"type": "Ready", "status": "True"}]}
    assert out["spec"] == {"volumes": [], "args": ["c"]}  # no merge key: replaced
    replaced = strategic_merge(doc, {"spec": {"$patch": "replace", "args": []}})
    assert replaced["spec"] == {"args": []}
    with pytest.raises(ApiError) as custom:
        apply_patch(doc, {}, "application/strategic-merge-patch+json", custom=True)
    assert custom.value.code == 415
    with pytest.raises(ApiError) as unknown:
        apply_patch(doc, {}, "text/plain", custom=False)
    assert unknown.value.code == 415


def test_json_patch_test_guards_and_remove_by_index():
    doc = {"metadata": {"resourceVersion": "5", "finalizers": ["x", "y"]}}
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]
    assert json_patch(doc, ops)["metadata"]["finalizers"] == ["y"]
    with pytest.raises(ApiError) as failed:
        json_patch(doc, [{"op": "test", "path": "/metadata/resourceVersion", "value": "4"}])
    assert failed.value.code == 422


def test_faults_match_verb_and_resource_and_are_used_up():
    faults = Faults()
    faults.add("500", verb="create", resource="jobs", count=2)
    assert faults.take("get", "jobs") is None
    assert faults.take("create", "configmaps") is None
    assert faults.take("create", "jobs")["kind"] == "500"
    assert faults.take("create", "jobs")["kind"] == "500"
    assert faults.take("create", "jobs") is None


NEVER = {"template": {"spec": {"restartPolicy": "Never"}}}


def cm(name, **labels):
    return {"metadata": {"name": name, "labels": labels}, "data": {}}


def test_store_create_conflicts_and_stale_updates():
    store = Store()
    first = store.create("", "configmaps", "ns", cm("a"))
    assert first["metadata"]["uid"] and first["metadata"]["resourceVersion"]
    with pytest.raises(ApiError) as exists:
        store.create("", "configmaps", "ns", cm("a"))
    assert exists.value.reason == "AlreadyExists"
    store.replace("configmaps", "ns", "a", dict(first, data={"k": "1"}))
    with pytest.raises(ApiError) as stale:  # first's resourceVersion is old now
        store.replace("configmaps", "ns", "a", dict(first, data={"k": "2"}))
    assert stale.value.reason == "Conflict"


def test_store_lists_by_selector_and_the_json_list_matches():
    store = Store()
    store.create("", "configmaps", "ns", cm("a", q="x"))
    store.create("", "configmaps", "ns", cm("b", q="y"))
    store.create("", "configmaps", "other", cm("c", q="x"))
    items, rv = store.list("configmaps", "ns", "q=x")
    assert [i["metadata"]["name"] for i in items] == ["a"]
    body = json.loads(store.list_json("", "configmaps", "ns", "q in (x,y)"))
    assert body["kind"] == "ConfigMapList" and body["metadata"]["resourceVersion"] == str(rv)
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]


def test_store_finalizers_hold_a_delete_and_owners_take_dependents_along():
    store = Store()
    job = store.create(
        "batch", "jobs", "ns", {"metadata": {"name": "j", "finalizers": ["f"]}, "spec": NEVER}
    )
    owned = cm("j")
    owned["metadata"]["ownerReferences"] = [{"uid": job["metadata"]["uid"], "name": "j"}]
    store.create("", "configmaps", "ns", owned)
    held = store.delete("jobs", "ns", "j", {})
    assert held["metadata"]["deletionTimestamp"]  # still there, marked for deletion
    with pytest.raises(ApiError) as wrong_uid:
        store.delete("jobs", "ns", "j", {"preconditions": {"uid": "not-it"}})
    assert wrong_uid.value.reason == "Conflict"
    store.patch(
        "jobs",
        "ns",
        "j",
        [{"op": "remove", "path": "/metadata/finalizers/0"}],
        "application/json-patch+json",
    )
    # the last finalizer gone from an object marked for deletion: it goes, as on a real server
    assert store.list("jobs", "ns", None)[0] == []
    assert store.list("configmaps", "ns", None)[0] == []  # garbage-collected with its owner
