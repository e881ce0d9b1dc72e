"""Setting up the Kubernetes backend for one queue, from typed options: the API door, the
durable record, the Job cache, the backend, the ledger view and (with `--leader-elect`) the
Lease - and the stuck-pod detector and the pause control beside them. Also the commands that act
on a queue without running a manager: `status` (the record, the Jobs and their pods), `retry`
(items out of the record, their Jobs deleted), `pause` and `resume` (the control ConfigMap).

Every failure a person can fix - no kubeconfig, an unreachable API, a missing `--image` - is a
`UserError` raised before anything is dispatched.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from ...durations import moment
from ...errors import UserError
from ...ports import Parts, QueueRecord, Row, State
from . import control, pods
from . import objects as ko
from .api import KubeApi, KubeError, load_configuration
from .backend import KubernetesBackend
from .cache import JobCache, finished
from .ledger import ClusterLedger, job_state
from .options import KubeOptions, KubeQueue
from .record import Entry, ManagerFacts, RecordStore

log = logging.getLogger(__name__)
SYNC_TIMEOUT_SECONDS = 60


def _configuration(kubeconfig: str | None):
    for path in [kubeconfig] if kubeconfig else os.environ.get("KUBECONFIG", "").split(":"):
        if path:
            check_kubeconfig(path)
    try:
        return load_configuration(kubeconfig)
    except Exception as exc:  # the client raises several kinds for a missing config
        raise UserError(f"no Kubernetes configuration: {one_line_of(exc)}") from None


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
        )
        backend.completions.start()
        cache.start()
        if not cache.synced.wait(SYNC_TIMEOUT_SECONDS):
            cache.stop()
            backend.completions.stop()
            raise UserError(f"cannot list Jobs in {where.namespace} (is the API reachable?)")
    except BaseException:
        api.close()
        raise
    queue_control = control.Control(api, where.queue).start()
    stopping = [cache.stop, backend.completions.stop, queue_control.stop]
    if options.stuck_timeout > 0:
        detector = _stuck_detector(api, where, cache, backend, options.stuck_timeout, registry)
        stopping[:0] = [detector.stop, detector.pod_cache.stop]
    ledger = ClusterLedger(
        where.queue,
        cache,
        record,
        namespace=where.namespace,
        facts=ManagerFacts(api, where.queue),
        control=queue_control,
    )
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
        for stop in stopping:
            stop()
        api.close()

    return Parts(ledger=ledger, backend=backend, close=close, elector=elector)


@contextmanager
def _queue_api(queue: KubeQueue) -> Iterator[tuple[KubeQueue, KubeApi]]:
    """The API door of a command that acts on a queue without running a manager (`status`,
    `retry`, `pause`, `resume`): the checked queue and a client, closed afterwards."""
    where = queue.check()
    api = KubeApi(where.namespace, _configuration(where.kubeconfig))
    try:
        yield where, api
    finally:
        api.close()


def _stuck_detector(api, where, cache, backend, timeout: float, registry):
    """The queue's pods, cached, and the detector that fails items whose pods cannot start."""
    from .stuck import StuckDetector

    pod_cache = JobCache(api, ko.queue_selector(where.queue), kind="pods").start()
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


def status(queue: KubeQueue, *, listed: list[str] | None = None) -> QueueRecord:
    """What the cluster says of a queue: its Jobs (with why a pod is not running yet), the
    outcomes in the record, and the facts its manager left (for ETAs). The record keeps item
    hashes, not names: items whose Job is gone are counted, and named only when `listed`
    (the source's names) names them."""
    with _queue_api(queue) as (where, api):
        record = _record(api, where)
        try:
            jobs, _ = api.list("jobs", ko.queue_selector(where.queue))
            pod_list, _ = api.list("pods", ko.queue_selector(where.queue))
            facts = ManagerFacts(api, where.queue).read()
            paused = control.read(api, where.queue)
        except KubeError as exc:
            raise UserError(
                f"cannot read queue {where.queue} in {where.namespace}: {exc}"
            ) from None
    newest_pod = pods.by_job(pod_list)
    rows: dict[str, Row] = {}
    reasons: dict[str, str] = {}
    details: dict[str, dict] = {}
    by_item: dict[str, list[dict]] = {}
    for job in jobs:
        meta = job["metadata"]
        item = (meta.get("annotations") or {}).get(ko.ITEM_ANNOTATION)
        if item is not None and not meta.get("deletionTimestamp"):
            by_item.setdefault(item, []).append(job)
    for item, its_jobs in by_item.items():
        entry = record.entry(ko.item_hash(where.queue, item))
        job = ko.current_job(its_jobs, entry.version if entry is not None else None)
        if job is None:  # every Job is an older version's: the record speaks for it
            continue
        meta = job["metadata"]
        pod = newest_pod.get(meta["name"])
        rows[item] = _job_row(item, job, pod, where.namespace, entry)
        details[item] = {
            "job": meta["name"],
            "pod": pods.summary(pod),
            "versions": _versions(its_jobs, entry),
        }
        if not finished(job):
            why = pods.waiting_reason(job, pod)
            if why is not None:
                reasons[item] = why
    counts_only: dict[str, int] = {}
    by_hash = {ko.item_hash(where.queue, name): name for name in listed or []}
    known = {ko.item_hash(where.queue, name) for name in rows}
    for item_hash, (state, attempts) in record.entries().items():
        if item_hash in known:
            continue
        name = by_hash.get(item_hash)
        if name is None:
            counts_only[state] = counts_only.get(state, 0) + 1
        else:
            rows[name] = Row(name, state, attempts, 0.0, None, None, None, None, None)
    return QueueRecord(
        f"namespace {where.namespace}, queue {where.queue}",
        list(rows.values()),
        facts,
        reasons=reasons,
        details=details,
        unnamed=counts_only,
        arrivals_known=False,  # a Job is created when it is dispatched, not when its item came
        paused_since=paused,
    )


