"""The stand-in's objects: create, get, list, update, patch, delete with kube-apiserver's rules
(generateName, 409 AlreadyExists and Conflict, preconditions, finalizers and deletionTimestamp,
ownerReferences garbage collection), a monotonically increasing resourceVersion, and the log of
changes that watches replay."""

from __future__ import annotations

import base64
import copy
import json
import random
import string
import threading
import uuid
from collections import deque

from . import builtin
from .custom import Definition
from .errors import ApiError, now_rfc3339
from .patches import apply_patch
from .selectors import selector_matches

CLUSTER_SCOPED = frozenset({"nodes"})  # no namespace in their path, every verb without one
RESOURCES = {
    ("", "configmaps"): ("v1", "ConfigMap"),
    ("", "events"): ("v1", "Event"),
    ("", "pods"): ("v1", "Pod"),
    ("", "services"): ("v1", "Service"),
    ("", "secrets"): ("v1", "Secret"),
    ("", "nodes"): ("v1", "Node"),
    ("batch", "jobs"): ("batch/v1", "Job"),
    ("apps", "deployments"): ("apps/v1", "Deployment"),
    ("networking.k8s.io", "networkpolicies"): ("networking.k8s.io/v1", "NetworkPolicy"),
    ("coordination.k8s.io", "leases"): ("coordination.k8s.io/v1", "Lease"),
}


