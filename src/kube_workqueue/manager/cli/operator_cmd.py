"""`workqueue operator`: one process that runs every WorkQueue (workqueue.dev/v1beta1) of the
namespaces it watches (`manager.operator`).

    workqueue operator --namespace media [--namespace batch]… | --all-namespaces
                       [--image IMG] [--kubeconfig FILE] [--ambassador-url TEMPLATE]

It runs until SIGTERM or SIGINT; then every queue's manager stops (their running Jobs run on:
the next operator adopts them) and it exits 0. No kubeconfig, an API that cannot be reached,
or a WorkQueue CRD not installed: one line, exit 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from ..errors import UserError
from .interrupts import STOP_SIGNALS

log = logging.getLogger(__name__)


def namespace_name(text: str) -> str:
    from ..backends.kubernetes.manifests.validation import dns_label

    try:
        return dns_label(text)
    except Exception:
        raise argparse.ArgumentTypeError(f"not a namespace name: {text!r}") from None


def _checked(parse, what: str):
    """An argparse type from a check that raises `UserError` or `ValueError` (its message:
    argparse names the flag); `what` names the type in argparse's own messages."""

    def typed(text: str):
        try:
            return parse(text)
        except (UserError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = what
    return typed


def _image(text: str) -> str:
    from ..backends.kubernetes.manifests.validation import image

    return image(text)


def _whole(least: int, most: int):
    def parse(text: str) -> int:
        if not text.strip().isdigit() or not least <= int(text) <= most:
            raise ValueError(f"give a whole number from {least} to {most}, not {text!r}")
        return int(text)

    return parse


def _qps(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"calls a second are a finite number >= 0 (0: no limit), not {text!r}")
    return value


def _ambassador_url(template: str) -> str:
    from urllib.parse import urlsplit

    try:
        url = template.format(service="s", namespace="n", port=1)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{template!r} is not a template of {{service}}, {{namespace}}, "
                         f"{{port}} ({exc})") from None  # fmt: skip
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        raise ValueError(f"{template!r} does not make a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{template!r} does not make an http(s):// URL with a host")
    return template


def _health_host(text: str) -> str:
    import socket

    try:
        socket.getaddrinfo(text, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"not an address this machine can bind: {text!r} ({exc})") from None
    return text


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "operator",
        help="run every WorkQueue of some namespaces (or all) from one process",
        description="Watch WorkQueues (workqueue.dev/v1beta1) and run each: its ambassador "
        "(a Deployment + Service, for a bucket, a Redis key, a stream or a folder on a "
        "PersistentVolumeClaim) and its manager (in this process: one Job per item).",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--namespace",
        action="append",
        type=namespace_name,
        dest="namespaces",
        metavar="NS",
        help="watch WorkQueues in this namespace (repeatable)",
    )
    where.add_argument(
        "--all-namespaces", action="store_true", help="watch WorkQueues in every namespace"
    )
    p.add_argument(
        "--kubeconfig", help="a kubeconfig file (default: in-cluster, else KUBECONFIG/~/.kube)"
    )
    p.add_argument(
        "--image",
        type=_checked(_image, "--image"),
        default=os.environ.get("WORKQUEUE_IMAGE", "ghcr.io/kube-workqueue/workqueue:latest"),
        help="the image of the queues' ambassadors (default: WORKQUEUE_IMAGE, the chart sets "
        "it to the operator's own)",
    )
    p.add_argument(
        "--ambassador-url",
        type=_checked(_ambassador_url, "--ambassador-url"),
        default="http://{service}.{namespace}.svc:{port}",
        metavar="TEMPLATE",
        help="how the operator reaches a queue's ambassador (default "
        "http://{service}.{namespace}.svc:{port}; outside the cluster, through `kubectl proxy`: "
        "http://127.0.0.1:8001/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy)",
    )
    p.add_argument(
        "--kube-api-qps",
        type=_checked(_qps, "--kube-api-qps"),
        default=20.0,
        help="API calls/s of each queue's manager (default 20; 0: no limit)",
    )
    p.add_argument(
        "--workers",
        type=_checked(_whole(1, 64), "--workers"),
        default=4,
        help="WorkQueues reconciled at once (default 4)",
    )
    lease = p.add_mutually_exclusive_group()
    lease.add_argument(
        "--lease",
        metavar="NAMESPACE/NAME",
        default=_default_lease(),
        help="the Lease the operator holds while it runs queues: a second operator stands by "
        "(default POD_NAMESPACE/workqueue-operator in a pod; none elsewhere)",
    )
    p.add_argument(
        "--health-port",
        type=_checked(_whole(1, 65535), "--health-port"),
        metavar="PORT",
        help="serve /healthz (its watches and reconcilers run) and /readyz (it leads, or "
        "stands by) on this port (a pod's probes)",
    )
    p.add_argument(
        "--health-host",
        type=_checked(_health_host, "--health-host"),
        default="127.0.0.1",
        help="the address --health-port binds (default 127.0.0.1; 0.0.0.0 in a pod)",
    )
    lease.add_argument("--no-lease", action="store_true",
                   help="run without a Lease (one operator only)")  # fmt: skip
    p.set_defaults(func=run_operator)


