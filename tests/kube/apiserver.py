"""A Kubernetes API-server stand-in for tests: real HTTP on loopback, reached through the
official `kubernetes` client, behaving as kube-apiserver does where the manager relies on it.

What it implements (namespaced resources only):
  batch/v1 jobs (+ /status), v1 configmaps, v1 events, coordination.k8s.io/v1 leases
  create (generateName; 409 AlreadyExists), get, list (equality- and set-based label selectors),
  update (409 Conflict on a stale resourceVersion), patch (merge, strategic - treated as merge -
  and JSON patch), delete (preconditions; finalizers -> deletionTimestamp, removal once they are
  gone; ownerReferences garbage collection, background and orphan), watch from a
  resourceVersion (ADDED/MODIFIED/DELETED; an ERROR event with 410 Expired for a compacted one),
  uid, creationTimestamp, a monotonically increasing resourceVersion, Status error bodies.
Not implemented: other resources, list paging, field selectors, foreground deletion's blocking
(treated as background), admission of any kind, authentication.

Faults on demand (`faults.add`): 429 with Retry-After, 500, slow answers, watch streams cut
after N events. Every request is recorded as (verb, group, resource, subresource) in `requests`,
so the RBAC a client needs can be derived from what it actually did.
"""

from __future__ import annotations

import copy
import json
import random
import re
import string
import threading
import time
import uuid
from collections import deque
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

RESOURCES = {
    ("", "configmaps"): ("v1", "ConfigMap"),
    ("", "events"): ("v1", "Event"),
    ("batch", "jobs"): ("batch/v1", "Job"),
    ("coordination.k8s.io", "leases"): ("coordination.k8s.io/v1", "Lease"),
}
_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/v1)/namespaces/(?P<ns>[^/]+)/"
    r"(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>status))?)?$"
)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.headers = headers or {}


# -- label selectors -----------------------------------------------------------------------