class Store:
    """Objects by (resource, namespace, name), and the change log watches read.

    Invariant: every change bumps `rv` by one, stamps the object with it, and appends
    (rv, resource, namespace, type, object) to `log`; `log` keeps the newest `history` changes,
    and a watch from an older resourceVersion than it holds gets 410 Expired."""

    def __init__(self, history: int = 10_000) -> None:
        self.cond = threading.Condition()
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.rv = 100
        # (rv, resource, namespace, type, object, the object's labels before this change)
        self.log: deque[tuple[int, str, str, str, dict, dict | None]] = deque(maxlen=history)
        self._labels: dict[tuple[str, str, str], dict] = {}  # each object's labels, as stored
        self.hooks: list = []  # called (type, resource, obj) after each change, outside no lock
        self.resources = dict(RESOURCES)  # (group, plural) -> (apiVersion, kind), CRDs too
        self.definitions: dict[str, Definition] = {}  # plural -> its CRD (custom.py)

    def install_crd(self, crd: dict) -> Definition:
        """Serve a CustomResourceDefinition's resource from now on (custom.py)."""
        definition = Definition(crd)
        with self.cond:
            self.resources[(definition.group, definition.plural)] = (
                definition.api_version, definition.kind,
            )  # fmt: skip
            self.definitions[definition.plural] = definition
        return definition

    def _record(self, kind: str, resource: str, ns: str, obj: dict) -> None:
        self.rv += 1
        if kind != "DELETED":
            obj["metadata"]["resourceVersion"] = str(self.rv)
        snapshot = copy.deepcopy(obj)
        if kind == "DELETED":
            snapshot["metadata"]["resourceVersion"] = str(self.rv)
        key = (resource, ns, obj["metadata"]["name"])
        before = self._labels.get(key)
        if kind == "DELETED":
            self._labels.pop(key, None)
        else:
            self._labels[key] = dict(obj["metadata"].get("labels") or {})
        self.log.append((self.rv, resource, ns, kind, snapshot, before))
        self.cond.notify_all()
        for hook in list(self.hooks):
            hook(kind, resource, copy.deepcopy(snapshot))

    def oldest_rv(self) -> int:
        return self.log[0][0] if self.log else self.rv

    def create(self, group: str, resource: str, ns: str, body: dict) -> dict:
        api_version, kind = self.resources[(group, resource)]
        with self.cond:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name"):
                prefix = meta.get("generateName")
                if not prefix:
                    raise ApiError(422, "Invalid", "metadata.name or generateName is required")
                suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
                meta["name"] = prefix + suffix
            key = (resource, ns, meta["name"])
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{resource} "{meta["name"]}" already exists')
            meta.update(
                namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(), generation=1
            )
            meta.pop("deletionTimestamp", None)
            obj["apiVersion"], obj["kind"] = api_version, kind
            builtin.check(resource, obj)
            definition = self.definitions.get(resource)
            if definition is not None:
                if definition.has_status:
                    obj.pop("status", None)  # status is written through /status only
                obj = definition.admit(obj)
            self.objects[key] = obj
            self._record("ADDED", resource, ns, obj)
            return copy.deepcopy(obj)

    def get(self, resource: str, ns: str, name: str) -> dict:
        with self.cond:
            obj = self.objects.get((resource, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
            return copy.deepcopy(obj)

    def _matching(self, resource: str, ns: str, selector: str | None):
        """The stored objects of a list, in name order (the caller holds `cond`)."""
        return (
            o
            for (r, n, _), o in sorted(self.objects.items())
            if r == resource
            and (ns is None or n == ns)  # None: every namespace (a cluster-wide list)
            and selector_matches(selector, o["metadata"].get("labels") or {})
        )

    def list(self, resource: str, ns: str, selector: str | None) -> tuple[list[dict], int]:
        with self.cond:
            return [copy.deepcopy(o) for o in self._matching(resource, ns, selector)], self.rv

    def list_json(self, group: str, resource: str, ns: str, selector: str | None,
                  limit: int | None = None, token: str | None = None) -> bytes:  # fmt: skip
        """A list answer's body, serialised under the lock without copying each object (a
        list of 10,000 Jobs is what the benchmarks ask for). With `limit`, one page, and a
        `continue` token for the next while more are left, as the API server pages
        (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks).
        Every page says the first page's resourceVersion, as the real server does; unlike it,
        later pages here show the objects as they are now, not as at that version (the real
        one reads etcd's snapshot): nothing tested relies on the difference."""
        api_version, kind = self.resources[(group, resource)]
        with self.cond:
            items = list(self._matching(resource, ns, selector))
            metadata: dict = {"resourceVersion": str(self.rv)}
            if token:
                try:
                    place = json.loads(base64.urlsafe_b64decode(token.encode()))
                    after, metadata["resourceVersion"] = place["after"], place["rv"]
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "BadRequest", "continue: invalid token") from None
                items = [o for o in items if _place(o) > after]
            if limit and len(items) > limit:
                last = _place(items[limit - 1])
                metadata["continue"] = base64.urlsafe_b64encode(
                    json.dumps({"after": last, "rv": metadata["resourceVersion"]}).encode()
                ).decode()  # fmt: skip
                metadata["remainingItemCount"] = len(items) - limit
                items = items[:limit]
            return json.dumps({"kind": kind + "List", "apiVersion": api_version,
                               "metadata": metadata, "items": items}).encode()  # fmt: skip

    def replace(
        self, resource: str, ns: str, name: str, body: dict, status_only: bool = False
    ) -> dict:
        with self.cond:
            current = self.objects.get((resource, ns, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
            wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource} "{name}": the '
                    "object has been modified; please apply your changes to the "
                    "latest version and try again",
                )
            return self._write(resource, ns, name, current, body, status_only)

    def _write(self, resource, ns, name, current, body, status_only) -> dict:
        new = copy.deepcopy(current)
        if status_only:
            new["status"] = copy.deepcopy(body.get("status"))
        else:
            keep = {
                k: current["metadata"][k]
                for k in ("uid", "creationTimestamp", "namespace", "name")
                if k in current["metadata"]
            }
            status = current.get("status")
            new = copy.deepcopy(body)
            new.setdefault("metadata", {}).update(keep)
            if "deletionTimestamp" in current["metadata"]:
                new["metadata"]["deletionTimestamp"] = current["metadata"]["deletionTimestamp"]
            new["apiVersion"], new["kind"] = current["apiVersion"], current["kind"]
            if status is not None and resource == "jobs":
                new["status"] = status  # the main resource never writes status
            elif resource in self.definitions and self.definitions[resource].has_status:
                new.pop("status", None)  # (a Job's first status may come by either: the
                if status is not None:  # tests' kubelet writes it so)
                    new["status"] = status
        if not status_only:
            builtin.check(resource, new, current)
        definition = self.definitions.get(resource)
        if definition is not None:
            new = definition.admit(new)
        new["metadata"]["generation"] = current["metadata"].get("generation", 1) + (
            0 if status_only or new.get("spec") == current.get("spec") else 1
        )
        self.objects[(resource, ns, name)] = new
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            self._remove(resource, ns, name, "Background")
            return copy.deepcopy(new)
        self._record("MODIFIED", resource, ns, new)
        return copy.deepcopy(new)

    def patch(
        self, resource: str, ns: str, name: str, patch, content_type: str, status_only: bool = False
    ) -> dict:
        with self.cond:
            current = self.objects.get((resource, ns, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
            merged = apply_patch(current, patch, content_type, resource in self.definitions)
            wanted_rv = ((patch if isinstance(patch, dict) else {}).get("metadata") or {}).get(
                "resourceVersion"
            )
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'{resource} "{name}" has been modified')
            return self._write(resource, ns, name, current, merged, status_only)

    def get_scale(self, resource: str, ns: str, name: str) -> dict:
        definition = self._scalable(resource)
        return definition.scale_of(self.get(resource, ns, name))

    def set_scale(
        self, resource: str, ns: str, name: str, body, content_type: str, patching: bool
    ) -> dict:
        """PUT or PATCH of /scale: the Scale (or a patch of it) sets the replicas path."""
        definition = self._scalable(resource)
        with self.cond:
            current = self.objects.get((resource, ns, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
            scale = definition.scale_of(current)
            # a custom resource's scale: no strategic merge either
            scale = apply_patch(scale, body, content_type, custom=True) if patching else body
            wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")
            if not patching and wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'{resource} "{name}" has been modified')
            new = definition.with_replicas(current, scale)
            written = self._write(resource, ns, name, current, new, False)
            return definition.scale_of(written)

    def _scalable(self, resource: str) -> Definition:
        definition = self.definitions.get(resource)
        if definition is None or not definition.scale:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return definition

    def delete(self, resource: str, ns: str, name: str, options: dict) -> dict:
        with self.cond:
            current = self.objects.get((resource, ns, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
            pre = options.get("preconditions") or {}
            meta = current["metadata"]
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"precondition failed: UID in precondition: "
                    f"{pre['uid']}, UID in object meta: {meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise ApiError(409, "Conflict", "precondition failed: resourceVersion")
            policy = options.get("propagationPolicy") or "Background"
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = now_rfc3339()
                    meta["deletionGracePeriodSeconds"] = 0
                    self._record("MODIFIED", resource, ns, current)
                return copy.deepcopy(current)
            return self._remove(resource, ns, name, policy)

    def _remove(self, resource: str, ns: str, name: str, policy: str) -> dict:
        obj = self.objects.pop((resource, ns, name))
        self._record("DELETED", resource, ns, obj)
        uid = obj["metadata"]["uid"]
        live = {o["metadata"]["uid"] for (_, n, _), o in self.objects.items() if n == ns}
        for (r, n, other_name), other in list(self.objects.items()):
            refs = other["metadata"].get("ownerReferences") or []
            if n != ns or not any(ref.get("uid") == uid for ref in refs):
                continue
            if policy != "Orphan" and any(ref.get("uid") in live for ref in refs):
                # the garbage collector deletes a dependent only once no owner of it is left
                # (https://kubernetes.io/docs/concepts/architecture/garbage-collection/)
                other["metadata"]["ownerReferences"] = [x for x in refs if x.get("uid") != uid]
                self._record("MODIFIED", r, n, other)
                continue
            if policy == "Orphan":
                other["metadata"]["ownerReferences"] = [x for x in refs if x.get("uid") != uid]
                self._record("MODIFIED", r, n, other)
            elif other["metadata"].get("finalizers"):
                other["metadata"].setdefault("deletionTimestamp", now_rfc3339())
                self._record("MODIFIED", r, n, other)
            else:
                self._remove(r, n, other_name, policy)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Success",
            "details": {"name": name, "kind": resource, "uid": uid},
        }


def _place(obj: dict) -> str:
    """Where an object sits in a list's order (namespace, then name), for `continue`."""
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
