"""Setting up the Kubernetes backend for one queue, from typed options: the API door, the
durable record, the Job cache, the backend, the ledger view and (with `--leader-elect`) the
Lease. Also the two commands that act on a queue without running a manager: `status` (counts
from the record and the Job cache) and `retry` (an item out of the record, its Job deleted).

Every failure a person can fix - no kubeconfig, an unreachable API, a missing `--image` - is a
`UserError` raised before anything is dispatched.
"""

from __future__ import annotations

import logging
import os
import socket

from ...errors import UserError
from ...ports import Parts, QueueStatus, Row, State
from . import objects as ko
from .api import KubeApi, KubeError, load_configuration
from .backend import KubernetesBackend
from .cache import JobCache, finished
from .options import KubeOptions, KubeQueue
from .record import ClusterLedger, RecordStore, job_state

log = logging.getLogger(__name__)
SYNC_TIMEOUT_SECONDS = 60


def _configuration(kubeconfig: str | None):
    try:
        return load_configuration(kubeconfig)
    except Exception as exc:  # the client raises several kinds for a missing config
        raise UserError(f"no Kubernetes configuration: {exc}") from None


def _api_latency(registry):
    if registry is None:
        return None
    from prometheus_client import Histogram

    latency = Histogram(
        "workqueue_kube_api_seconds", "Kubernetes API call latency.", ["verb"], registry=registry
    )
    return lambda verb, kind, seconds: latency.labels(verb).observe(seconds)


def _record(api: KubeApi, where: KubeQueue) -> RecordStore:
    record = RecordStore(api, where.queue)
    try:
        record.load()
    except KubeError as exc:
        raise UserError(f"cannot read the queue's record in {where.namespace}: {exc}") from None
    return record


def setup(options: KubeOptions, *, registry=None) -> Parts:
    where = options.where
    pod = options.pod()
    api = KubeApi(
        where.namespace,
        _configuration(where.kubeconfig),
        qps=options.kube_api_qps,
        burst=options.kube_api_burst,
        on_call=_api_latency(registry),
    )
    try:
        record = _record(api, where)
        holder: dict[str, KubernetesBackend] = {}
        cache = JobCache(
            api,
            ko.queue_selector(where.queue),
            on_change=lambda kind, job: holder["backend"].on_job_change(kind, job),
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
        )
        cache.start()
        if not cache.synced.wait(SYNC_TIMEOUT_SECONDS):
            cache.stop()
            raise UserError(f"cannot list Jobs in {where.namespace} (is the API reachable?)")
    except BaseException:
        api.close()
        raise
    ledger = ClusterLedger(where.queue, cache, record, namespace=where.namespace)
    removed = backend.clean_orphans(options.orphan_age)
    if removed:
        log.warning("removed %d ConfigMap(s) left without their Job", removed)
    elector = None
    if options.leader_elect:
        from .leader import LeaderElector

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
        cache.stop()
        api.close()

    return Parts(ledger=ledger, backend=backend, close=close, elector=elector)


def status(queue: KubeQueue, recent: int = 10) -> QueueStatus:
    """What the cluster says of a queue: Jobs running now, and outcomes in the record. Items
    the source lists but no manager has dispatched are not in the cluster: not counted."""
    where = queue.check()
    api = KubeApi(where.namespace, _configuration(where.kubeconfig))
    try:
        record = _record(api, where)
        try:
            jobs, _ = api.list("jobs", ko.queue_selector(where.queue))
        except KubeError as exc:
            raise UserError(f"cannot list Jobs in {where.namespace}: {exc}") from None
    finally:
        api.close()
    counts = {s.value: 0 for s in State}
    rows: dict[str, Row] = {}
    for job in jobs:
        item = (job["metadata"].get("annotations") or {}).get(ko.ITEM_ANNOTATION)
        if item is None:
            continue
        state, attempts = job_state(job)
        status_ = job.get("status") or {}
        rows[item] = Row(
            item,
            state,
            attempts,
            0.0,
            _epoch(status_.get("startTime")),
            _epoch(status_.get("completionTime")) if finished(job) else None,
            None,
            f"job/{job['metadata']['name']} (kubectl logs)",
            None if finished(job) != "Failed" else "Job failed",
        )
    running = [r for r in rows.values() if r.state == State.RUNNING]
    known = {ko.item_hash(where.queue, name) for name in rows}
    for item_hash, (state, _) in record.entries().items():
        if item_hash not in known:
            counts[state] = counts.get(state, 0) + 1
    for row in rows.values():
        counts[row.state] += 1
    done = sorted(
        (r for r in rows.values() if r.finished is not None),
        key=lambda r: r.finished,
        reverse=True,
    )
    return QueueStatus(
        where=f"namespace {where.namespace}, queue {where.queue}",
        counts=counts,
        recent=done[:recent],
        failed=[r for r in done if r.state == State.FAILED],
        running=sorted(running, key=lambda r: r.name),
    )


def _epoch(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    from .leader import parse_time

    return parse_time(timestamp)


def retry(queue: KubeQueue, name: str) -> str:
    """A failed item out of the record, its Job deleted; the next pass of the queue's manager
    runs it again. An unknown item, or one that did not fail, is a `UserError`, as on the local
    backend."""
    where = queue.check()
    api = KubeApi(where.namespace, _configuration(where.kubeconfig))
    try:
        record = _record(api, where)
        backend = KubernetesBackend(
            api,
            where.queue,
            ko.PodOptions(image="-"),
            JobCache(api, ko.queue_selector(where.queue)),
            record,
        )
        known = record.get(ko.item_hash(where.queue, name))
        job = backend.read_job(name)
        state = job_state(job)[0] if job is not None else (known[0] if known else None)
        if state is None:
            raise UserError(f"no item named {name!r} in queue {where.queue} of {where.namespace}")
        if state != State.FAILED or not backend.retry(name):
            raise UserError(f"{name!r} is {state}, not failed: nothing to retry")
        return f"{name}: was failed; the queue's manager will run it again"
    finally:
        api.close()
