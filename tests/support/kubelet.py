"""A test kubelet for the API-server stand-in: it runs each Job created there as local
processes and writes the Job's status back, so end-to-end tests go from a dropped file to a
finished Job without a cluster.

For each new Job: wait for the ConfigMaps its pod mounts (as a kubelet waits to mount them),
write their keys as files into a private folder and point the container's environment at them
(so WORK_ITEM_FILE names a real file), then run the container's `command` + `args` - or, for an
image with no command, the argv registered for that image - up to backoffLimit + 1 times.
Status follows batch/v1: startTime and active while running; then succeeded or failed with a
Complete or Failed (BackoffLimitExceeded) condition and completionTime. A finished Job with
ttlSecondsAfterFinished is deleted (background propagation) that many seconds later, as the TTL
controller does. PersistentVolumeClaim mounts are taken to be the same path on this machine.

Pods: each attempt is a Pod object as the Job controller makes them (`pod_objects.py`: the
template's labels plus the job-name ones, owned by the Job, so deleting the Job deletes them),
phase Running with a running container, then Succeeded or Failed with the container's exit
code. A Job whose image, or whose item's name, contains a key of `stuck` never
starts: its pod stays Pending, waiting with that reason (`ImagePullBackOff`, …) or unschedulable
(`Unschedulable`), and the Job stays active - what a real cluster does with a wrong image name
or a pod no node fits.

The Job controller's pace and bookkeeping, as Kubernetes 1.31+ has them (Job documentation:
"Pod backoff failure policy", "Termination of Job pods"; batch/v1 JobStatus): a failed pod is
replaced only after a back-off of 10 s, doubled for each further failure, at most 6 min
(`backoff`: tests compress it, the default is the real one); `status.ready` counts running
ready pods, `terminating` pods being stopped, and each finished pod passes through
`uncountedTerminatedPods` (its uid) before `succeeded`/`failed` count it (`failed` counts pods,
not Jobs); the end is written in two steps - first the interim condition (SuccessCriteriaMet or
FailureTarget), and only once every pod has terminated the terminal one (Complete or Failed);
`completionTime` is set for a Job that succeeded only.

The Job controller's rules the manager relies on: a suspended Job (`spec.suspend`, as Kueue
holds it) runs nothing until it is unsuspended; a pod the cluster disrupts (`disrupt`: it fails
with a DisruptionTarget condition) is not counted against backoffLimit when the Job's
podFailurePolicy says Ignore for it, and is otherwise; an exit code a FailJob rule lists fails
the Job at once (reason PodFailurePolicy, the real controller's message); attempts run one after
the other, never overlapping (podReplacementPolicy: Failed). A Job deleted while its pod runs
takes the pod with it: its container is sent SIGTERM, as a kubelet does when a pod is deleted.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time

from . import pod_objects as po
from .apiserver import ApiError, ApiServer, now_rfc3339

REAL_BACKOFF = (10.0, 360.0)  # the Job controller's pod back-off: first delay, longest delay
QUICK_BACKOFF = (0.05, 0.4)  # the same doubling, compressed for tests
SETTLE_SECONDS = 0.05  # between a Job's interim condition and its terminal one


def backoff_delay(backoff: tuple[float, float], failures: int) -> float:
    """How long the Job controller waits before replacing a pod after `failures` counted
    failures in a row: the first delay, doubled for each further one, capped."""
    first, longest = backoff
    return 0.0 if failures <= 0 else min(first * 2 ** (failures - 1), longest)


class Kubelet:
    def __init__(
        self,
        server: ApiServer,
        images: dict[str, list[str]] | None = None,
        env: dict[str, str] | None = None,
        instant: bool = False,
        stuck: dict[str, str] | None = None,
        backoff: tuple[float, float] = REAL_BACKOFF,
    ) -> None:
        """`instant`: complete every Job at once without running anything (benchmarks).
        `stuck`: image, or a part of an item's name -> the reason its pods never start (see
        the module docstring). `backoff`: (first, longest) delay before a failed pod is
        replaced."""
        self.instant = instant
        self.backoff = backoff
        self.settle = 0.0 if instant else SETTLE_SECONDS
        self.stuck = stuck or {}
        self.store = server.store
        self.images = images or {}
        self.env = env or {}
        self.runs: list[tuple[str, int]] = []  # (job name, exit code) of every pod run
        self._started: set[str] = set()  # uids of the Jobs whose pods this kubelet ran
        # part of an item's name -> how many of its pods the cluster disrupts (preemption,
        # a node drain) before one runs: they fail with DisruptionTarget
        self.disrupt: dict[str, int] = {}
        self.disruptions: list[tuple[str, bool]] = []  # (pod, ignored by the Job's policy)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # Job uid -> its running containers (an Indexed Job runs several at once)
        self._containers: dict[str, set[subprocess.Popen]] = {}
        self.store.hooks.append(self._on_change)

    def _on_change(self, kind: str, resource: str, obj: dict) -> None:
        if resource == "jobs" and kind == "DELETED":
            with self._lock:
                containers = list(self._containers.get(obj["metadata"]["uid"]) or ())
            for container in containers:  # the pods go with their Job: containers stopped
                container.terminate()
            return
        if resource != "jobs" or kind not in ("ADDED", "MODIFIED"):
            return
        uid = obj["metadata"]["uid"]
        if (obj.get("spec") or {}).get("suspend"):
            if kind == "ADDED":  # as the Job controller: suspended, nothing runs
                ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
                threading.Thread(
                    target=self._status,
                    args=(ns, name, {"conditions": [po.condition("Suspended", "JobSuspended")]}),
                    daemon=True,
                ).start()
            return
        with self._lock:
            if uid in self._started:
                return
            self._started.add(uid)
        t = threading.Thread(target=self._run_job, args=(obj,), daemon=True)
        self._threads.append(t)
        t.start()

    def _status(self, ns: str, name: str, status: dict) -> None:
        try:
            self.store.patch(
                "jobs", ns, name, {"status": status}, "application/merge-patch", status_only=True
            )
        except ApiError:
            pass  # the Job was deleted meanwhile

    def _wait_config_map(self, ns: str, name: str, timeout: float = 30.0) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return self.store.get("configmaps", ns, name)
            except ApiError:
                time.sleep(0.02)
        return None

    def _run_job(self, job: dict) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        spec = job["spec"]
        if spec.get("completionMode") == "Indexed":
            from .indexed import IndexedRun

            return IndexedRun(self, job).run()
        if self.instant:
            done = {"startTime": now_rfc3339(), "succeeded": 1}
            return self._finish(ns, name, spec, ok=True, reason="", counts=done)
        container = spec["template"]["spec"]["containers"][0]
        item = (job["metadata"].get("annotations") or {}).get("workqueue.dev/item", "")
        for key, reason in self.stuck.items():
            if key == container["image"] or key in item:
                return self._stuck_pod(job, reason)
        with tempfile.TemporaryDirectory(prefix=f"kubelet-{name}-") as root:
            prepared = self.prepare(job, root)
            if prepared is None:
                return self._finish(ns, name, spec, ok=False, reason="MountFailed")
            argv, env = prepared
            self._status(ns, name, {"startTime": now_rfc3339(), "active": 0, "ready": 0,
                                    "terminating": 0, "uncountedTerminatedPods": {}})  # fmt: skip
            tries = spec.get("backoffLimit", 6) + 1
            code, failed = 1, 0
            while (ignored := self._disrupted(job, item)) is not None:
                if not ignored:  # without the policy a disruption uses up a try
                    tries -= 1
                    failed += 1
            for _ in range(tries):
                if failed and not self._backed_off(job, failed):
                    return  # deleted while waiting
                pod_name = self._pod(job, "Running", {"running": {"startedAt": now_rfc3339()}})
                self._status(ns, name, {"active": 1, "ready": 1})
                try:
                    code = self._container(job, argv, env)
                except OSError:
                    code = 127
                self._pod_ended(ns, pod_name, container, code)
                with self._lock:
                    self.runs.append((name, code))
                self._count(ns, name, pod_name, code == 0, {"succeeded": 1} if code == 0
                            else {"failed": failed + 1})  # fmt: skip
                if code == 0:
                    break
                failed += 1
                rule = po.fail_job_rule(spec, container["name"], code)
                if rule is not None:  # the podFailurePolicy fails the Job at once
                    message = (
                        f"Container {container['name']} for pod {ns}/{pod_name} failed with "
                        f"exit code {code} matching FailJob rule at index {rule}"
                    )
                    return self._finish(
                        ns, name, spec, ok=False, reason="PodFailurePolicy", message=message
                    )
        self._finish(ns, name, spec, ok=code == 0, reason="BackoffLimitExceeded")

    def _backed_off(self, job: dict, failures: int) -> bool:
        """Wait out the back-off after `failures` (False when the Job went meanwhile)."""
        meta = job["metadata"]
        deadline = time.monotonic() + backoff_delay(self.backoff, failures)
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))
            try:
                alive = self.store.get("jobs", meta["namespace"], meta["name"])["metadata"]
            except ApiError:
                return False
            if alive["uid"] != meta["uid"]:
                return False
        return True

    def _count(self, ns: str, name: str, pod_name: str, ok: bool, counts: dict) -> None:
        """A finished pod counted as the Job controller does: first its uid under
        uncountedTerminatedPods, then in the `succeeded`/`failed` totals (`counts`)."""
        try:
            uid = self.store.get("pods", ns, pod_name)["metadata"]["uid"] if pod_name else ""
        except ApiError:
            uid = ""
        self._status(ns, name, {"active": 0, "ready": 0, **po.uncounted(uid, ok)})
        self._status(ns, name, {**counts, **po.COUNTED})

    def prepare(
        self, job: dict, root: str, index: int | None = None
    ) -> tuple[list[str], dict[str, str]] | None:
        """The container's argv and environment for one pod of `job`, its ConfigMap volumes
        written as files under `root` (None when one never came). `index`: the pod's
        completion index (an Indexed Job), seen through the downward API and as
        JOB_COMPLETION_INDEX; `$(NAME)` in an env value is expanded from the entries before it,
        as the kubelet does."""
        ns = job["metadata"]["namespace"]
        pod = job["spec"]["template"]["spec"]
        container = pod["containers"][0]
        annotations = {}
        if index is not None:
            annotations[po.INDEX_ANNOTATION] = str(index)
        declared: dict[str, str] = {}
        for item in container.get("env") or []:
            declared[item["name"]] = po.env_value(item, annotations, declared)
        if index is not None:
            declared.setdefault("JOB_COMPLETION_INDEX", str(index))
        mounts: dict[str, str] = {}
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount["name"]) or {}
            if "configMap" in volume:
                cm = self._wait_config_map(ns, volume["configMap"]["name"])
                if cm is None:
                    return None
                folder = os.path.join(root, mount["name"])
                os.makedirs(folder, exist_ok=True)
                sub = mount.get("subPath")
                if "subPathExpr" in mount:  # expanded from the container's env, as a kubelet
                    sub = po.env_value({"value": mount["subPathExpr"]}, {}, declared)
                data = cm.get("data") or {}
                if sub and sub not in data:
                    return None  # a missing key: the container cannot be created
                for key, value in data.items():
                    if sub and key != sub:
                        continue  # one key mounted: the others are not written
                    with open(os.path.join(folder, key), "w", encoding="utf-8") as f:
                        f.write(value)
                mounts[mount["mountPath"]] = os.path.join(folder, sub) if sub else folder
        env = dict(os.environ, **self.env)
        for key, value in declared.items():
            for mount_path, folder in mounts.items():
                if value == mount_path or value.startswith(mount_path + "/"):
                    value = folder + value[len(mount_path) :]
            env[key] = value
        argv = list(container.get("command") or self.images.get(container["image"], []))
        argv += container.get("args") or []
        return argv, env

    def _container(self, job: dict, argv: list[str], env: dict[str, str]) -> int:
        """Run one container to its end; its exit code. Stopped if the Job is deleted."""
        uid = job["metadata"]["uid"]
        proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with self._lock:
            self._containers.setdefault(uid, set()).add(proc)
        try:
            meta = job["metadata"]
            try:
                alive = self.store.get("jobs", meta["namespace"], meta["name"])["metadata"]
            except ApiError:
                alive = None
            if alive is None or alive["uid"] != uid:
                proc.terminate()  # deleted before the container started
            return proc.wait()
        finally:
            with self._lock:
                running = self._containers.get(uid, set())
                running.discard(proc)
                if not running:
                    self._containers.pop(uid, None)

    def _disrupted(self, job: dict, item: str, index: int | None = None) -> bool | None:
        """One pod of `job` ended by the cluster, if `disrupt` says so (None if not). True
        when the Job's podFailurePolicy ignores it (ours does), False when it counts."""
        with self._lock:
            key = next((k for k, n in self.disrupt.items() if k in item and n > 0), None)
            if key is None:
                return None
            self.disrupt[key] -= 1
        rules = ((job["spec"].get("podFailurePolicy") or {}).get("rules")) or []
        ignored = any(
            r.get("action") == "Ignore"
            and any(c.get("type") == "DisruptionTarget" for c in r.get("onPodConditions") or [])
            for r in rules
        )
        name = self._pod(
            job,
            "Failed",
            {"terminated": {"exitCode": 137, "reason": "Error"}},
            [po.condition("DisruptionTarget", "PreemptionByScheduler")],
            index,
        )
        run = job["metadata"]["name"] + ("" if index is None else f"/{index}")
        with self._lock:
            self.runs.append((run, 137))
            self.disruptions.append((name, ignored))
        return ignored

    def _pod(
        self,
        job: dict,
        phase: str,
        state: dict,
        conditions: list | None = None,
        index: int | None = None,
    ) -> str:
        """A pod of `job` created (`pod_objects.pod`); its name ("" when its Job is gone)."""
        body = po.pod(job, phase, state, conditions, index)
        try:
            return self.store.create("", "pods", job["metadata"]["namespace"], body)["metadata"][
                "name"
            ]
        except ApiError:
            return ""

    def _pod_ended(self, ns: str, name: str, container: dict, code: int) -> None:
        patch = po.ended(container, code)
        try:
            self.store.patch("pods", ns, name, patch, "application/merge-patch", status_only=True)
        except ApiError:
            pass  # deleted with its Job meanwhile

    def _stuck_pod(self, job: dict, reason: str) -> None:
        self._pod(job, "Pending", *po.stuck(job, reason))

    def _finish(
        self,
        ns: str,
        name: str,
        spec: dict,
        *,
        ok: bool,
        reason: str,
        message: str = "",
        counts: dict | None = None,
    ) -> None:
        """The end of a Job in the controller's two steps: the interim condition (written with
        `counts`), then - every pod has terminated by now - the terminal one (with
        completionTime on success)."""
        if ok:
            reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        else:
            message = message or f"Job failed: {reason}"
        interim = po.job_condition("SuccessCriteriaMet" if ok else "FailureTarget", reason, message)
        self._status(ns, name, {"conditions": [interim], "active": 0, "ready": 0, **(counts or {})})
        time.sleep(self.settle)
        terminal = po.job_condition("Complete" if ok else "Failed", reason, message)
        status: dict = {"conditions": [interim, terminal], "terminating": 0}
        if ok:
            status["completionTime"] = terminal["lastTransitionTime"]
        self._status(ns, name, status)
        ttl = spec.get("ttlSecondsAfterFinished")
        if ttl is not None:
            threading.Timer(ttl, self._expire, args=(ns, name)).start()

    def _expire(self, ns: str, name: str) -> None:
        try:
            self.store.delete("jobs", ns, name, {"propagationPolicy": "Background"})
        except ApiError:
            pass

    def runs_of(self, name: str) -> list[int]:
        with self._lock:
            return [code for job, code in self.runs if job == name]
