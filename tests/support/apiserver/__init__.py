"""A Kubernetes API-server stand-in for tests and benchmarks: real HTTP on loopback, reached
through the official `kubernetes` client, behaving as kube-apiserver does where the manager
relies on it.

What it implements (namespaced resources only):
  batch/v1 jobs (+ /status), v1 configmaps, pods, events, coordination.k8s.io/v1 leases,
  apps/v1 deployments, v1 services and secrets, networking.k8s.io/v1 networkpolicies;
  /version; the proxy to a Service (`endpoints`); lists and watches across namespaces
  create (generateName; 409 AlreadyExists; names, labels and Job/ConfigMap rules checked as
  the real server does, 422 Invalid), get, list (equality- and set-based label selectors;
  paging with limit/continue), update (409 Conflict on a stale resourceVersion), patch (merge,
  JSON, and strategic merge with the built-in kinds' merge keys - 415 for a custom resource,
  `patches.py`), delete (preconditions; finalizers -> deletionTimestamp, removal once they are
  gone; ownerReferences garbage collection, background and orphan), watch from a
  resourceVersion (ADDED/MODIFIED/DELETED, an object leaving a selector is DELETED; an ERROR
  event with 410 Expired for a compacted one), uid, creationTimestamp, a monotonically
  increasing resourceVersion, Status error bodies.
  custom resources of an installed CustomResourceDefinition (`store.install_crd`, custom.py):
  structural defaults and validation (422 Invalid), discovery of the group version, the status
  subresource (generation moves with spec only) and the scale subresource (autoscaling/v1 Scale),
  lists as server-side Tables with the printer columns (what `kubectl get` asks for)
  legacy discovery (/api, /apis, /api/v1, /apis/GROUP/VERSION), enough for kubectl
Not implemented: other resources, server-side apply, field selectors, foreground deletion's blocking
(treated as background), admission of any kind, authentication.

Faults on demand (`faults.add`): 429 with Retry-After, 500, slow answers, watch streams cut
after N events. Every request is recorded as (verb, group, resource, subresource) in `requests`,
so the RBAC a client needs can be derived from what it actually did.

Split by concern: `selectors`, `patches`, `faults`, `store`, `server` (HTTP), `watches`,
`custom` (CRDs), `discovery`, `errors` (Status bodies).
"""

from .errors import ApiError, now_rfc3339, status_body
from .faults import Faults
from .patches import json_patch, merge_patch
from .selectors import selector_matches
from .server import ApiServer
from .store import RESOURCES, Store

__all__ = [
    "RESOURCES",
    "ApiError",
    "ApiServer",
    "Faults",
    "Store",
    "json_patch",
    "merge_patch",
    "now_rfc3339",
    "selector_matches",
    "status_body",
]
