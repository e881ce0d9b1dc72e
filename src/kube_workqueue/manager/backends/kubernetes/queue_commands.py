"""`status`, `retry`, `pause`, `resume` on a Kubernetes queue: its Jobs, its record and its
control ConfigMap, read and changed through the API server.

The rules are `manager.queue_ops.QueueOps`'s; the hooks here ask the cluster. Its
record keeps item hashes, not names: items whose Job is gone are counted, and named only when
`listed` (the source's names) names them. Retrying takes the item out of the record and
deletes its Job (with a backend that dispatches nothing); pausing creates the queue's control
ConfigMap, which every manager of the queue follows (`control.py`).
"""

from __future__ import annotations

from ...errors import UserError
from ...items import QueueRecord
from ...ports import QueueControls, Row, State
from ...queue_ops import QueueOps
from .client.api import KubeApi, KubeError
from .client.cache import ClusterCache, finished
from .dispatch.backend import KubernetesBackend
from .manifests import batch_objects as bo
from .manifests import objects as ko
from .manifests import pods
from .options import KubeQueue
from .parts import configuration, load_batches, load_record
from .records.batch_record import BatchRecords
from .records.ledger import job_state
from .records.record import Entry, ManagerFacts, RecordStore
from .steering import control, queue_resource


class KubeQueueOps(QueueOps):
    running_work = "running Jobs"

    def __init__(self, queue: KubeQueue) -> None:
        self.queue = queue.check()
        self.where = f"queue {self.queue.queue} of {self.queue.namespace}"
        self.api = KubeApi(self.queue.namespace, configuration(self.queue.kubeconfig))
        self._loaded: RecordStore | None = None
        self._batches: BatchRecords | None = None
        self._retrier: KubernetesBackend | None = None
        self._controls_object: QueueControls | None = None

    def close(self) -> None:
        self.api.close()

    def _record(self) -> RecordStore:
        if self._loaded is None:
            self._loaded = load_record(self.api, self.queue)
        return self._loaded

    def _batch_record(self) -> BatchRecords:
        if self._batches is None:
            self._batches = load_batches(self.api, self.queue)
        return self._batches

    def status(self, listed: list[str] | None = None) -> QueueRecord:
        """What the cluster says of a queue: its Jobs (with why a pod is not running yet), the
        outcomes in the record, and the facts its manager left (for ETAs). The record keeps item
        hashes, not names: items whose Job is gone are counted, and named only when `listed`
        (the source's names) names them."""
        where, api = self.queue, self.api
        record = self._record()
        try:
            jobs, _ = api.list("jobs", ko.queue_selector(where.queue))
            pod_list, _ = api.list("pods", ko.queue_selector(where.queue))
            facts = ManagerFacts(api, where.queue).read()
            paused = self.controls(change=False).paused_since()  # what its manager obeys
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
        batches = self._batch_rows(rows, details, by_hash, counts_only)
        known = {ko.item_hash(where.queue, name) for name in rows}
        for item_hash, (state, attempts) in record.entries().items():
            if item_hash in known or batches.holds(item_hash):  # the batches' word came first
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

    def _batch_rows(self, rows, details, by_hash, counts_only) -> BatchRecords:
        """The batches' word on their members (it comes first: see `ledger`), into `rows` -
        for the members named by a running batch's claim or by `listed` - and, by state, into
        `counts_only` for the rest: one pass over the index, nothing built per item (a million
        items in a second or two). Returns the batches, to tell which items they hold."""
        batches = self._batch_record()
        names: dict[str, str] = dict(by_hash)
        for seq in batches.unrecorded():
            batch = batches.batch(seq)
            for i, name in enumerate(batch.names or []):
                names.setdefault(batch.hash_hex(i), name)
        named: set[int] = set()
        for item_hash, name in names.items():
            found = batches.lookup(item_hash)
            if found is None:
                continue
            named.add(int(item_hash, 16))
            job = bo.batch_name(self.queue.queue, found.seq)
            logs = (f"kubectl logs -l batch.kubernetes.io/job-name={job},"
                    f"{bo.INDEX_ANNOTATION}={found.index}")  # fmt: skip
            rows[name] = Row(name, found.state, found.attempts, 0.0, None, None, None, logs,
                             None, found.version)  # fmt: skip
            details[name] = {"job": job, "index": found.index, "pod": None}
        for state, count in batches.count(named).items():
            counts_only[state] = counts_only.get(state, 0) + count
        return batches

    def item_detail(self, name: str, record: QueueRecord) -> dict:
        """The item's Job and its pod's state."""
        return record.details.get(name) or {"job": None, "pod": None}

    def _retrying(self) -> KubernetesBackend:
        """A backend for `retry`: it takes items out of the record and deletes their Jobs, and
        dispatches nothing (its pod is a placeholder, its Job cache never started)."""
        if self._retrier is None:
            queue = self.queue.queue
            self._retrier = KubernetesBackend(
                self.api,
                queue,
                ko.PodOptions(image="-"),
                ClusterCache(self.api, ko.queue_selector(queue), index_label=ko.ITEM_HASH_LABEL),
                self._record(),
                batches=self._batch_record(),
            )
        return self._retrier

    def state_of(self, name: str) -> str | None:
        found = self._batch_record().lookup(ko.item_hash(self.queue.queue, name))
        if found is not None:
            return found.state
        known = self._record().get(ko.item_hash(self.queue.queue, name))
        job = self._retrying().read_job(name)
        return job_state(job)[0] if job is not None else (known[0] if known else None)

    def failed_names(self, listed: list[str] | None) -> list[str]:
        """Every failed item the cluster can name: its Job is there, or `listed` names its
        record entry."""
        record = self._record()
        try:
            jobs, _ = self.api.list("jobs", ko.queue_selector(self.queue.queue))
        except KubeError as exc:
            raise UserError(f"cannot list Jobs in {self.queue.namespace}: {exc}") from None
        failed = set()
        for job in jobs:
            item = (job["metadata"].get("annotations") or {}).get(ko.ITEM_ANNOTATION)
            if item is not None and finished(job) == "Failed":
                failed.add(item)
        batches = self._batch_record()
        for name in listed or []:
            found = batches.lookup(ko.item_hash(self.queue.queue, name))
            if found is not None:
                if found.state == State.FAILED:
                    failed.add(name)
                continue
            entry = record.get(ko.item_hash(self.queue.queue, name))
            if entry is not None and entry[0] == State.FAILED:
                failed.add(name)
        return sorted(failed)

    def run_again(self, name: str) -> bool:
        return self._retrying().retry(name)

    def retried(self, name: str, state: str) -> str:
        return f"{name}: was {state}; the queue's manager will run it again"

    def _resource(self) -> bool:
        """True when the queue is followed through its WorkQueue (the CRD is installed)."""
        if not hasattr(self, "_served"):
            self._served = self._control("read", lambda api, _: api.served(queue_resource.KIND))
        return self._served

    def controls(self, *, change: bool) -> QueueControls:
        """What its manager obeys: the queue's WorkQueue where the CRD is served, else its
        control ConfigMap - the same classes, not started, so each read asks the API server.
        An API error is one line naming the queue (`asking`)."""
        if self._controls_object is None:
            if self._resource():
                self._controls_object = queue_resource.QueueResource(self.api, self.queue.queue)
            else:
                self._controls_object = control.Control(self.api, self.queue.queue)
        return self._controls_object

    def asking(self, verb: str, call):
        return self._control(verb, lambda _api, _queue: call())

    def autoscaled(self) -> bool:
        facts = self._control("read", lambda api, queue: ManagerFacts(api, queue).read())
        return bool(facts and facts.get("autoscale"))

    def _control(self, verb: str, change):
        try:
            return change(self.api, self.queue.queue)
        except KubeError as exc:
            raise UserError(
                f"cannot {verb} queue {self.queue.queue} in {self.queue.namespace}: {exc}"
            ) from None


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


def _epoch(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    from .steering.leader import parse_time

    return parse_time(timestamp)