def _default_lease() -> str:
    namespace = os.environ.get("POD_NAMESPACE")
    return f"{namespace}/workqueue-operator" if namespace else ""


def _lease(args) -> tuple[str, str] | None:
    text = args.lease
    if args.no_lease or not text:
        return None
    namespace, _, name = text.partition("/")
    try:
        namespace_name(namespace), namespace_name(name)
    except argparse.ArgumentTypeError:
        raise UserError(f"--lease wants NAMESPACE/NAME (DNS labels): {text!r}") from None
    return namespace, name


def _serve_health(host: str, port: int, operator):
    """/healthz and /readyz for a pod's probes, served from threads as the manager's stats
    endpoint is (`views.threaded_server`); `Operator.healthy` answers /healthz."""
    from ..views.threaded_server import ThreadedServer

    def probes(environ, start_response):
        path = environ.get("PATH_INFO")
        if path not in ("/healthz", "/readyz"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        # /readyz: leading or standing by, either way where it should be
        ok = operator.healthy() if path == "/healthz" else True
        start_response("200 OK" if ok else "503 Service Unavailable",
                       [("Content-Type", "text/plain")])  # fmt: skip
        return [b"ok\n" if ok else b"unhealthy\n"]

    try:
        return ThreadedServer.serve(probes, host, port, threads=2, name="operator-health")
    except OSError as exc:
        raise UserError(f"--health-port {host}:{port}: {exc.strerror}") from None


def run_operator(args) -> int:
    from ..backends.kubernetes.client.api import KubeApi, KubeError
    from ..backends.kubernetes.parts import configuration, one_line_of
    from ..operator.queue_spec import Settings
    from ..operator.reconciler import Operator

    lease = _lease(args)
    settings = Settings(
        kubeconfig=args.kubeconfig,
        image=args.image,
        ambassador_url=args.ambassador_url,
        kube_api_qps=args.kube_api_qps,
    )
    config = configuration(args.kubeconfig)
    namespaces = None if args.all_namespaces else list(dict.fromkeys(args.namespaces))
    probe = KubeApi(namespaces[0] if namespaces else None, config, retries=1)
    try:
        if not probe.served("workqueues.v1beta1"):
            raise UserError("the WorkQueue CRD (workqueue.dev/v1beta1) is not installed: "
                            "kubectl apply -f charts/workqueue/crds/")  # fmt: skip
    except KubeError as exc:
        raise UserError(f"cannot reach the Kubernetes API: {one_line_of(exc)}") from None
    finally:
        probe.close()
    config.connection_pool_maxsize = 32  # the reconcilers, the caches, the Lease
    operator = Operator(namespaces, settings, config, workers=max(1, args.workers), lease=lease)
    stopping = threading.Event()
    got: dict[str, int] = {}

    def handler(signum, _frame):
        got["signal"] = signum
        stopping.set()

    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, handler)
    health = None
    if args.health_port is not None:
        health = _serve_health(args.health_host, args.health_port, operator)
    try:
        if operator.lead(stopping):
            operator.start()
            log.info("operator: watching WorkQueues in %s",
                     ", ".join(namespaces) if namespaces else "every namespace")  # fmt: skip
            while not stopping.wait(0.5) and not operator.lost.is_set():
                pass
    finally:
        operator.stop()
        if health is not None:
            health.stop()
    if operator.lost.is_set():
        log.error("operator: lost its Lease; exiting so a new candidate can lead")
        return 1
    log.info("operator: stopped (%s)", signal.Signals(got.get("signal", 15)).name)
    return 0
