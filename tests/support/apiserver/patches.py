"""Patches, as the API server applies them by the request's Content-Type
(https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/):

  * `application/merge-patch+json`: JSON merge patch (RFC 7386) - maps merge, null removes,
    a list replaces the whole list;
  * `application/json-patch+json`: JSON patch (RFC 6902: add, remove, replace, test - a failed
    test is 422 Invalid);
  * `application/strategic-merge-patch+json`: built-in kinds only (a custom resource answers
    415, as the real server does: its schema carries no merge keys). A list with a patch merge
    key merges element by element on it (containers, env, volumes by name, volumeMounts by
    mountPath, ownerReferences by uid, conditions by type, ...), `finalizers` is a set that
    the patch adds to, other lists are replaced; the directives `$patch: delete` (in a list
    element: remove it; in a map: remove the map), `$patch: replace` (the map or list
    replaces, not merges), `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`
    (accepted; the order of the result follows the patch's elements here) are honoured;
  * anything else is 415 UnsupportedMediaType.

The merge keys come from the Kubernetes API's Go types (`patchMergeKey`/`patchStrategy` tags
of k8s.io/api core/v1, batch/v1, apps/v1, meta/v1) for the fields our objects carry."""

from __future__ import annotations

import copy

from .errors import ApiError


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1] if parts else None
        kind = op["op"]
        if kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op["value"]:
                raise ApiError(422, "Invalid", f"test failed at {op['path']}")
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                parent.pop(last)
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif kind == "add":
                    parent.insert(int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                parent[last] = op["value"]
        else:
            raise ApiError(422, "Invalid", f"unsupported JSON patch op {kind}")
    return doc


# a list field -> its patch merge key: the list merges element by element on that key
KEYED = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "conditions": "type",
}
SET_LISTS = {"finalizers"}  # lists of scalars with patchStrategy merge: the patch adds to them

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def apply_patch(current: dict, patch, content_type: str, custom: bool) -> dict:
    """`current` patched as the Content-Type says (see the module docstring); `custom`: the
    object is a custom resource. Raises 415 for a type this object cannot be patched with."""
    kind = content_type.split(";")[0].strip()
    if kind == JSON_PATCH:
        return json_patch(current, patch)
    if kind == STRATEGIC:
        if custom:
            return _unsupported(custom)
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "a strategic merge patch is a JSON object")
        return strategic_merge(current, patch)
    if kind.endswith("merge-patch+json") or kind.endswith("merge-patch"):  # (bare: the
        return merge_patch(current, patch)  # test kubelet's own writes)
    return _unsupported(custom)


def _unsupported(custom: bool):
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{JSON_PATCH}, {MERGE}" + ("" if custom else f", {STRATEGIC}"),
    )


def strategic_merge(target, patch):
    """A strategic merge patch of one map (see the module docstring)."""
    if not isinstance(target, dict):
        target = {}
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target)
    removals = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            removals[key.split("/", 1)[1]] = value
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(out.get(key), value)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        elif isinstance(value, list):
            out[key] = _merge_list(key, out.get(key), value)
        else:
            out[key] = copy.deepcopy(value)
    for key, values in removals.items():
        if isinstance(out.get(key), list):
            out[key] = [v for v in out[key] if v not in values]
    return out


def _merge_list(field: str, current, patch: list) -> list:
    current = current if isinstance(current, list) else []
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [copy.deepcopy(e) for e in patch if not (isinstance(e, dict) and "$patch" in e)]
    if field in SET_LISTS:
        return current + [copy.deepcopy(v) for v in patch if v not in current]
    key = KEYED.get(field)
    if key is None or not all(isinstance(e, dict) for e in current + patch):
        return copy.deepcopy(patch)
    out = [copy.deepcopy(e) for e in current]
    for element in patch:
        if key not in element:
            raise ApiError(422, "Invalid", f"{field}: map in a merge list has no {key!r}")
        position = next((i for i, e in enumerate(out) if e.get(key) == element[key]), None)
        if element.get("$patch") == "delete":
            if position is not None:
                del out[position]
        elif position is None:
            out.append({k: copy.deepcopy(v) for k, v in element.items() if k != "$patch"})
        else:
            out[position] = strategic_merge(out[position], element)
    return out
