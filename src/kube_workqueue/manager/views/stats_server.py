"""The manager's own HTTP endpoint (`--metrics-port`): /metrics for Prometheus, /stats for the
stability calculator (`workqueue stability --from-url`), /healthz, and the live dashboard at /
(`manager.views.dashboard`, which keeps its own access rules; the other three are always open
to a request whose Host is an address, localhost or a name given with --allowed-host: any
other name is refused with 421, the DNS-rebinding guard, `host_allowed`).

/stats is JSON: {"span": seconds measured, "arrival_times": [...], "service_seconds": [...],
"parallelism": P} - the raw samples of the manager's sliding window, so the calculator computes
exactly what it computes from a ledger. Served by waitress from threads of the manager; the
assembly stops it when the manager is closed.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .threaded_server import ThreadedServer


def host_of(header: str) -> str:
    """The host name of a `Host` header (`name:port`, `[::1]:port`), lowercased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header: str, names: frozenset[str]) -> bool:
    """Whether a request's `Host` names this endpoint as a browser on this machine, a scraper
    or a probe would: an address (any IP literal - Prometheus and the kubelet use the pod's),
    `localhost`, or a name configured with `--allowed-host`. Anything else is a name someone
    else's DNS points here: DNS rebinding (a page of evil.example re-resolved to 127.0.0.1
    reads the dashboard with the browser's own access), which Jupyter and others refuse the
    same way. No Host at all (HTTP/1.0 clients) is the address itself."""
    name = host_of(header)
    if not name or name == "localhost" or name.endswith(".localhost") or name in names:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class StatsServer:
    def __init__(
        self,
        stats: Callable[[], dict],
        registry,
        host: str,
        port: int,
        dashboard=None,
        *,
        allowed_hosts: frozenset[str] = frozenset(),
    ) -> None:
        """`stats()` gives the /stats body (the manager's `stats`); `dashboard` a WSGI app for
        / and /ui/ (`manager.views.dashboard.Dashboard`), if any; `allowed_hosts` the names
        besides addresses and localhost that a request's Host may give (`host_allowed`).
        Raises OSError when the address cannot be bound."""
        self.stats = stats
        self.registry = registry
        self.dashboard = dashboard
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        self._server = ThreadedServer.serve(
            self._app, host, port, threads=4, name="workqueue-stats"
        )
        self.port = self._server.port

    def _app(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if not host_allowed(environ.get("HTTP_HOST", ""), self.allowed_hosts):
            body = (
                f"421 Misdirected Request: this manager does not answer to the host name "
                f"{host_of(environ.get('HTTP_HOST', ''))!r} (--allowed-host NAME)\n"
            ).encode()
            start_response("421 Misdirected Request",
                           [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body)))])  # fmt: skip
            return [body]
        if self.dashboard is not None and self.dashboard.serves(path):
            return self.dashboard(environ, start_response)
        if path == "/metrics":
            body, ctype, status = generate_latest(self.registry), CONTENT_TYPE_LATEST, "200 OK"
        elif path == "/stats":
            body, ctype, status = json.dumps(self.stats()).encode(), "application/json", "200 OK"
        elif path == "/healthz":
            body, ctype, status = b"ok\n", "text/plain", "200 OK"
        else:
            body, ctype, status = b"not found\n", "text/plain", "404 Not Found"
        start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
        return [body]

    def stop(self) -> None:
        self._server.stop()