def _split_selector(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Equality- (a=b, a==b, a!=b) and set-based (a in (x,y), a notin (x), a, !a) selectors."""
    if not selector:
        return True
    for term in _split_selector(selector):
        m = re.match(r"^(\S+)\s+(in|notin)\s+\((.*)\)$", term)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            inside = key in labels and labels[key] in values
            if (op == "in") != inside:
                return False
            continue
        m = re.match(r"^([^=!]+)(==|=|!=)(.*)$", term)
        if m:
            key, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
            equal = labels.get(key) == value
            if (op == "!=") == equal:
                return False
            continue
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


# -- patches -------------------------------------------------------------------------------


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


# -- faults --------------------------------------------------------------------------------


class Faults:
    """Faults to inject, each matching a verb and a resource, used up `count` times."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[dict] = []

    def add(
        self,
        kind: str,
        *,
        verb: str = "*",
        resource: str = "*",
        count: int = 1,
        retry_after: int = 1,
        delay: float = 0.5,
        after_events: int = 1,
    ) -> None:
        with self._lock:
            self._faults.append(
                {
                    "kind": kind,
                    "verb": verb,
                    "resource": resource,
                    "count": count,
                    "retry_after": retry_after,
                    "delay": delay,
                    "after_events": after_events,
                }
            )

    def take(self, verb: str, resource: str) -> dict | None:
        with self._lock:
            for fault in self._faults:
                if fault["verb"] in ("*", verb) and fault["resource"] in ("*", resource):
                    fault["count"] -= 1
                    if fault["count"] <= 0:
                        self._faults.remove(fault)
                    return fault
        return None


# -- the store -----------------------------------------------------------------------------


class Store:
    """Objects by (resource, namespace, name), and the change log watches read.

    Invariant: every change bumps `rv` by one, stamps the object with it, and appends
    (rv, resource, namespace, type, object) to `log`; `log` keeps the newest `history` changes,
    and a watch from an older resourceVersion than it holds gets 410 Expired."""

    def __init__(self, history: int = 10_000) -> None:
        self.cond = threading.Condition()
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.rv = 100
        self.log: deque[tuple[int, str, str, str, dict]] = deque(maxlen=history)
        self.hooks: list = []  # called (type, resource, obj) after each change, outside no lock

    def _record(self, kind: str, resource: str, ns: str, obj: dict) -> None:
        self.rv += 1
        if kind != "DELETED":
            obj["metadata"]["resourceVersion"] = str(self.rv)
        snapshot = copy.deepcopy(obj)
        if kind == "DELETED":
            snapshot["metadata"]["resourceVersion"] = str(self.rv)
        self.log.append((self.rv, resource, ns, kind, snapshot))
        self.cond.notify_all()
        for hook in list(self.hooks):
            hook(kind, resource, copy.deepcopy(snapshot))

    def oldest_rv(self) -> int:
        return self.log[0][0] if self.log else self.rv

    def create(self, group: str, resource: str, ns: str, body: dict) -> dict:
        api_version, kind = RESOURCES[(group, resource)]
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
            self.objects[key] = obj
            self._record("ADDED", resource, ns, obj)
            return copy.deepcopy(obj)

    def get(self, resource: str, ns: str, name: str) -> dict:
        with self.cond:
            obj = self.objects.get((resource, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
            return copy.deepcopy(obj)

    def list(self, resource: str, ns: str, selector: str | None) -> tuple[list[dict], int]:
        with self.cond:
            items = [
                copy.deepcopy(o)
                for (r, n, _), o in sorted(self.objects.items())
                if r == resource
                and n == ns
                and selector_matches(selector, o["metadata"].get("labels") or {})
            ]
            return items, self.rv

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
            if "json-patch" in content_type:
                merged = json_patch(current, patch)
            else:
                merged = merge_patch(current, patch)
            wanted_rv = ((patch if isinstance(patch, dict) else {}).get("metadata") or {}).get(
                "resourceVersion"
            )
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'{resource} "{name}" has been modified')
            return self._write(resource, ns, name, current, merged, status_only)

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
        for (r, n, other_name), other in list(self.objects.items()):
            refs = other["metadata"].get("ownerReferences") or []
            if n != ns or not any(ref.get("uid") == uid for ref in refs):
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


# -- HTTP ----------------------------------------------------------------------------------


class ApiServer:
    def __init__(self, history: int = 10_000) -> None:
        self.store = Store(history)
        self.faults = Faults()
        self.requests: list[tuple[str, str, str, str]] = []
        # (verb, resource, HTTP code, monotonic time) of every answer
        self.answers: list[tuple[str, str, int, float]] = []
        self._requests_lock = threading.Lock()
        self.closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY, as Go's net/http sets it: headers and body go out as separate
            # writes, and Nagle plus delayed ACKs would add 40 ms to every answer.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.handle(self, "GET")

            def do_POST(self):
                server.handle(self, "POST")

            def do_PUT(self):
                server.handle(self, "PUT")

            def do_PATCH(self):
                server.handle(self, "PATCH")

            def do_DELETE(self):
                server.handle(self, "DELETE")

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client hanging up is normal
                import sys

                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.http = Server(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def start(self) -> ApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.closing.set()
        with self.store.cond:
            self.store.cond.notify_all()
        self.http.shutdown()
        self.http.server_close()

    def client_configuration(self):
        """A `kubernetes.client.Configuration` pointing at this server."""
        from kubernetes import client

        config = client.Configuration()
        config.host = self.url
        return config

    def write_kubeconfig(self, path) -> str:
        import yaml

        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "stand-in",
            "clusters": [{"name": "stand-in", "cluster": {"server": self.url}}],
            "users": [{"name": "stand-in", "user": {"token": "stand-in"}}],
            "contexts": [
                {"name": "stand-in", "context": {"cluster": "stand-in", "user": "stand-in"}}
            ],
        }
        with open(path, "w") as f:
            yaml.safe_dump(doc, f)
        return str(path)

    def verbs_seen(self) -> set[tuple[str, str, str]]:
        """(verb, group/resource, subresource) of every request so far."""
        with self._requests_lock:
            return {(v, f"{g}/{r}" if g else r, s) for v, g, r, s in self.requests}

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        m = _PATH.match(url.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        if not m or (m.group("group") or "", m.group("resource")) not in RESOURCES:
            return self._send(
                h,
                404,
                status_body(404, "NotFound", "the server could not find the requested resource"),
            )
        group, ns = m.group("group") or "", m.group("ns")
        resource, name, sub = m.group("resource"), m.group("name"), m.group("sub") or ""
        watch = query.get("watch") in ("true", "1")
        verb = {
            "GET": "watch" if watch else ("get" if name else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }[method]
        with self._requests_lock:
            self.requests.append((verb, group, resource, sub))
        h.workqueue_call = (verb, resource)
        fault = self.faults.take(verb, resource)
        if fault is not None and fault["kind"] in ("429", "500"):
            code = int(fault["kind"])
            headers = {"Retry-After": str(fault["retry_after"])} if code == 429 else {}
            reason = "TooManyRequests" if code == 429 else "InternalError"
            return self._send(h, code, status_body(code, reason, "injected fault"), headers)
        if fault is not None and fault["kind"] == "delay":
            time.sleep(fault["delay"])
        try:
            body = json.loads(raw) if raw else {}
            store = self.store
            if verb == "watch":
                return self._watch(h, resource, ns, query, fault)
            if verb == "list":  # serialised under the lock, without copying each object
                api_version, kind = RESOURCES[(group, resource)]
                selector = query.get("labelSelector")
                with store.cond:
                    items = [
                        o
                        for (r, n, _), o in store.objects.items()
                        if r == resource
                        and n == ns
                        and selector_matches(selector, o["metadata"].get("labels") or {})
                    ]
                    data = json.dumps(
                        {
                            "kind": kind + "List",
                            "apiVersion": api_version,
                            "metadata": {"resourceVersion": str(store.rv)},
                            "items": items,
                        }
                    ).encode()
                return self._send(h, 200, None, raw=data)
            elif verb == "get":
                result = store.get(resource, ns, name)
            elif verb == "create":
                result = store.create(group, resource, ns, body)
                return self._send(h, 201, result)
            elif verb == "update":
                result = store.replace(resource, ns, name, body, status_only=bool(sub))
            elif verb == "patch":
                result = store.patch(
                    resource,
                    ns,
                    name,
                    body,
                    h.headers.get("Content-Type", ""),
                    status_only=bool(sub),
                )
            else:
                result = store.delete(resource, ns, name, body)
            self._send(h, 200, result)
        except ApiError as exc:
            self._send(h, exc.code, status_body(exc.code, exc.reason, exc.message), exc.headers)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            self._send(h, 400, status_body(400, "BadRequest", f"bad request: {exc}"))

    def _send(
        self, h, code: int, body: dict | None, headers: dict | None = None, raw: bytes | None = None
    ) -> None:
        call = getattr(h, "workqueue_call", None)
        if call is not None:
            with self._requests_lock:
                self.answers.append((*call, code, time.monotonic()))
        data = raw if raw is not None else json.dumps(body).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _watch(self, h, resource: str, ns: str, query: dict, fault: dict | None) -> None:
        store = self.store
        selector = query.get("labelSelector")
        timeout = float(query.get("timeoutSeconds") or 3600)
        deadline = time.monotonic() + timeout
        cut_after = fault["after_events"] if fault and fault["kind"] == "cut" else None
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        sent = 0

        def emit(event: dict) -> None:
            data = (json.dumps(event) + "\n").encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        try:
            with store.cond:
                start = query.get("resourceVersion") or ""
                backlog: list = []
                if start in ("", "0"):
                    items, last = store.list(resource, ns, selector)
                    backlog = [{"type": "ADDED", "object": o} for o in items]
                else:
                    last = int(start)
                    if last < store.oldest_rv() - 1:
                        backlog = [
                            {
                                "type": "ERROR",
                                "object": status_body(
                                    410,
                                    "Expired",
                                    f"too old resource version: {last} ({store.oldest_rv() - 1})",
                                ),
                            }
                        ]
                        last = None
            for event in backlog:
                if cut_after is not None and sent >= cut_after:
                    break
                emit(event)
                sent += 1
            while last is not None and not self.closing.is_set():
                if cut_after is not None and sent >= cut_after:
                    break  # the stream is cut, without a final chunk
                with store.cond:
                    fresh = []
                    for rv, r, n, t, o in reversed(store.log):  # newest first, stop at last
                        if rv <= last:
                            break
                        if r == resource and n == ns:
                            fresh.append((rv, t, o))
                    fresh.reverse()
                    if not fresh:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        store.cond.wait(min(remaining, 1.0))
                        continue
                for rv, kind, obj in fresh:
                    last = rv
                    if selector_matches(selector, obj["metadata"].get("labels") or {}):
                        emit({"type": kind, "object": obj})
                        sent += 1
                        if cut_after is not None and sent >= cut_after:
                            break
            else:
                h.wfile.write(b"0\r\n\r\n")
                return
            if cut_after is None:
                h.wfile.write(b"0\r\n\r\n")
            else:
                h.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True
