"""The manager's own HTTP endpoint (`--metrics-port`): /metrics for Prometheus, /stats for the
stability calculator (`workqueue stability --from-url`), /healthz, and the live dashboard at /
(`manager.views.dashboard`, which keeps its own access rules; the other three are always open).

/stats is JSON: {"span": seconds measured, "arrival_times": [...], "service_seconds": [...],
"parallelism": P} - the raw samples of the manager's sliding window, so the calculator computes
exactly what it computes from a ledger. Served by waitress from threads of the manager; the
assembly stops it when the manager is closed.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .threaded_server import ThreadedServer


class StatsServer:
    def __init__(
        self, stats: Callable[[], dict], registry, host: str, port: int, dashboard=None
    ) -> None:
        """`stats()` gives the /stats body (the manager's `stats`); `dashboard` a WSGI app for
        / and /ui/ (`manager.views.dashboard.Dashboard`), if any. Raises OSError when the address
        cannot be bound."""
        self.stats = stats
        self.registry = registry
        self.dashboard = dashboard
        self._server = ThreadedServer.serve(
            self._app, host, port, threads=4, name="workqueue-stats"
        )
        self.port = self._server.port

    def _app(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
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
