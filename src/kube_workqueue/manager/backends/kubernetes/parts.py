"""Setting up the Kubernetes backend for one queue, from typed options: the API door, the
durable record, the Job cache, the backend, the ledger view and (with `--leader-elect`) the
Lease - and the stuck-pod detector and the pause control beside them. Also the commands that act
on a queue without running a manager: `status` (the record, the Jobs and their pods), `retry`
(items out of the record, their Jobs deleted), `pause` and `resume` (the control ConfigMap).

Every failure a person can fix - no kubeconfig, an unreachable API, a missing `--image` - is a
`UserError` raised before anything is dispatched.
"""

from __future__ import annotations

import logging
import os
import socket

from ...errors import UserError
from ...setup_parts import Parts
from . import node_offers
from .client.api import KubeApi, KubeError, load_configuration, pool_size
from .client.cache import ClusterCache
from .dispatch.backend import KubernetesBackend
from .manifests import objects as ko
from .options import KubeOptions, KubeQueue
from .records.batch_record import BatchRecords
from .records.ledger import ClusterLedger
from .records.record import ManagerFacts, RecordStore
from .steering import control

log = logging.getLogger(__name__)
SYNC_TIMEOUT_SECONDS = 60


def configuration(kubeconfig: str | None):
    for path in [kubeconfig] if kubeconfig else os.environ.get("KUBECONFIG", "").split(":"):
        if path:
            check_kubeconfig(path)
    try:
        return load_configuration(kubeconfig)
    except Exception as exc:  # the client raises several kinds for a missing config
        raise UserError(f"no Kubernetes configuration: {one_line_of(exc)}") from None


