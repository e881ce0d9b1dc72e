"""Where a call of `KubeApi` goes and how it is sent: a verb on a kind as an HTTP request.

Requests are made by path through the client's `ApiClient`, never its typed API classes
(`api.py` says why), so the paths are written here: a built-in kind under the API group and
version that serves it, a custom kind under its own; a namespaced kind under
`/namespaces/<namespace>` unless the call is across every namespace; a verb on one object with
the object's name (quoted whole: a name never adds a path segment) and its subresource.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

# custom kinds -> (group, version, plural). A queue's own manager reads v1alpha1, which every
# installed CRD serves (Helm never upgrades a CRD); the operator reads the whole queue at v1beta1
CUSTOM = {
    "workqueues": ("workqueue.dev", "v1alpha1", "workqueues"),
    "workqueues.v1beta1": ("workqueue.dev", "v1beta1", "workqueues"),
}

# kind -> the API group and version it is served under
_KINDS = {
    "jobs": "/apis/batch/v1",
    "configmaps": "/api/v1",
    "events": "/api/v1",
    "pods": "/api/v1",
    "leases": "/apis/coordination.k8s.io/v1",
    "deployments": "/apis/apps/v1",
    "services": "/api/v1",
    "secrets": "/api/v1",
    "networkpolicies": "/apis/networking.k8s.io/v1",
    "nodes": "/api/v1",
}
CLUSTER_SCOPED = frozenset({"nodes"})  # kinds with no namespace in their path
# the Content-Type of a patch: a list is a JSON patch; an object is a strategic merge for a
# built-in kind (as the official client sends it) and a merge patch for a custom one, which
# has no strategic merge (the API server answers 415)
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"
# verb -> (HTTP method, whether it names one object, the subresource)
_VERBS = {
    "create": ("POST", False, ""),
    "list": ("GET", False, ""),
    "read": ("GET", True, ""),
    "read_status": ("GET", True, "/status"),
    "replace": ("PUT", True, ""),
    "patch": ("PATCH", True, ""),
    "patch_status": ("PATCH", True, "/status"),
    "patch_scale": ("PATCH", True, "/scale"),
    "delete": ("DELETE", True, ""),
}
# the verbs that change something: refused once the client is fenced (`KubeApi.fence`)
WRITES = frozenset({"create", "replace", "patch", "patch_status", "patch_scale", "delete"})
# keyword -> the query parameter it is
_QUERY = {
    "label_selector": "labelSelector",
    "limit": "limit",
    "watch": "watch",
    "resource_version": "resourceVersion",
    "timeout_seconds": "timeoutSeconds",
    "allow_watch_bookmarks": "allowWatchBookmarks",
}


def path(namespace: str | None, verb: str, kind: str, name: str | None) -> str:
    """The resource path of `verb` on `kind` (`name`d for a verb on one object); `namespace`
    None: every namespace (a cluster-wide list or watch)."""
    where = ("" if namespace is None or kind in CLUSTER_SCOPED
             else f"/namespaces/{quote(namespace)}")  # fmt: skip
    if kind in CUSTOM:
        group, version, plural = CUSTOM[kind]
        base = f"/apis/{group}/{version}{where}/{plural}"
    else:
        base = f"{_KINDS[kind]}{where}/{kind}"
    _, named, sub = _VERBS[verb]
    return base + (f"/{quote(name, safe='')}{sub}" if named else "")


def method(verb: str) -> str:
    return _VERBS[verb][0]


def headers(verb: str, kind: str, body: Any) -> dict[str, str]:
    """The request's headers: JSON answers, and the Content-Type its body is sent as."""
    sent = {"Accept": "application/json"}
    if method(verb) == "PATCH":
        patch_type = MERGE_PATCH if kind in CUSTOM else STRATEGIC_MERGE
        sent["Content-Type"] = JSON_PATCH if isinstance(body, list) else patch_type
    elif body is not None:
        sent["Content-Type"] = "application/json"
    return sent


def query_params(query: dict[str, Any]) -> list[tuple[str, str]]:
    """The query parameters of `KubeApi.call`'s keywords (those given None left out)."""
    return [(_QUERY[key], _query_value(value)) for key, value in query.items()
            if value is not None]  # fmt: skip


def _query_value(value: Any) -> str:
    """A query parameter as the API server reads it (booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