def _versions(jobs: list[dict], entry: Entry | None) -> list[dict]:
    """The versions an item ran at, oldest first: its record's history, then each Job's."""
    out = []
    for state, attempts, version, when in reversed((entry.history if entry else ()) or ()):
        out.append({"version": version, "state": state, "attempts": attempts, "finished": when})
    for job in sorted(jobs, key=lambda j: j["metadata"].get("creationTimestamp") or ""):
        state, attempts = job_state(job)
        version = ko.job_version(job)
        done = _epoch((job.get("status") or {}).get("completionTime"))
        out.append({"version": version, "state": state, "attempts": attempts, "finished": done})
    return out


def _job_row(
    item: str, job: dict, pod: dict | None, namespace: str, entry: Entry | None = None
) -> Row:
    state, attempts = job_state(job)
    later = entry is not None and (entry.state == State.PENDING or entry.attempts >= attempts)
    if later and state != State.RUNNING:
        state, attempts = entry.state, entry.attempts  # the record's later word
    job_status = job.get("status") or {}
    outcome = finished(job)
    error = None
    if outcome == "Failed":
        conditions = [c for c in job_status.get("conditions") or [] if c.get("type") == "Failed"]
        error = f"Job failed ({conditions[0].get('reason')})" if conditions else "Job failed"
    return Row(
        item,
        state,
        attempts,
        _epoch(job["metadata"].get("creationTimestamp")) or 0.0,
        _epoch(job_status.get("startTime")),
        _epoch(job_status.get("completionTime")) if outcome else None,
        pods.exit_code(pod),
        f"kubectl logs -n {namespace} job/{job['metadata']['name']}",
        error,
        ko.job_version(job),
    )


def item_detail(queue: KubeQueue, name: str, record: QueueRecord) -> dict:
    """What `workqueue status NAME` adds for one item: its Job and its pod's state."""
    return record.details.get(name) or {"job": None, "pod": None}


def _epoch(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    from .leader import parse_time

    return parse_time(timestamp)


def retry(queue: KubeQueue, name: str) -> str:
    """A failed (or cancelled) item out of the record, its Job deleted; the next pass of the
    queue's manager runs it again. An unknown item, or one that did not fail, is a
    `UserError`, as on the local backend."""
    with _queue_api(queue) as (where, api):
        record = _record(api, where)
        backend = _retrying_backend(api, where, record)
        known = record.get(ko.item_hash(where.queue, name))
        job = backend.read_job(name)
        state = job_state(job)[0] if job is not None else (known[0] if known else None)
        if state is None:
            raise UserError(f"no item named {name!r} in queue {where.queue} of {where.namespace}")
        if state not in (State.FAILED, State.CANCELLED) or not backend.retry(name):
            raise UserError(f"{name!r} is {state}, not failed: nothing to retry")
        return f"{name}: was {state}; the queue's manager will run it again"


def retry_many(
    queue: KubeQueue, *, matching: str | None = None, listed: list[str] | None = None
) -> list[str]:
    """Every failed item the cluster can name - its Job is there, or `listed` (the source's
    names) names its record entry - or those whose name matches the glob `matching`, out of
    the record and their Jobs deleted. Returns their names."""
    with _queue_api(queue) as (where, api):
        record = _record(api, where)
        try:
            jobs, _ = api.list("jobs", ko.queue_selector(where.queue))
        except KubeError as exc:
            raise UserError(f"cannot list Jobs in {where.namespace}: {exc}") from None
        failed = set()
        for job in jobs:
            item = (job["metadata"].get("annotations") or {}).get(ko.ITEM_ANNOTATION)
            if item is not None and finished(job) == "Failed":
                failed.add(item)
        for name in listed or []:
            entry = record.get(ko.item_hash(where.queue, name))
            if entry is not None and entry[0] == State.FAILED:
                failed.add(name)
        names = sorted(n for n in failed if matching is None or fnmatch.fnmatchcase(n, matching))
        backend = _retrying_backend(api, where, record)
        return [name for name in names if backend.retry(name)]


def _retrying_backend(api: KubeApi, where: KubeQueue, record: RecordStore) -> KubernetesBackend:
    """A backend for `retry`: it takes items out of the record and deletes their Jobs, and
    dispatches nothing (its pod is a placeholder, its Job cache never started)."""
    return KubernetesBackend(
        api,
        where.queue,
        ko.PodOptions(image="-"),
        JobCache(api, ko.queue_selector(where.queue), index_label=ko.ITEM_HASH_LABEL),
        record,
    )


def pause(queue: KubeQueue) -> str:
    label, already = _control(queue, "pause", control.pause)
    if already is not None:
        return f"{label}: already paused since {moment(already, date=True)}"
    return f"{label}: paused; running Jobs finish, nothing new starts (workqueue resume)"


def resume(queue: KubeQueue) -> str:
    label, since = _control(queue, "resume", control.resume)
    if since is None:
        return f"{label}: not paused"
    return f"{label}: resumed (paused since {moment(since, date=True)})"


def _control(queue: KubeQueue, verb: str, change) -> tuple[str, float | None]:
    """`change(api, queue)` (control.pause or resume) on the queue's control object; the
    queue's name for people, and the pause's time `change` returned."""
    with _queue_api(queue) as (where, api):
        try:
            when = change(api, where.queue)
        except KubeError as exc:
            raise UserError(
                f"cannot {verb} queue {where.queue} in {where.namespace}: {exc}"
            ) from None
    return f"queue {where.queue} in {where.namespace}", when
