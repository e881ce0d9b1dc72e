"""The one module that imports `kubernetes`: every API call of the Kubernetes backend goes
through `KubeApi` (kopf's habit - a thin layer, so the rest of the code is plain data).

  * Answers are raw JSON dicts, never the client's model objects, whose deserialisation is the
    Python client's known bottleneck; and requests are made by path through its `ApiClient`
    (configuration, auth, TLS, pool), never through its typed API classes: importing those
    (BatchV1Api, CoreV1Api, ...) cost every command 1.2 s of CPU before its first call.
  * A client-side token bucket (`--kube-api-qps`, `--kube-api-burst`; 20 and 30 like the
    controller-manager; qps <= 0 turns it off), since the Python client has none. It is the
    workqueue's own BucketRateLimiter, with reservation semantics.
  * Retries with exponential backoff on 429, 5xx, timeouts and broken connections, honouring
    Retry-After; other errors raise `KubeError` carrying the Status reason (AlreadyExists,
    Conflict, NotFound, ...), which callers act on.
  * Configuration as kubectl finds it: in a pod the in-cluster service account; elsewhere
    `--kubeconfig`, then $KUBECONFIG, then ~/.kube/config.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from ....retry import API_CALL, Backoff
from ....workqueue.rate_limiters import BucketRateLimiter
from . import routes
from .answers import KubeError, KubeUnavailable, classify, kube_error, retry_after, why

log = logging.getLogger(__name__)

RETRY_STATUSES = {429, 500, 502, 503, 504}


def load_configuration(kubeconfig: str | None = None) -> client.Configuration:
    configuration = client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    # KubeApi.call retries (with backoff, Retry-After, and one log line per outage); urllib3's
    # own retries would only add a warning per attempt underneath.
    configuration.retries = 0
    return configuration


def pool_size(parallelism: int) -> int:
    """Connections the client keeps open: one per unit of work that may call at once (a
    create, a delete, a status read) plus the watches and the manager's own calls. The
    client's default is five per CPU - 10 here, at parallelism 50 "Connection pool is full,
    discarding connection": against a real TLS API server, a handshake per call."""
    return max(16, parallelism + 16)


