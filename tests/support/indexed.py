"""The Job controller's Indexed Jobs, for the test kubelet: one pod per completion index, each
index retried on its own, the outcome of every index in the Job's status.

As the Kubernetes documentation (Job: completion mode, backoff limit per index, pod failure
policy) and the batch/v1 API reference describe them:

  * `completions` indexes 0 … n-1, at most `parallelism` pods at once (re-read while the Job
    runs: it may be changed), the lowest waiting index first; each pod carries its index as
    the annotation and label `batch.kubernetes.io/job-completion-index` and the env var
    `JOB_COMPLETION_INDEX`;
  * `status.completedIndexes` and `status.failedIndexes` list the indexes as compressed
    ranges ("0-2,5"), `succeeded` counts succeeded indexes, `failed` failed pods, `active`
    running pods;
  * with `backoffLimitPerIndex` an index is retried until it has failed that many times plus
    one, then it is a failed index and the others go on; a pod failure policy's `FailIndex`
    fails its index at once, `FailJob` the whole Job (reason PodFailurePolicy), `Ignore` does
    not count the failure (a DisruptionTarget pod); more failed indexes than
    `maxFailedIndexes` ends the Job at once (reason MaxFailedIndexesExceeded); at the end a
    Job with failed indexes is Failed with reason FailedIndexes, else Complete. Without
    `backoffLimitPerIndex`, `backoffLimit` counts the failed pods of every index together
    (BackoffLimitExceeded);
  * a failed index runs again only after the pod back-off (10 s doubling to 6 min: the
    kubelet's `backoff`), counted per index with `backoffLimitPerIndex`, for the Job without;
  * the end comes in two writes, as Kubernetes 1.31+ makes it: the interim condition
    (FailureTarget, SuccessCriteriaMet) as soon as the outcome is known - pods still running
    are stopped then, and counted in `status.terminating` until they have - and the terminal
    one (Failed, Complete) only once every pod has terminated; `status.ready` counts the
    pods whose container runs (a Pending one is active, not ready); `uncountedTerminatedPods`
    is written, empty (each pod is counted in the same write that ends it here).

The kubelet's `instant` mode completes every index at once (interim and terminal writes
back to back); its `stuck`
(by image, or a part of the item's name) leaves an index's pod Pending for good, the index
active, until the Job is deleted - as a wrong image name does.
"""

from __future__ import annotations

import tempfile
import threading
import time

from . import pod_objects as po
from .apiserver import ApiError, now_rfc3339


def compress(indexes) -> str:
    """Sorted indexes as the Job status writes them: "0-2,5,7-8"."""
    out, run = [], []
    for i in sorted(indexes):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(_span(run))
        run = [i]
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