def reference(obj: dict) -> dict:
    """An ownerReference to `obj` (not a controller: Kueue, for one, leaves alone a Job that a
    controller of another kind owns)."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}  # fmt: skip


def own(api: KubeApi, queue: str, deployment: str | None, parallelism: int) -> None:
    """Who owns what this manager creates (`KubeApi.owner`), so that deleting the queue - or
    `helm uninstall` - cleans up through Kubernetes' own garbage collector: the queue's
    WorkQueue where its CRD is installed (itself owned by the manager's Deployment, when
    `--owner-deployment` names it), else that Deployment, else nobody."""
    from .steering.queue_resource import ensure

    owner = None
    if deployment:
        try:
            owner = reference(api.get("deployments", deployment))
        except KubeError as exc:
            raise UserError(f"--owner-deployment {deployment}: {exc.reason}: {exc}") from None
    if queue_served(api):
        owner = reference(ensure(api, queue, parallelism, owner=owner))
    api.owner = owner


def queue_served(api: KubeApi) -> bool:
    """Whether the WorkQueue CRD is installed and may be read here (asked once: a Role
    without workqueue rules is one warning)."""
    from .steering.queue_resource import KIND

    if api.workqueues_served is None:
        try:
            api.workqueues_served = api.served(KIND)
        except KubeError as exc:
            if exc.status != 403:
                raise
            log.warning(
                "may not read workqueues (%s): pause and scale through the control ConfigMap; "
                "grant the chart's Role to follow the WorkQueue",
                exc.reason,
            )
            api.workqueues_served = False
    return api.workqueues_served


OLDEST = (1, 29)  # podReplacementPolicy and backoffLimitPerIndex: beta, on by default


def check_server_version(api: KubeApi) -> None:
    """A `UserError` for an API server older than what the manager's promises need: before
    1.29 a Job's podReplacementPolicy (one pod per item at a time) and backoffLimitPerIndex
    (a batch's per-item retries) are dropped without an error, and the promise silently does
    not hold. A server that does not say its version is let be."""
    found = api.server_version()
    if found is not None and found < OLDEST:
        raise UserError(
            f"the Kubernetes API server is {found[0]}.{found[1]}: the manager needs "
            f"{OLDEST[0]}.{OLDEST[1]} or later (before, a Job's podReplacementPolicy and "
            "backoffLimitPerIndex are dropped without an error)"
        )


def one_line_of(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def check_kubeconfig(path: str) -> None:
    """A `UserError` naming the file unless it reads as a kubeconfig (a YAML mapping with
    clusters, contexts or users): the client's own errors for a wrong file say things like
    "'str' object does not support item assignment"."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            body = yaml.safe_load(f)
    except FileNotFoundError:
        raise UserError(f"kubeconfig {path} does not exist") from None
    except OSError as exc:
        raise UserError(f"cannot read the kubeconfig {path}: {exc.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise UserError(f"kubeconfig {path} is not valid YAML{at}") from None
    if not isinstance(body, dict) or not {"clusters", "contexts", "users"} & set(body):
        raise UserError(
            f"{path} is not a kubeconfig (no clusters, contexts or users in it): point "
            "--kubeconfig (or $KUBECONFIG) at the file `kubectl config view` reads"
        )


def _api_latency(registry):
    if registry is None:
        return None
    from prometheus_client import Histogram

    latency = Histogram(
        "workqueue_kube_api_seconds", "Kubernetes API call latency.", ["verb"], registry=registry
    )
    return lambda verb, kind, seconds: latency.labels(verb).observe(seconds)


def load_record(api: KubeApi, where: KubeQueue) -> RecordStore:
    return _loaded(RecordStore(api, where.queue), where, "record")


def load_batches(api: KubeApi, where: KubeQueue) -> BatchRecords:
    return _loaded(BatchRecords(api, where.queue), where, "batches")


def _loaded(store, where: KubeQueue, what: str):
    """`store` (a record of the queue's) once loaded; a `UserError` when it cannot be read."""
    try:
        store.load()
    except KubeError as exc:
        raise UserError(f"cannot read the queue's {what} in {where.namespace}: {exc}") from None
    return store


def setup(
    options: KubeOptions, *, registry=None, parallelism: int = 1, max_attempts: int = 3,
    attempts_from_ledger: bool = False,
) -> Parts:  # fmt: skip
    where = options.where
    pod = options.pod()
    settings = configuration(where.kubeconfig)
    settings.connection_pool_maxsize = pool_size(max(parallelism, options.batch_size))
    api = KubeApi(
        where.namespace,
        settings,
        qps=options.kube_api_qps,
        burst=options.kube_api_burst,
        on_call=_api_latency(registry),
    )
    try:
        check_server_version(api)
        if options.offers_node_labels:  # offers from node labels, the pods pinned to them
            pod, _ = node_offers.pin(api, pod, options.offers_node_labels, dict(options.offers))
        own(api, where.queue, options.owner_deployment, parallelism)
        record = load_record(api, where)
        batches = load_batches(api, where)
        holder: dict[str, KubernetesBackend] = {}
        cache = ClusterCache(
            api,
            ko.queue_selector(where.queue),
            on_change=lambda kind, job: holder["backend"].on_job_change(kind, job),
            resync_period=options.resync,
            index_label=ko.ITEM_HASH_LABEL,
        )
        backend = holder["backend"] = KubernetesBackend(
            api,
            where.queue,
            pod,
            cache,
            record,
            keep_succeeded=options.keep_succeeded,
            keep_failed=options.keep_failed,
            registry=registry,
            batches=batches,
            batch_size=options.batch_size,
            batch_wait=options.batch_wait,
            max_attempts=max_attempts,
            attempts_from_ledger=attempts_from_ledger,
        )
        backend.completions.start()
        try:
            cache.start_listed(
                SYNC_TIMEOUT_SECONDS,
                f"cannot list Jobs in {where.namespace} (is the API reachable?)",
            )
        except UserError:
            backend.completions.stop()
            raise
    except BaseException:
        api.close()
        raise
    stopping = [cache.stop, backend.completions.stop]
    detector = None
    if options.stuck_timeout > 0:
        detector = _stuck_detector(api, where, cache, backend, options.stuck_timeout, registry)
        stopping[:0] = [detector.stop, detector.pod_cache.stop]
    try:
        queue_control = _control(api, where.queue, parallelism, detector)
    except BaseException:  # its first list did not come: nothing may dispatch without it
        for stop in stopping:
            stop()
        api.close()
        raise
    stopping.append(queue_control.stop)
    ledger = ClusterLedger(
        where.queue,
        cache,
        record,
        namespace=where.namespace,
        facts=ManagerFacts(api, where.queue),
        control=queue_control,
        batches=batches,
    )
    if backend.batcher is not None:
        backend.batcher.adopt_unstarted()
    removed = backend.clean_orphans(options.orphan_age)
    if removed:
        log.warning("removed %d ConfigMap(s) left without their Job", removed)
    elector = None
    if options.leader_elect:
        from .steering.leader import LeaderElector

        elector = LeaderElector(
            api,
            f"{where.queue}-leader",
            f"{socket.gethostname()}-{os.getpid()}",
            lease_duration=options.lease_duration,
            renew_deadline=options.renew_deadline,
            retry_period=options.retry_period,
        )

    def close() -> None:
        if elector is not None:
            elector.stop()
        for stop in stopping:
            stop()
        api.close()

    return Parts(ledger=ledger, backend=backend, close=close, elector=elector, fence=api.fence)


def _control(api, queue: str, parallelism: int, detector=None):
    """What is asked of the queue, followed: its WorkQueue where the CRD is installed (its
    spec wins over --parallelism; one made here is seeded with it), else the control
    ConfigMap."""
    from .steering.queue_resource import QueueResource

    if queue_served(api):
        log.info("following workqueue/%s (spec.parallelism, spec.paused)", queue)
        stuck = detector.counts if detector is not None else dict
        return QueueResource(api, queue, parallelism, stuck).start()
    log.info("the WorkQueue CRD is not installed: pause and scale through configmap/%s-control",
             queue)  # fmt: skip
    return control.Control(api, queue).start()


def _stuck_detector(api, where, cache, backend, timeout: float, registry):
    """The queue's pods, cached, and the detector that fails items whose pods cannot start."""
    from .steering.stuck import StuckDetector

    pod_cache = ClusterCache(api, ko.queue_selector(where.queue), kind="pods").start()
    detector = StuckDetector(
        cache,
        pod_cache,
        lambda name: api.find("pods", name),
        backend.completions.request_fail,
        timeout=timeout,
    )
    if registry is not None:
        registry.register(_StuckGauge(detector))
    return detector.start()


class _StuckGauge:
    """workqueue_items_stuck{reason}, read from the detector when Prometheus scrapes."""

    def __init__(self, detector) -> None:
        self.detector = detector

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        gauge = GaugeMetricFamily(
            "workqueue_items_stuck",
            "Pods of the queue that cannot start (image pull, configuration), by reason.",
            labels=["reason"],
        )
        for reason, n in sorted(self.detector.counts().items()):
            gauge.add_metric([reason], n)
        yield gauge