class KubeApi:
    def __init__(
        self,
        namespace: str,
        configuration: client.Configuration,
        *,
        qps: float = 20.0,
        burst: int = 30,
        retries: int = 5,
        backoff: Backoff = API_CALL,
        sleep: Callable[[float], None] = time.sleep,
        on_call: Callable[[str, str, float], None] | None = None,
        clock: Any = None,
    ) -> None:
        self.namespace = namespace
        self.api_client = client.ApiClient(configuration)
        self.limiter = BucketRateLimiter(qps, burst, clock=clock) if qps > 0 else None
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        self.on_call = on_call  # (verb, kind, seconds) for metrics
        # The ownerReference every object created for the queue carries (`parts.own`): its
        # WorkQueue's, or the manager's Deployment's - deleting the owner deletes them through
        # the garbage collector. An object that names its owner already keeps it (an item's
        # ConfigMap is its Job's); events are owned by nobody.
        self.owner: dict | None = None
        self.workqueues_served: bool | None = None  # asked once (`parts.queue_served`)
        # Invariant: set (to when it began) while calls keep failing, None once one is answered.
        self._outage_since: float | None = None
        self._outage_lock = threading.Lock()
        # Invariant (under `_writes_done`): `_writes` counts write calls in flight; once
        # `_fenced`, no write call begins.
        self._fenced = False
        self._writes = 0
        self._writes_done = threading.Condition()

    def fence(self, timeout: float) -> bool:
        """From now on every write (`routes.WRITES`) is refused - `KubeUnavailable` reason Fenced -
        and this returns once the writes in flight have ended (False if some still had not
        after `timeout`): a manager replaced by another run of its queue can change nothing
        more, whatever its threads are doing (`manager.operator.queue_runner`)."""
        with self._writes_done:
            self._fenced = True
            return self._writes_done.wait_for(lambda: self._writes == 0, timeout)

    def close(self) -> None:
        self.api_client.close()

    def _trouble(self, why: str) -> None:
        """One warning when an outage starts (not one per retry)."""
        with self._outage_lock:
            if self._outage_since is not None:
                return
            self._outage_since = time.monotonic()
        log.warning(
            "Kubernetes API %s is not answering (%s); retrying",
            self.api_client.configuration.host,
            why,
        )

    def _reached(self) -> None:
        if self._outage_since is None:
            return
        with self._outage_lock:
            since, self._outage_since = self._outage_since, None
        if since is not None:
            log.warning("Kubernetes API answering again after %.0fs", time.monotonic() - since)

    # -- plumbing --------------------------------------------------------------------------

    def _send(self, verb: str, kind: str, name: str | None, body: Any, timeout: Any,
              query: dict[str, Any]):  # fmt: skip
        """One request; the urllib3 response of a 2xx answer, else ApiException."""
        request = self.api_client.param_serialize(
            method=routes.method(verb), resource_path=routes.path(self.namespace, verb, kind, name),
            query_params=routes.query_params(query), header_params=routes.headers(verb, kind, body),
            body=body, auth_settings=["BearerToken"],
        )  # fmt: skip
        answer = self.api_client.call_api(*request, _request_timeout=timeout)
        if not 200 <= answer.status <= 299:
            answer.read()
            raise ApiException.from_response(http_resp=answer, body=None, data=None)
        return answer.response

    def _throttle(self) -> None:
        if self.limiter is not None:
            delay = self.limiter.when(None)
            if delay > 0:
                self.sleep(delay)

    def call(self, verb: str, kind: str, name: str | None = None, body: Any = None, *,
             stream: bool = False, timeout: Any = None, **query: Any):  # fmt: skip
        """One API call with throttling and retries: `verb` of `kind` (`name`d for a verb on
        one object), `query` its parameters by keyword (`label_selector`, `watch`, ...); a
        dict, or the raw response if `stream`."""
        if verb not in routes.WRITES:
            return self._call(verb, kind, name, body, stream, timeout, query)
        with self._writes_done:
            if self._fenced:
                raise KubeUnavailable(
                    503,
                    "Fenced",
                    f"{verb} {kind}: this manager was "
                    "replaced by another run of its queue; it writes nothing",
                )
            self._writes += 1
        try:
            return self._call(verb, kind, name, body, stream, timeout, query)
        finally:
            with self._writes_done:
                self._writes -= 1
                self._writes_done.notify_all()

    def _call(self, verb, kind, name, body, stream, timeout, query):
        last = "no answer"
        for attempt in range(self.retries + 1):
            self._throttle()
            started = time.monotonic()
            try:
                response = self._send(verb, kind, name, body, timeout, query)
                if self.on_call:
                    self.on_call(verb, kind, time.monotonic() - started)
                self._reached()
                return response if stream else json.loads(response.data or b"{}")
            except ApiException as exc:
                if self.on_call:
                    self.on_call(verb, kind, time.monotonic() - started)
                if exc.status not in RETRY_STATUSES:
                    self._reached()
                    raise kube_error(exc, verb) from None
                last = f"HTTP {exc.status}"
                delay = retry_after(exc) or self.backoff.delay(attempt)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                last = why(exc)
                delay = self.backoff.delay(attempt)
            self._trouble(last)
            if attempt < self.retries:
                self.sleep(delay)
        raise KubeUnavailable(
            503,
            "ServiceUnavailable",
            f"{verb} {kind} failed after {self.retries + 1} tries ({last})",
        )

    # -- verbs -----------------------------------------------------------------------------

    def _owned(self, kind: str, body: dict) -> dict:
        """`body` with this manager's owner (`owner`) unless it names one, or is an event."""
        meta = body.get("metadata") or {}
        if self.owner is None or kind == "events" or meta.get("ownerReferences"):
            return body
        return {**body, "metadata": {**meta, "ownerReferences": [dict(self.owner)]}}

    def create(self, kind: str, body: dict) -> dict:
        return self.call("create", kind, body=self._owned(kind, body))

    def get(self, kind: str, name: str) -> dict:
        return self.call("read", kind, name)

    def find(self, kind: str, name: str) -> dict | None:
        """The object as the API server has it now (never a cache), or None when it is gone."""
        try:
            return self.get(kind, name)
        except KubeError as exc:
            if exc.reason == "NotFound":
                return None
            raise

    def remove(self, kind: str, name: str, uid: str) -> bool:
        """Delete the object that has `uid` (a precondition: never a newer one of that name);
        False when it is gone already or was replaced meanwhile."""
        try:
            self.delete(kind, name, uid=uid)
            return True
        except KubeError as exc:
            if exc.reason not in ("NotFound", "Conflict"):
                raise
            return False

    def remove_finalizer(self, kind: str, name: str, finalizer: str) -> None:
        """`finalizer` off the object as it is now, guarded by its resourceVersion (a JSON
        patch's `test`): a write that raced it is read again and tried again, ten times at
        most. Nothing to do when the object or the finalizer is gone."""
        for _ in range(10):
            fresh = self.find(kind, name)
            finalizers = (fresh or {"metadata": {}})["metadata"].get("finalizers") or []
            if finalizer not in finalizers:
                return
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion",
                 "value": fresh["metadata"]["resourceVersion"]},
                {"op": "remove", "path": f"/metadata/finalizers/{finalizers.index(finalizer)}"},
            ]  # fmt: skip
            try:
                self.patch(kind, name, patch)
                return
            except KubeError as exc:
                if exc.status not in (409, 422):
                    raise
        raise KubeError(
            409, "Conflict", f"{name}: the finalizer {finalizer} kept changing under us"
        )

    def list(self, kind: str, label_selector: str | None = None) -> tuple[list[dict], str]:
        body = self.call("list", kind, label_selector=label_selector or None)
        return body.get("items") or [], body.get("metadata", {}).get("resourceVersion", "")

    def patch(self, kind: str, name: str, patch: dict | list) -> dict:
        """A dict is a merge patch; a list is a JSON patch (use it with a `test` op to guard
        on the resourceVersion)."""
        return self.call("patch", kind, name, patch)

    def replace(self, kind: str, name: str, body: dict) -> dict:
        """A whole object written back (metadata included: a body made afresh keeps the
        owner it would have been created with)."""
        return self.call("replace", kind, name, self._owned(kind, body))

    def patch_status(self, kind: str, name: str, patch: dict) -> dict:
        """A merge patch of the object's status subresource."""
        return self.call("patch_status", kind, name, patch)

    def patch_scale(self, kind: str, name: str, replicas: int) -> dict:
        """Set the object's replicas through its scale subresource (an autoscaling/v1 Scale),
        as `kubectl scale`, an HPA or KEDA does."""
        return self.call("patch_scale", kind, name, {"spec": {"replicas": replicas}})

    def server_version(self) -> tuple[int, int] | None:
        """The API server's (major, minor) version, from /version; None when it does not say
        (a server that hides it, a minor like "29+" is read as 29)."""
        try:
            request = self.api_client.param_serialize(
                method="GET", resource_path="/version/", header_params={"Accept":
                "application/json"}, auth_settings=["BearerToken"],
            )  # fmt: skip
            answer = self.api_client.call_api(*request, _request_timeout=(5, 30))
            answer.read()
            if not 200 <= answer.status <= 299:
                return None
            info = json.loads(answer.data or b"{}")
        except ApiException:
            return None
        except Exception as exc:  # unreachable: the first real call says so, with retries
            log.debug("cannot read the API server's version: %s", exc)
            return None
        digits = lambda text: int("".join(c for c in str(text) if c.isdigit()) or -1)  # noqa: E731
        major, minor = digits(info.get("major")), digits(info.get("minor"))
        return (major, minor) if major >= 0 and minor >= 0 else None

    def served(self, kind: str) -> bool:
        """True when the API server serves `kind` here (its CRD is installed): a list of it
        answers; 404 when it does not."""
        try:
            self.call("list", kind, limit=1)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def delete(
        self,
        kind: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str = "Background",
    ) -> dict:
        preconditions = {}
        if uid:
            preconditions["uid"] = uid
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        body = {"propagationPolicy": propagation}
        if preconditions:
            body["preconditions"] = preconditions
        return self.call("delete", kind, name, body)

    def watch(
        self,
        kind: str,
        label_selector: str,
        resource_version: str,
        timeout_seconds: int = 300,
        on_open: Callable[[Any], None] | None = None,
    ) -> Iterator[dict]:
        """Events {"type", "object"} from `resource_version` on. Raises KubeError(410) when
        the version is too old (the caller re-lists) and ends when the stream ends or breaks.
        `on_open(response)` gets the open stream, whose `shutdown()` interrupts the read."""
        response = self.call(
            "list",
            kind,
            label_selector=label_selector,
            watch=True,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=False,
            # a read timeout past the server's own end of the stream: a stream that goes
            # silent without ending (seen with the ambassador's watch under load) is dropped
            # and resumed instead of holding the cache still
            timeout=(5, timeout_seconds + 10),
            stream=True,
        )
        if on_open is not None:
            on_open(response)
        buffer = b""
        try:
            for chunk in response.stream(65536):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        code = int(status.get("code") or 500)
                        raise KubeError(
                            code,
                            classify(code, status.get("reason")),
                            status.get("message") or "watch error",
                        )
                    yield event
        except (urllib3.exceptions.HTTPError, OSError):
            return  # a broken stream ends the watch; the caller resumes from its last version
        finally:
            response.release_conn()
