"""Legacy discovery, as kube-apiserver answers it, for clients that look before they ask
(kubectl): /api (APIVersions), /apis (APIGroupList: the built-in groups served here and every
installed CRD's), /api/v1 and /apis/GROUP/VERSION (APIResourceList)."""

from __future__ import annotations


def _resources(group_version: str, names: dict[str, tuple[str, bool]]) -> dict:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {"name": name, "singularName": "", "namespaced": True, "kind": kind,
             "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
            for name, (kind, _) in names.items()
        ],
    }  # fmt: skip


CORE = _resources("v1", {"configmaps": ("ConfigMap", True), "events": ("Event", True),
                         "pods": ("Pod", True), "services": ("Service", True),
                         "secrets": ("Secret", True), "nodes": ("Node", False)})  # fmt: skip
BUILT_IN_GROUPS = {
    ("batch", "v1"): _resources("batch/v1", {"jobs": ("Job", True)}),
    ("apps", "v1"): _resources("apps/v1", {"deployments": ("Deployment", True)}),
    ("networking.k8s.io", "v1"): _resources(
        "networking.k8s.io/v1", {"networkpolicies": ("NetworkPolicy", True)}
    ),
    ("coordination.k8s.io", "v1"): _resources(
        "coordination.k8s.io/v1", {"leases": ("Lease", True)}
    ),
}


def _group(name: str, version: str, served: list[str] | None = None) -> dict:
    versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in served or [version]]
    preferred = {"groupVersion": f"{name}/{version}", "version": version}
    return {"name": name, "versions": versions, "preferredVersion": preferred}


def root_discovery(store, path: str) -> dict:
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": []}  # fmt: skip
    if path == "/api/v1":
        return CORE
    groups = [_group(g, v) for g, v in BUILT_IN_GROUPS]
    groups += [_group(d.group, d.version, d.served) for d in list(store.definitions.values())]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
