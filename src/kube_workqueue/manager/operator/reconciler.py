"""`workqueue operator`: one process that runs every WorkQueue of the namespaces it watches.

The shape (why it is this one: docs/architecture.md, "One operator, many queues"):

    WorkQueue list+watch ──► dedup workqueue of "ns/name" keys ──► reconcile(key) workers
      (one cache per watched                (client-go semantics: a key     │
       namespace, or one across all)         is never reconciled twice at   ├─ its ambassador
                                             once; a failure is retried     │  Deployment+Service
                                             with a per-key back-off)       └─ its QueueRun: the
                                                                               queue's manager, in
                                                                               this process

Reconciling one WorkQueue:
  * no `spec.source`: not the operator's (a chart's per-queue manager made it): left alone;
  * being deleted: its manager stops, its Jobs lose the record finalizer (the garbage
    collector then deletes them; their pods get their grace period), its record keeps or
    loses its owner by `spec.deletionPolicy` (Retain: the record stays, so a WorkQueue made
    again under the name runs nothing that already ran), and the operator's finalizer goes;
  * otherwise: the operator's finalizer on it; its spec planned (`queue_spec.plan`), its
    Secrets checked, its ambassador made (`ambassador_objects`); a spec it cannot run is
    `Ready=False` with the reason and an Event, and whatever ran for it stops; a runnable
    one gets its `QueueRun`, restarted when the spec's steady part changes (parallelism,
    paused, limits and rates reach the running manager through its own watch, at once).

Leadership is the operator's, once for all its queues (as kube-controller-manager holds one
Lease for all its controllers): with `lease` given, nothing is reconciled and no queue runs
until this operator holds that Lease, and losing it stops every queue at once (the process
then exits, so its supervisor restarts it as a candidate). A Lease per queue cost each queue
a renewal every 2 s - half the operator's CPU at rest with 10 queues (bench/operator.py).

Invariant: `runs[key]` is the only QueueRun of that WorkQueue in this process, and its
`fingerprint` is the plan it was started with.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from dataclasses import dataclass

from ..backends.kubernetes.client.api import KubeApi, KubeError
from ..backends.kubernetes.client.cache import ClusterCache
from ..backends.kubernetes.manifests import objects as ko
from ..backends.kubernetes.records.record import ROLE_LABEL
from ..workqueue.rate_limiters import ItemExponentialFailureRateLimiter
from ..workqueue.rate_limiting import RateLimitingQueue
from . import ambassador_objects, conditions
from .queue_runner import QueueRun
from .queue_spec import Plan, Settings, SpecProblem, plan

log = logging.getLogger(__name__)

FINALIZER = "workqueue.dev/operator"
RESYNC_SECONDS = 300.0
STOP_SECONDS = 60.0  # how long stopping waits for every queue's manager together
FENCE_SECONDS = 10.0  # a write in flight when a run that did not stop is fenced


def key_of(obj: dict) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


RETRIED = ("SecretNotFound", "Conflict")  # problems that may pass without a change of spec


@dataclass
class Running:
    run: QueueRun
    fingerprint: str
    generation: int = 0
    checked_at: float = 0.0  # monotonic: when its spec, Secrets and ambassador were last checked


class Operator:
    def __init__(self, namespaces: list[str] | None, settings: Settings, configuration,
                 workers: int = 4, lease: tuple[str, str] | None = None) -> None:  # fmt: skip
        """`namespaces`: the ones watched, or None for every namespace. `lease`: (namespace,
        name) of the Lease this operator must hold to run anything."""
        self.namespaces = namespaces
        self.settings = settings
        self.configuration = configuration
        self.workers = workers
        self.queue = RateLimitingQueue(
            "operator", rate_limiter=ItemExponentialFailureRateLimiter(0.5, 300.0)
        )
        self.runs: dict[str, Running] = {}
        self.events = conditions.EventPoster()
        self._apis: dict[str | None, KubeApi] = {}
        self._apis_lock = threading.Lock()
        self._caches: list[ClusterCache] = []
        self._threads: list[threading.Thread] = []
        self.lease = lease
        self.elector = None
        self.lost = threading.Event()  # set when leadership, once held, was lost

    # -- life ------------------------------------------------------------------------------

    def api(self, namespace: str | None) -> KubeApi:
        with self._apis_lock:
            api = self._apis.get(namespace)
            if api is None:
                api = self._apis[namespace] = KubeApi(
                    namespace, self.configuration, qps=self.settings.kube_api_qps
                )
            return api

    def lead(self, stopping: threading.Event) -> bool:
        """Hold the operator's Lease (when one is asked for) before anything runs; False when
        `stopping` came first."""
        if self.lease is None:
            return True
        import os
        import socket

        from ..backends.kubernetes.steering.leader import LeaderElector

        namespace, name = self.lease
        self.elector = LeaderElector(
            self.api(namespace), name, f"{socket.gethostname()}-{os.getpid()}"
        )
        self.elector.on_lost(self.lost.set)
        self.elector.start()
        log.info("operator: standing by for the Lease %s/%s", namespace, name)
        return self.elector.wait_leading(stopping.is_set)

    def start(self, timeout: float = 60.0) -> Operator:
        for namespace in self.namespaces or [None]:
            cache = ClusterCache(
                self.api(namespace), "", kind=conditions.KIND, keep=("spec", "status"),
                key=key_of, on_change=lambda _kind, obj: self.queue.add(key_of(obj)),
                resync_period=RESYNC_SECONDS,
            )  # fmt: skip
            where = namespace or "any namespace"
            self._caches.append(cache.start_listed(timeout, f"cannot list WorkQueues in {where}"))
        for i in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"reconcile-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop watching and every queue's manager (running Jobs run on)."""
        for cache in self._caches:
            cache.stop()
        self.queue.shut_down()
        for thread in self._threads:
            thread.join(30)
        runs = [running.run for running in self.runs.values()]
        for run in runs:  # all at once: a stop waits on its API calls, which may be failing
            run.ask_to_stop()
        deadline = time.monotonic() + STOP_SECONDS
        for run in runs:
            run.join(max(0.0, deadline - time.monotonic()))
        for run in runs:  # before the Lease goes to another operator: nothing writes twice
            if run.alive:
                run.fence(FENCE_SECONDS)
        self.runs.clear()
        if self.elector is not None:
            self.elector.stop()
        for api in self._apis.values():
            api.close()

    def healthy(self) -> bool:
        """Alive as a liveness probe means it: not started yet (standing by), or every
        reconciler and watch thread still running."""
        if not self._threads:
            return True
        caches = all(cache.alive for cache in self._caches)
        return caches and all(thread.is_alive() for thread in self._threads)

    def _work(self) -> None:
        while True:
            key, shutdown = self.queue.get()
            if shutdown:
                return
            try:
                if self.reconcile(key):
                    self.queue.forget(key)
                else:
                    self.queue.add_rate_limited(key)
            except KubeError as exc:
                log.warning("workqueue %s: %s; trying again", key, exc)
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("workqueue %s: reconcile failed; trying again", key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    def _cached(self, key: str) -> dict | None:
        for cache in self._caches:
            obj = cache.get(key)
            if obj is not None:
                return obj
        return None

    # -- one WorkQueue -----------------------------------------------------------------------

    def reconcile(self, key: str) -> bool:
        """Make the WorkQueue `key` run as its spec says; False when it should be tried again
        later (a Secret not there yet)."""
        namespace, name = key.split("/", 1)
        obj = self._cached(key)
        if obj is None:  # gone (without our finalizer: made before the operator watched it)
            self._stop_run(key)
            return True
        obj["metadata"].setdefault("namespace", namespace)
        spec = obj.get("spec") or {}
        if not spec.get("source"):
            return True  # a chart's per-queue WorkQueue: its own manager runs it
        api = self.api(namespace)
        finalizers = obj["metadata"].get("finalizers") or []
        if obj["metadata"].get("deletionTimestamp"):
            if FINALIZER in finalizers:
                self.finalize(api, obj)
            return True
        if FINALIZER not in finalizers:
            api.patch(conditions.KIND, name, {"metadata": {"finalizers": [*finalizers, FINALIZER]}})
        running = self.runs.get(key)
        generation = obj["metadata"].get("generation", 0)
        if (
            running is not None
            and running.generation == generation
            and time.monotonic() - running.checked_at < RESYNC_SECONDS
        ):
            return True  # a status write (the manager's), not a new spec: nothing to do
        try:
            queue_plan = plan(obj, self.settings)
            ledger_url = self._check_secrets(api, queue_plan)
            if queue_plan.ambassador is not None:
                ambassador_objects.ensure(api, _with_kind(obj), queue_plan.ambassador,
                                          self.settings)  # fmt: skip
        except SpecProblem as problem:
            self._stop_run(key)
            conditions.write(api, obj, (False, problem.reason, problem.message))
            self.events.post(api, obj, "Warning", problem.reason, problem.message)
            return problem.reason not in RETRIED
        self._ensure_run(key, obj, queue_plan, ledger_url)
        self.runs[key].generation = generation
        self.runs[key].checked_at = time.monotonic()
        return True

    def _check_secrets(self, api: KubeApi, queue_plan: Plan) -> str | None:
        """Every Secret the queue names exists; the shared ledger's URL (from its Secret)."""
        ledger_url = None
        for secret_name in queue_plan.secrets:
            secret = api.find("secrets", secret_name)
            if secret is None:
                raise SpecProblem("SecretNotFound", f"secret {secret_name} not found in "
                                  f"{queue_plan.namespace}")  # fmt: skip
            if queue_plan.ledger_secret and secret_name == queue_plan.ledger_secret[0]:
                field = queue_plan.ledger_secret[1]
                raw = (secret.get("data") or {}).get(field)
                if raw is None:
                    raise SpecProblem("SecretNotFound",
                                      f"secret {secret_name} has no key {field}")  # fmt: skip
                ledger_url = base64.b64decode(raw).decode().strip()
        return ledger_url

    def _ensure_run(self, key: str, obj: dict, queue_plan: Plan, ledger_url: str | None) -> None:
        running = self.runs.get(key)
        if running is not None and running.fingerprint == queue_plan.fingerprint:
            return
        api = self.api(queue_plan.namespace)
        if running is not None:
            log.info("workqueue %s: its spec changed; restarting its manager", key)
            running.run.stop()
            self.events.post(api, obj, "Normal", "SpecChanged",
                             "the queue's manager restarts with the new spec")  # fmt: skip

        def on_state(state: str, reason: str, message: str) -> None:
            self._on_state(key, state, reason, message)

        run = QueueRun(queue_plan, on_state, ledger_url)
        self.runs[key] = Running(run, queue_plan.fingerprint)
        run.start()

    def _on_state(self, key: str, state: str, reason: str, message: str) -> None:
        """What a queue's run says of itself, on its WorkQueue (while no manager writes)."""
        obj = self._cached(key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        obj["metadata"].setdefault("namespace", key.split("/", 1)[0])
        api = self.api(obj["metadata"]["namespace"])
        if state == "Running":
            self.events.post(api, obj, "Normal", "Running", message)
            return  # the manager writes the status from now on
        degraded = (state == "Failed", reason if state == "Failed" else "AsExpected",
                    message if state == "Failed" else "")  # fmt: skip
        try:
            conditions.write(api, obj, (False, reason, message), degraded)
        except KubeError as exc:
            log.warning("workqueue %s: cannot write its status: %s", key, exc)
        if state == "Failed":
            self.events.post(api, obj, "Warning", reason, message)

    def _stop_run(self, key: str) -> None:
        running = self.runs.pop(key, None)
        if running is not None:
            running.run.stop()

    def finalize(self, api: KubeApi, obj: dict) -> None:
        """A WorkQueue being deleted: see the module docstring."""
        key, name = key_of(obj), obj["metadata"]["name"]
        self._stop_run(key)
        jobs, _ = api.list("jobs", ko.queue_selector(name))
        for job in jobs:
            if ko.RECORD_FINALIZER in (job["metadata"].get("finalizers") or []):
                api.remove_finalizer("jobs", job["metadata"]["name"], ko.RECORD_FINALIZER)
        if (obj.get("spec") or {}).get("deletionPolicy", "Retain") == "Retain":
            kept, _ = api.list("configmaps", f"{ko.QUEUE_LABEL}={name},{ROLE_LABEL}")
            for record in kept:
                if record["metadata"].get("ownerReferences"):
                    api.patch("configmaps", record["metadata"]["name"],
                              [{"op": "remove", "path": "/metadata/ownerReferences"}])  # fmt: skip
        api.remove_finalizer(conditions.KIND, name, FINALIZER)
        self.events.forget(key)
        log.info("workqueue %s: deleted (record %s)", key,
                 (obj.get("spec") or {}).get("deletionPolicy", "Retain"))  # fmt: skip


def _with_kind(obj: dict) -> dict:
    """A cached (slim) WorkQueue with the apiVersion and kind an ownerReference names."""
    return {**obj, "apiVersion": conditions.API_VERSION, "kind": "WorkQueue"}
