"""`workqueue manager --backend kubernetes`: flags, and the assembly of API client, Job cache,
durable record, backend and (with --leader-elect) the Lease.

    workqueue manager --backend kubernetes --source URL --namespace NS --queue NAME --image IMG
        [--command "CMD"] [--args "ARGS"] [--env K=V]… [--kubeconfig PATH] [--parallelism N]
        [--leader-elect] [--once] [--kube-api-qps 20] [--kube-api-burst 30]
        [--keep-succeeded N] [--keep-failed N] [--pvc NAME --mount-path PATH]
        [--service-account SA] [--node-selector K=V]… [--toleration KEY[=VALUE]:EFFECT]…
        [--backoff-limit N] [--active-deadline S] [--ttl-after-finished S]
        [--cpu REQUEST] [--memory REQUEST] [--pod-spec FILE.yaml]
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import socket

log = logging.getLogger("workqueue.manager")


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("kubernetes backend")
    g.add_argument("--namespace", help="namespace of the Jobs (required for kubernetes)")
    g.add_argument("--queue", help="queue name: prefixes object names, labels them")
    g.add_argument("--image", help="worker image")
    g.add_argument("--command", dest="kube_command", help='container command, e.g. "thumbnail"')
    g.add_argument("--args", dest="kube_args", help='container args, e.g. "--width 320"')
    g.add_argument("--env", action="append", default=[], metavar="K=V", help="worker env")
    g.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)"
    )
    g.add_argument(
        "--leader-elect",
        action="store_true",
        help="one manager per queue dispatches (a Lease); the others stand by",
    )
    g.add_argument("--orphan-age", type=float, default=60.0, help=argparse.SUPPRESS)
    g.add_argument("--lease-duration", type=float, default=15.0, help=argparse.SUPPRESS)
    g.add_argument("--renew-deadline", type=float, default=10.0, help=argparse.SUPPRESS)
    g.add_argument("--retry-period", type=float, default=2.0, help=argparse.SUPPRESS)
    g.add_argument("--kube-api-qps", type=float, default=20.0, help="API calls/s (0: no limit)")
    g.add_argument("--kube-api-burst", type=int, default=30, help="API burst (default 30)")
    g.add_argument("--keep-succeeded", type=int, help="succeeded Jobs kept (history)")
    g.add_argument("--keep-failed", type=int, help="failed Jobs kept (history)")
    g.add_argument("--pvc", help="the shared volume's PersistentVolumeClaim")
    g.add_argument("--mount-path", help="where the shared volume is mounted (default /data)")
    g.add_argument(
        "--volume-writable",
        action="store_true",
        help="mount the shared volume read-write in the worker pods",
    )
    g.add_argument("--service-account", help="the worker pods' service account")
    g.add_argument("--node-selector", action="append", default=[], metavar="K=V")
    g.add_argument("--toleration", action="append", default=[], metavar="KEY[=VALUE]:EFFECT")
    g.add_argument("--backoff-limit", type=int, default=0, help="pod retries inside a Job")
    g.add_argument("--active-deadline", type=int, help="seconds a Job may run")
    g.add_argument("--ttl-after-finished", type=int, help="seconds before a finished Job goes")
    g.add_argument("--cpu", help="CPU request (and limit), e.g. 500m")
    g.add_argument("--memory", help="memory request (and limit), e.g. 256Mi")
    g.add_argument("--pod-spec", help="a partial pod spec (YAML) merged into the worker pod")


def _pairs(values: list[str], flag: str, user_error) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise user_error(f"{flag} takes KEY=VALUE, got {value!r}")
        out[key] = val
    return out


def _toleration(text: str, user_error) -> dict:
    head, sep, effect = text.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise user_error(f"--toleration takes KEY[=VALUE]:EFFECT, got {text!r}")
    key, eq, value = head.partition("=")
    out = {"key": key, "effect": effect, "operator": "Equal" if eq else "Exists"}
    if eq:
        out["value"] = value
    return out


def pod_options(args, user_error):
    from .backends import kube_objects as ko

    if not args.image:
        raise user_error("--image is required with --backend kubernetes")
    resources = None
    if args.cpu or args.memory:
        amounts = {k: v for k, v in (("cpu", args.cpu), ("memory", args.memory)) if v}
        resources = {"requests": amounts, "limits": dict(amounts)}
    patch = None
    if args.pod_spec:
        import yaml

        try:
            with open(args.pod_spec, encoding="utf-8") as f:
                patch = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as exc:
            raise user_error(f"cannot read --pod-spec {args.pod_spec}: {exc}") from None
        if not isinstance(patch, dict):
            raise user_error(f"--pod-spec {args.pod_spec} is not a mapping (a partial pod spec)")
    return ko.PodOptions(
        image=args.image,
        command=shlex.split(args.kube_command) if args.kube_command else None,
        args=shlex.split(args.kube_args) if args.kube_args else None,
        env=_pairs(args.env, "--env", user_error),
        resources=resources,
        pvc=args.pvc,
        mount_path=args.mount_path,
        read_only_volume=not args.volume_writable,
        service_account=args.service_account,
        node_selector=_pairs(args.node_selector, "--node-selector", user_error) or None,
        tolerations=[_toleration(t, user_error) for t in args.toleration] or None,
        backoff_limit=args.backoff_limit,
        active_deadline_seconds=args.active_deadline,
        ttl_seconds_after_finished=args.ttl_after_finished,
        pod_spec_patch=patch,
    )


class KubeParts:
    """Everything the Kubernetes backend is made of, for one queue; `close()` stops it all."""

    def __init__(self, args, user_error, registry=None) -> None:
        from .backends import kube_objects as ko
        from .backends.kube_api import KubeApi, KubeError, load_configuration
        from .backends.kube_cache import JobCache
        from .backends.kube_record import ClusterLedger, RecordStore
        from .backends.kubernetes import KubernetesBackend

        if not args.namespace or not args.queue:
            raise user_error("--namespace and --queue are required with --backend kubernetes")
        try:
            ko.check_queue_name(args.queue)
        except ko.InvalidQueueName as exc:
            raise user_error(str(exc)) from None
        try:
            configuration = load_configuration(args.kubeconfig)
        except Exception as exc:  # the client raises several kinds for a missing config
            raise user_error(f"no Kubernetes configuration: {exc}") from None
        on_call = None
        if registry is not None:
            from prometheus_client import Histogram

            latency = Histogram(
                "workqueue_kube_api_seconds",
                "Kubernetes API call latency.",
                ["verb"],
                registry=registry,
            )
            on_call = lambda verb, kind, seconds: latency.labels(verb).observe(seconds)  # noqa: E731
        self.api = KubeApi(
            args.namespace,
            configuration,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            on_call=on_call,
        )
        self.record = RecordStore(self.api, args.queue)
        try:
            self.record.load()
        except KubeError as exc:
            raise user_error(f"cannot read the queue's record in {args.namespace}: {exc}") from None
        pod = pod_options(args, user_error)
        self.cache = JobCache(
            self.api,
            ko.queue_selector(args.queue),
            on_change=lambda kind, job: self.backend.on_job_change(kind, job),
        )
        self.backend = KubernetesBackend(
            self.api,
            args.queue,
            pod,
            self.cache,
            self.record,
            keep_succeeded=args.keep_succeeded,
            keep_failed=args.keep_failed,
            registry=registry,
        )
        self.cache.start()
        if not self.cache.synced.wait(60):
            raise user_error(f"cannot list Jobs in {args.namespace} (is the API reachable?)")
        self.ledger = ClusterLedger(args.queue, self.cache, self.record)
        removed = self.backend.clean_orphans(args.orphan_age)
        if removed:
            log.warning("removed %d ConfigMap(s) left without their Job", removed)
        self.elector = None
        if args.leader_elect:
            from .backends.kube_leader import LeaderElector

            identity = f"{socket.gethostname()}-{os.getpid()}"
            self.elector = LeaderElector(
                self.api,
                f"{args.queue}-leader",
                identity,
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
            )

    def close(self) -> None:
        if self.elector is not None:
            self.elector.stop()
        self.cache.stop()
        self.api.close()


def retry_item(args, user_error) -> int:
    """`workqueue retry NAME --backend kubernetes`: out of the record, its Job deleted; the
    next pass of the queue's manager runs it again."""
    from .backends import kube_objects as ko
    from .backends.kube_api import KubeApi, load_configuration
    from .backends.kube_cache import JobCache
    from .backends.kube_record import RecordStore
    from .backends.kubernetes import KubernetesBackend

    if not args.namespace or not args.queue:
        raise user_error("--namespace and --queue are required with --backend kubernetes")
    try:
        configuration = load_configuration(args.kubeconfig)
    except Exception as exc:
        raise user_error(f"no Kubernetes configuration: {exc}") from None
    api = KubeApi(args.namespace, configuration)
    try:
        record = RecordStore(api, args.queue)
        record.load()
        backend = KubernetesBackend(
            api,
            args.queue,
            ko.PodOptions(image="-"),
            JobCache(api, ko.queue_selector(args.queue)),
            record,
        )
        known = record.get(ko.item_hash(args.queue, args.name))
        if not backend.retry(args.name):
            raise user_error(f"{args.name!r} is still running: nothing to retry")
        if known is None:
            print(f"{args.name}: not in the record of queue {args.queue}; nothing to undo")
        else:
            print(f"{args.name}: was {known[0]}; the queue's manager will run it again")
    finally:
        api.close()
    return 0