class IndexedRun:
    """One Indexed Job run to its end by `kubelet` (see the module docstring)."""

    def __init__(self, kubelet, job: dict) -> None:
        self.kubelet = kubelet
        self.job = job
        meta, self.spec = job["metadata"], job["spec"]
        self.ns, self.name = meta["namespace"], meta["name"]
        self.completions = int(self.spec.get("completions") or 1)
        self.per_index = self.spec.get("backoffLimitPerIndex")
        self.max_failed = self.spec.get("maxFailedIndexes")
        self.cond = threading.Condition()
        # Invariant (under cond): every index is in exactly one of waiting, running,
        # succeeded, failed; `ended` is set once, with the Job's terminal condition.
        self.waiting = list(range(self.completions))
        self.running: set[int] = set()
        self.ready: set[int] = set()  # running indexes whose pod's container runs (not Pending)
        self.succeeded: set[int] = set()
        self.failed: set[int] = set()
        self.failures: dict[int, int] = {}  # index -> its counted pod failures
        self.failed_pods = 0
        self.not_before: dict[int, float] = {}  # a failed index -> when its back-off ends
        self.ended: tuple[bool, str, str] | None = None  # (ok, reason, message)

    def run(self) -> None:
        if self.kubelet.instant:
            self.succeeded = set(range(self.completions))
            self.waiting = []
            self._report(final=(True, "", ""))
            return
        self.kubelet._status(self.ns, self.name, {"startTime": now_rfc3339(), "active": 0})
        with tempfile.TemporaryDirectory(prefix=f"kubelet-{self.name}-") as root:
            with self.cond:
                while True:
                    if self._gone():
                        return
                    while self.ended is None and len(self.running) < self._parallelism():
                        index = self._next_ready()
                        if index is None:
                            break
                        self.running.add(index)
                        threading.Thread(target=self._pod, args=(index, root), daemon=True).start()
                    if not self.running and (self.ended is not None or not self.waiting):
                        break
                    self.cond.wait(0.05 if self.waiting else 0.2)
            self._report(final=self.ended or self._verdict())

    def _next_ready(self) -> int | None:
        """The first waiting index whose back-off is over, taken off `waiting` (caller: cond)."""
        now = time.monotonic()
        for position, index in enumerate(self.waiting):
            if self.not_before.get(index, 0.0) <= now:
                return self.waiting.pop(position)
        return None

    def _retry(self, index: int) -> None:
        """`index` waits again, for the back-off its failures earn (caller: cond)."""
        from .kubelet import backoff_delay

        failures = self.failures[index] if self.per_index is not None else self.failed_pods
        self.not_before[index] = time.monotonic() + backoff_delay(self.kubelet.backoff, failures)
        self.waiting.insert(0, index)

    def _parallelism(self) -> int:
        """The Job's parallelism as it is now (a change while it runs is followed)."""
        try:
            spec = self.kubelet.store.get("jobs", self.ns, self.name)["spec"]
        except ApiError:
            return 0
        return int(spec.get("parallelism", 1))

    def _gone(self) -> bool:
        try:
            alive = self.kubelet.store.get("jobs", self.ns, self.name)["metadata"]
        except ApiError:
            return True
        return alive["uid"] != self.job["metadata"]["uid"]

    def _verdict(self) -> tuple[bool, str, str]:
        if self.failed:
            return False, "FailedIndexes", "Job has failed indexes"
        return True, "", ""

    def _pod(self, index: int, root: str) -> None:
        kubelet, job = self.kubelet, self.job
        container = self.spec["template"]["spec"]["containers"][0]
        prepared = kubelet.prepare(job, f"{root}/{index}", index)
        item = ""
        if prepared is not None:
            path = prepared[1].get("WORK_ITEM_FILE")
            try:
                with open(path or "", encoding="utf-8") as f:
                    item = f.read()
            except OSError:
                item = ""
        for key, reason in kubelet.stuck.items():  # (the kubelet's `stuck`: by image or item)
            if prepared is not None and (key == container["image"] or key in item):
                state, conditions = po.stuck(job, reason)
                kubelet._pod(job, "Pending", state, conditions, index)
                with self.cond:
                    self.kubelet._status(self.ns, self.name, self._status())
                return  # never starts: the index stays active until the Job is deleted
        ignored = kubelet._disrupted(job, item, index) if prepared is not None else None
        if ignored is not None:
            return self._ended(index, None if ignored else 137, counted=not ignored)
        if prepared is None:
            return self._ended(index, 1, counted=True)
        pod = kubelet._pod(job, "Running", {"running": {"startedAt": now_rfc3339()}}, None, index)
        with self.cond:
            self.ready.add(index)
            self.kubelet._status(self.ns, self.name, self._status())
        try:
            code = kubelet._container(job, *prepared)
        except OSError:
            code = 127
        kubelet._pod_ended(self.ns, pod, container, code)
        with kubelet._lock:
            kubelet.runs.append((f"{self.name}/{index}", code))
        if code == 0:
            return self._ended(index, 0, counted=False)
        rule, action = _exit_code_rule(self.spec, container["name"], code)
        self._ended(index, code, counted=action != "Ignore", action=action, pod=pod, rule=rule)

    def _ended(self, index, code, *, counted, action=None, pod="", rule=None) -> None:
        with self.cond:
            self.running.discard(index)
            self.ready.discard(index)
            if code == 0:
                self.succeeded.add(index)
            elif action == "FailJob":
                self.failed_pods += 1
                message = (f"Container worker for pod {self.ns}/{pod} failed with exit code "
                           f"{code} matching FailJob rule at index {rule}")  # fmt: skip
                self._end(False, "PodFailurePolicy", message)
            elif not counted:
                self.waiting.insert(0, index)  # not counted: the index runs again
            else:
                self.failed_pods += 1
                self.failures[index] = self.failures.get(index, 0) + 1
                if self.per_index is None:
                    if self.failed_pods > int(self.spec.get("backoffLimit", 6)):
                        self.failed.add(index)
                        self._end(False, "BackoffLimitExceeded", "Job has reached the "
                                  "specified backoff limit")  # fmt: skip
                    else:
                        self._retry(index)
                elif action == "FailIndex" or self.failures[index] > self.per_index:
                    self.failed.add(index)
                    if self.max_failed is not None and len(self.failed) > self.max_failed:
                        self._end(False, "MaxFailedIndexesExceeded", "Job has exceeded the "
                                  "specified maximal number of failed indexes")  # fmt: skip
                else:
                    self._retry(index)
            if self.ended is None:
                self.kubelet._status(self.ns, self.name, self._status())
            else:  # a pod stopped after the end was known: one fewer terminating
                self.kubelet._status(self.ns, self.name, {"terminating": len(self.running)})
            self.cond.notify_all()

    def _end(self, ok: bool, reason: str, message: str) -> None:
        """The Job ends now: nothing more starts, running pods are stopped and counted as
        terminating, the interim condition is written (caller: cond)."""
        if self.ended is not None:
            return
        self.ended = (ok, reason, message)
        self.waiting = []
        status = self._status()
        status.update(active=0, ready=0, terminating=len(self.running))
        status["conditions"] = [self._condition(ok, reason, message)[0]]
        self.kubelet._status(self.ns, self.name, status)
        with self.kubelet._lock:
            running = list(self.kubelet._containers.get(self.job["metadata"]["uid"]) or ())
        for proc in running:
            proc.terminate()

    def _status(self) -> dict:
        status = {
            "active": len(self.running),
            "ready": len(self.ready),
            "succeeded": len(self.succeeded),
            "failed": self.failed_pods,
            "completedIndexes": compress(self.succeeded),
            "uncountedTerminatedPods": {},
        }
        if self.per_index is not None:
            status["failedIndexes"] = compress(self.failed)
        return status

    @staticmethod
    def _condition(ok: bool, reason: str, message: str) -> tuple[dict, dict]:
        """(interim, terminal) conditions of an end."""
        from .pod_objects import job_condition

        if ok:
            reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        return (
            job_condition("SuccessCriteriaMet" if ok else "FailureTarget", reason, message),
            job_condition("Complete" if ok else "Failed", reason, message),
        )

    def _report(self, final: tuple[bool, str, str]) -> None:
        """The terminal write, every pod terminated (the interim first, unless `_end` wrote
        it already)."""
        ok, reason, message = final
        interim, terminal = self._condition(ok, reason, message)
        status = self._status()
        status.update(active=None, ready=0, terminating=0)
        if self.ended is None:
            self.kubelet._status(self.ns, self.name, {**status, "conditions": [interim]})
            time.sleep(self.kubelet.settle)
        status["conditions"] = [interim, terminal]
        if ok:
            status["completionTime"] = terminal["lastTransitionTime"]
        self.kubelet._status(self.ns, self.name, status)
        ttl = self.spec.get("ttlSecondsAfterFinished")
        if ttl is not None:
            threading.Timer(ttl, self.kubelet._expire, args=(self.ns, self.name)).start()


def _exit_code_rule(spec: dict, container: str, code: int) -> tuple[int | None, str | None]:
    """The first podFailurePolicy rule an exit code matches: (its index, its action), or
    (None, None) - the failure then counts."""
    rules = ((spec.get("podFailurePolicy") or {}).get("rules")) or []
    for index, rule in enumerate(rules):
        match = rule.get("onExitCodes") or {}
        if not match or match.get("containerName") not in (None, container):
            continue
        if (match.get("operator") == "In") == (code in (match.get("values") or [])):
            return index, rule.get("action")
    return None, None
