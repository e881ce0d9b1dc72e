"""The Kubernetes backend's options, declared once: where the queue lives, and the worker pod.

Each field is a flag (`manager.declared.option`); the parse functions of `option_values.py`
turn what a person typed into typed values or a `UserError` naming the flag, so a bad value is
refused before any API call. `KubeQueue` names a queue (`--namespace`, `--queue`,
`--kubeconfig`) for `status` and `retry`; `KubeOptions` is everything a manager needs, and
builds the `PodOptions` of `objects.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...declared import option, split_words
from ...errors import UserError
from ...fleet.options import (
    drain_option,
    lease_option,
    ledger_option,
    needs_from_data_option,
    needs_option,
    node_labels_option,
    offers_option,
    prefers_option,
    spill_after_option,
)
from .manifests import objects as ko
from .manifests import validation as v
from .option_values import (
    BATCH_MOST,
    DURATION,
    EXIT_CODES,
    STRING,
    WHOLE,
    batch_size,
    exit_codes,
    pairs,
    pod_spec,
    queue_name,
    rate,
    seconds,
    seconds_or_zero,
    toleration,
    whole,
    whole_seconds,
    whole_seconds_or_zero,
)


def _namespace():
    return option(
        "--namespace", "namespace of the Jobs (required for kubernetes)", parse=v.dns_label
    )


def _queue():
    return option("--queue", "queue name: prefixes object names, labels them", parse=queue_name)


def _kubeconfig():
    return option(
        "--kubeconfig", "kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)"
    )


@dataclass(frozen=True)
class KubeQueue:
    """Which queue, in which cluster."""

    namespace: str | None = _namespace()
    queue: str | None = _queue()
    kubeconfig: str | None = _kubeconfig()
    ledger: str | None = ledger_option()

    def check(self) -> KubeQueue:
        if self.ledger and not self.namespace:  # `status` of a shared ledger: the database's
            return self
        if not self.namespace or not self.queue:
            raise UserError("--namespace and --queue are required with --backend kubernetes")
        return self


@dataclass(frozen=True)
class KubeOptions:
    namespace: str | None = _namespace()
    queue: str | None = _queue()
    kubeconfig: str | None = _kubeconfig()
    image: str | None = option(
        "--image",
        "worker image",
        parse=v.image,
        schema=STRING,
        chart="worker.image",
        crd="worker.image",
    )
    command: list[str] | None = option(
        "--command", 'container command, e.g. "thumbnail"', parse=split_words
    )
    args: list[str] | None = option(
        "--args", 'container args, e.g. "--width 320"', parse=split_words
    )
    env: dict[str, str] = pairs("--env", "worker environment", v.env_names)
    leader_elect: bool = option(
        "--leader-elect",
        "one manager per queue dispatches (a Lease); the others stand by",
        switch=True,
    )
    ledger: str | None = ledger_option()
    lease: float = lease_option()
    drain: bool | None = drain_option()
    offers: list = offers_option()
    offers_node_labels: list = node_labels_option()
    needs: list = needs_option()
    needs_from_data: bool = needs_from_data_option()
    prefers: object = prefers_option()
    spill_after: float = spill_after_option()
    orphan_age: float = option("--orphan-age", "", default=60.0, parse=seconds_or_zero, hidden=True)
    lease_duration: float = option("--lease-duration", "", default=15.0, parse=seconds, hidden=True)
    renew_deadline: float = option("--renew-deadline", "", default=10.0, parse=seconds, hidden=True)
    retry_period: float = option("--retry-period", "", default=2.0, parse=seconds, hidden=True)
    resync: float = option("--resync", "", default=300.0, parse=seconds, hidden=True)
    kube_api_qps: float = option(
        "--kube-api-qps",
        "API calls/s (default 20; 0: no limit)",
        default=20.0,
        parse=rate,
        chart="manager.kubeApiQps",
        schema={"type": "number", "minimum": 0},
    )
    kube_api_burst: int = option(
        "--kube-api-burst",
        "API burst (default 30)",
        default=30,
        parse=whole,
        chart="manager.kubeApiBurst",
        schema=WHOLE,
    )
    batch_size: int = option(
        "--batch-size",
        "dispatch up to K waiting items as one Indexed Job (default 1: one Job per item; "
        "Kubernetes 1.29+)",
        default=1,
        metavar="K",
        parse=batch_size,
        chart="manager.batchSize",
        crd="batchSize",
        schema={"type": "integer", "minimum": 1, "maximum": BATCH_MOST},
    )
    batch_wait: float = option(
        "--batch-wait",
        "how long a batch may wait for slots to free before it goes smaller (default 1s)",
        default=1.0,
        parse=seconds_or_zero,
        chart="manager.batchWait",
        schema=DURATION,
    )
    keep_succeeded: int | None = option(
        "--keep-succeeded",
        "succeeded Jobs kept (history)",
        parse=whole,
        schema=WHOLE,
        chart="manager.keepSucceeded",
        crd="keepSucceeded",
    )
    keep_failed: int | None = option(
        "--keep-failed",
        "failed Jobs kept (history)",
        parse=whole,
        schema=WHOLE,
        chart="manager.keepFailed",
        crd="keepFailed",
    )
    pvc: str | None = option(
        "--pvc", "the shared volume's PersistentVolumeClaim", parse=v.dns_subdomain
    )
    mount_path: str | None = option(
        "--mount-path",
        "where the shared volume is mounted (default /data)",
        parse=v.absolute_path,
    )
    volume_writable: bool = option(
        "--volume-writable", "mount the shared volume read-write in the worker pods", switch=True
    )
    service_account: str | None = option(
        "--service-account",
        "the worker pods' service account",
        parse=v.dns_subdomain,
        schema=STRING,
        chart="worker.serviceAccountName",
        crd="worker.serviceAccountName",
    )
    node_selector: dict[str, str] = pairs("--node-selector", "worker pods' node selector", v.labels)
    tolerations: list[dict[str, str]] = option(
        "--toleration",
        "worker pods' toleration",
        repeat=True,
        metavar="KEY[=VALUE]:EFFECT",
        parse=lambda given: [toleration(word) for word in given],
    )
    backoff_limit: int = option(
        "--backoff-limit",
        "pod retries inside a Job (default 0)",
        default=0,
        parse=whole,
        schema=WHOLE,
        chart="worker.backoffLimit",
    )
    active_deadline: int | None = option(
        "--active-deadline",
        "how long a Job may run, e.g. 30m",
        parse=whole_seconds,
        schema=DURATION,
        chart="worker.activeDeadlineSeconds",
        crd="timeout",
        chart_schema={"type": "integer", "minimum": 1},
    )
    ttl_after_finished: int | None = option(
        "--ttl-after-finished",
        "how long a finished Job stays, e.g. 1h (0: gone at once)",
        parse=whole_seconds_or_zero,
        schema=DURATION,
        chart="worker.ttlSecondsAfterFinished",
        chart_schema=WHOLE,
        crd="ttlAfterFinished",
    )
    cpu: str | None = option("--cpu", "the worker's CPU request, e.g. 500m", parse=v.quantity)
    memory: str | None = option(
        "--memory", "the worker's memory request, e.g. 256Mi", parse=v.quantity
    )
    cpu_limit: str | None = option(
        "--cpu-limit", "the worker's CPU limit, e.g. 2 (default: none)", parse=v.quantity
    )
    memory_limit: str | None = option(
        "--memory-limit", "the worker's memory limit, e.g. 1Gi (default: none)", parse=v.quantity
    )
    run_as_user: int | None = option(
        "--run-as-user",
        "the uid worker pods run as (default: the image's own user; never root)",
        parse=whole,
        schema=WHOLE,
        crd="worker.runAsUser",
    )
    fs_group: int | None = option(
        "--fs-group",
        "the worker pods' fsGroup: the group that may write the shared volume (e.g. 10001)",
        parse=whole,
        schema=WHOLE,
        crd="worker.fsGroup",
    )
    pod_spec: dict[str, Any] | None = option(
        "--pod-spec", "a partial pod spec (YAML) merged into the worker pod", parse=pod_spec
    )
    job_labels: dict[str, str] = pairs(
        "--job-label", "a label on every Job (e.g. team=media)", v.labels
    )
    job_annotations: dict[str, str] = pairs(
        "--job-annotation", "an annotation on every Job", v.annotations
    )
    stuck_timeout: float = option(
        "--stuck-timeout",
        "fail an item whose pod cannot start (image pull, configuration) for this long "
        "(default 10m; 0: never)",
        default=600.0,
        parse=seconds_or_zero,
        schema=DURATION,
        chart="manager.stuckTimeout",
        crd="stuckTimeout",
    )
    fail_fast_exit_codes: tuple[int, ...] = option(
        "--fail-fast-exit-codes",
        "worker exit codes that fail the item at once: no more pods, no more attempts (e.g. 2,3)",
        default=(),
        parse=exit_codes,
        schema={"type": "string", "pattern": "^[0-9]+(,[0-9]+)*$"},
        chart="worker.failFastExitCodes",
        crd="failFastExitCodes",
        chart_schema=EXIT_CODES,
        crd_schema=EXIT_CODES,
    )
    kueue_queue: str | None = option(
        "--kueue-queue",
        "hand the Jobs to Kueue: its LocalQueue (the Jobs are created suspended)",
        parse=v.label_value,
        schema=STRING,
        chart="worker.kueueQueue",
        crd="kueueQueue",
    )
    owner_deployment: str | None = option(
        "--owner-deployment",
        "the manager's Deployment: without the WorkQueue CRD it owns what the manager creates "
        "(with it, it owns the WorkQueue, which owns the rest) - deleting it cleans up",
        parse=v.label_value,
    )
    instance: str | None = option(
        "--instance",
        "app.kubernetes.io/instance of the Jobs and pods (the Helm release; default: the queue)",
        parse=v.label_value,
    )

    @property
    def where(self) -> KubeQueue:
        return KubeQueue(self.namespace, self.queue, self.kubeconfig, self.ledger).check()

    def pod(self) -> ko.PodOptions:
        if not self.image:
            raise UserError("--image is required with --backend kubernetes")
        # A request is what the scheduler reserves, a limit a cap: each only when given (a
        # request copied into a limit would throttle a worker that could use an idle core).
        wanted = {
            "requests": {"cpu": self.cpu, "memory": self.memory},
            "limits": {"cpu": self.cpu_limit, "memory": self.memory_limit},
        }
        resources = {
            kind: {k: v for k, v in amounts.items() if v}
            for kind, amounts in wanted.items()
            if any(amounts.values())
        } or None
        return ko.PodOptions(
            image=self.image,
            command=self.command,
            args=self.args,
            env=dict(self.env),
            resources=resources,
            pvc=self.pvc,
            mount_path=self.mount_path,
            read_only_volume=not self.volume_writable,
            service_account=self.service_account,
            node_selector=dict(self.node_selector) or None,
            tolerations=list(self.tolerations) or None,
            backoff_limit=self.backoff_limit,
            active_deadline_seconds=self.active_deadline,
            ttl_seconds_after_finished=self.ttl_after_finished,
            pod_spec_patch=self.pod_spec,
            job_labels=dict(self.job_labels),
            standard_labels=ko.standard_labels(self.instance or self.queue or "workqueue"),
            job_annotations=dict(self.job_annotations),
            kueue_queue=self.kueue_queue,
            fail_fast_exit_codes=list(self.fail_fast_exit_codes),
            fs_group=self.fs_group,
            run_as_user=self.run_as_user,
        )
