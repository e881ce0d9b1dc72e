"""The stand-in's HTTP face: routing a request to the store, Status errors, faults; its watch
streams are `watches.py`'s."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .discovery import BUILT_IN_GROUPS, root_discovery
from .errors import ApiError, status_body
from .faults import Faults
from .store import CLUSTER_SCOPED, Store
from .watches import ServesWatches

_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>v[0-9a-z]+))(?:/namespaces/(?P<ns>[^/]+))?/"
    r"(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>status|scale))?)?$"
)
# the API server's proxy to a Service (what `kubectl proxy` users reach a Service by)
_PROXY = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/services/(?:https?:)?(?P<name>[^/:]+)(?::[^/]*)?/proxy"
    r"(?P<rest>/.*)?$"
)
_DISCOVERY = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/?$")


def _json_or_none(raw: bytes) -> dict | None:
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


class ApiServer(ServesWatches):
    def __init__(self, history: int = 10_000, version: tuple[int, int] = (1, 31)) -> None:
        self.store = Store(history)
        self.version = version  # (major, minor) at /version, as the real server reports it
        self.faults = Faults()
        self.requests: list[tuple[str, str, str, str]] = []
        self.agents: list[str] = []  # the User-Agent of each of `requests`
        # (verb, resource, HTTP code, monotonic time) of every answer
        self.answers: list[tuple[str, str, int, float]] = []
        self._requests_lock = threading.Lock()
        self.closing = threading.Event()
        # (namespace, Service name) -> the base URL its proxy forwards to: a test's stand-in
        # for the Service's endpoints (`tests.support.deployments` registers them)
        self.endpoints: dict[tuple[str, str], str] = {}
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

    def verbs_seen(self, but_agent: str | None = None) -> set[tuple[str, str, str]]:
        """(verb, group/resource, subresource) of every request so far (but those whose
        User-Agent starts with `but_agent`: a test's own kubectl)."""
        with self._requests_lock:
            return {
                (v, f"{g}/{r}" if g else r, s)
                for (v, g, r, s), agent in zip(self.requests, self.agents, strict=True)
                if but_agent is None or not agent.startswith(but_agent)
            }

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        m = _PATH.match(url.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        if len(raw) < length:  # the client died mid-body: the real server acts on no part of it
            h.close_connection = True
            return None
        if method == "GET" and url.path.rstrip("/") == "/version":  # what kubectl version reads
            major, minor = self.version
            # every field the real one gives (the client refuses a VersionInfo without one)
            return self._send(h, 200, {
                "major": str(major), "minor": str(minor), "gitVersion": f"v{major}.{minor}.0",
                "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.22.0", "compiler": "gc", "platform": "linux/amd64",
            })  # fmt: skip
        if method == "GET" and url.path.rstrip("/") in ("/api", "/apis", "/api/v1"):
            return self._send(h, 200, root_discovery(self.store, url.path.rstrip("/")))
        proxied = _PROXY.match(url.path)
        if proxied:
            return self._proxy(h, method, proxied, url.query, raw)
        found = _DISCOVERY.match(url.path)
        if found and method == "GET":
            return self._discovery(h, found.group("group"), found.group("version"))
        if not m or (m.group("group") or "", m.group("resource")) not in self.store.resources:
            return self._send(
                h,
                404,
                status_body(404, "NotFound", "the server could not find the requested resource"),
            )
        group, ns = m.group("group") or "", m.group("ns")
        resource, name, sub = m.group("resource"), m.group("name"), m.group("sub") or ""
        definition = self.store.definitions.get(resource)
        if definition is not None and m.group("version") not in definition.served:
            return self._send(
                h,
                404,
                status_body(404, "NotFound", "the server could not find the requested resource"),
            )
        h.answer_version = (
            f"{group}/{m.group('version')}" if definition is not None else None
        )  # objects are answered at the version asked for (conversion strategy None)
        watch = query.get("watch") in ("true", "1")
        if (resource in CLUSTER_SCOPED and ns is not None) or (
            resource not in CLUSTER_SCOPED and ns is None and (name or method != "GET")
        ):  # a cluster-scoped kind has no namespace; only lists and watches span namespaces
            return self._send(
                h,
                404,
                status_body(404, "NotFound", "the server could not find the requested resource"),
            )
        verb = {
            "GET": "watch" if watch else ("get" if name else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }[method]
        with self._requests_lock:
            self.requests.append((verb, group, resource, sub))
            self.agents.append(h.headers.get("User-Agent", ""))
        h.workqueue_call = (verb, resource)
        fault = self.faults.take(verb, resource, _json_or_none(raw))
        if fault is not None and fault["kind"] in ("429", "500"):
            code = int(fault["kind"])
            headers = {"Retry-After": str(fault["retry_after"])} if code == 429 else {}
            reason = "TooManyRequests" if code == 429 else "InternalError"
            return self._send(h, code, status_body(code, reason, "injected fault"), headers)
        if fault is not None and fault["kind"] == "foreign":
            code = fault["code"]
            if fault["reason"] is None:  # a proxy's own page
                return self._send(h, code, None, raw=f"{code} page not found\n".encode())
            return self._send(h, code, status_body(code, fault["reason"], "from elsewhere"))
        if fault is not None and fault["kind"] == "delay":
            time.sleep(fault["delay"])
        if fault is not None and fault["kind"] == "hang":  # never acted on, never answered
            self.closing.wait(fault["delay"])
            h.close_connection = True
            return None
        try:
            body = json.loads(raw) if raw else {}
            store = self.store
            if verb == "watch":
                return self._watch(h, resource, ns, query, fault)
            if sub == "scale":
                if verb == "get":
                    return self._send(h, 200, store.get_scale(resource, ns, name))
                if verb in ("update", "patch"):
                    content_type = h.headers.get("Content-Type", "")
                    answer = store.set_scale(
                        resource, ns, name, body, content_type, patching=verb == "patch"
                    )
                    return self._send(h, 200, answer)
                raise ApiError(405, "MethodNotAllowed", f"{verb} is not allowed on scale")
            if verb == "list":
                if "as=Table" in h.headers.get("Accept", "") and resource in store.definitions:
                    items, _ = store.list(resource, ns, query.get("labelSelector"))
                    return self._send(h, 200, store.definitions[resource].table(items))
                limit = int(query["limit"]) if query.get("limit", "").isdigit() else None
                data = store.list_json(group, resource, ns, query.get("labelSelector"),
                                       limit, query.get("continue"))  # fmt: skip
                if h.answer_version is not None:
                    data = json.dumps(self._at_version(h, json.loads(data))).encode()
                return self._send(h, 200, None, raw=data)
            elif verb == "get":
                result = store.get(resource, ns, name)
            elif verb == "create":
                result = store.create(group, resource, ns, body)
                return self._send(h, 201, self._at_version(h, result))
            elif verb == "update":
                named = (body.get("metadata") or {}).get("name") or ""
                if named != name:  # the real server's checkName: never a nameless write
                    raise ApiError(400, "BadRequest", f"the name of the object ({named}) does "
                                   f"not match the name on the URL ({name})")  # fmt: skip
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
            self._send(h, 200, self._at_version(h, result))
        except ApiError as exc:
            self._send(h, exc.code, status_body(exc.code, exc.reason, exc.message), exc.headers)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            self._send(h, 400, status_body(400, "BadRequest", f"bad request: {exc}"))

    @staticmethod
    def _at_version(h, obj: dict) -> dict:
        """A custom object (or list, or watch event's object) at the version the request
        named: conversion strategy None changes nothing but apiVersion."""
        version = getattr(h, "answer_version", None)
        if version is None or not isinstance(obj, dict):
            return obj
        if obj.get("kind", "").endswith("List"):
            for item in obj.get("items") or []:
                item["apiVersion"] = version
        obj["apiVersion"] = version
        return obj

    def _proxy(self, h, method: str, m, query: str, raw: bytes) -> None:
        """GET .../services/NAME[:PORT]/proxy/PATH: forwarded to the Service's endpoint (as
        the real server proxies to a Service's pods); 503 while it has none."""
        import requests

        target = self.endpoints.get((m.group("ns"), m.group("name")))
        if target is None or method != "GET":
            return self._send(h, 503, status_body(
                503, "ServiceUnavailable", f'no endpoints available for service "{m.group("name")}"'
            ))  # fmt: skip
        url = target + (m.group("rest") or "/") + (f"?{query}" if query else "")
        try:
            answer = requests.get(url, timeout=30)
        except requests.RequestException as exc:
            return self._send(
                h,
                503,
                status_body(503, "ServiceUnavailable", f"error trying to reach service: {exc}"),
            )
        h.send_response(answer.status_code)
        h.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
        h.send_header("Content-Length", str(len(answer.content)))
        h.end_headers()
        h.wfile.write(answer.content)

    def _discovery(self, h, group: str, version: str) -> None:
        if (group, version) in BUILT_IN_GROUPS:
            return self._send(h, 200, BUILT_IN_GROUPS[(group, version)])
        """GET /apis/GROUP/VERSION: the resources of an installed CRD, else 404 (so a client
        can tell whether the CRD is installed, as it does with a real cluster)."""
        for definition in list(self.store.definitions.values()):
            if definition.group == group and version in definition.served:
                return self._send(h, 200, definition.discovery(version))
        return self._send(
            h, 404, status_body(404, "NotFound", "the server could not find the requested resource")
        )

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
