"""The manager's own HTTP endpoint (`--metrics-port`): /metrics for Prometheus, /stats for the
stability calculator (`workqueue stability --from-url`), /healthz.

/stats is JSON: {"span": seconds measured, "arrival_times": [...], "service_seconds": [...],
"parallelism": P} - the raw samples of the manager's sliding window, so the calculator computes
exactly what it computes from a ledger. Served by waitress from threads of the manager.
"""

from __future__ import annotations

import json
import threading

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


class StatsServer:
    def __init__(self, manager, registry, host: str, port: int) -> None:
        from waitress import create_server

        self.manager = manager
        self.registry = registry
        self._server = create_server(
            self._app, host=host, port=port, threads=2, ident="workqueue-manager"
        )
        self.port = int(self._server.effective_port)
        self._thread = threading.Thread(target=self._server.run, name="stats", daemon=True)
        self._thread.start()

    def _app(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body, ctype, status = generate_latest(self.registry), CONTENT_TYPE_LATEST, "200 OK"
        elif path == "/stats":
            stats = self.manager.window.snapshot()
            stats["parallelism"] = self.manager.capacity.limit
            body, ctype, status = json.dumps(stats).encode(), "application/json", "200 OK"
        elif path == "/healthz":
            body, ctype, status = b"ok\n", "text/plain", "200 OK"
        else:
            body, ctype, status = b"not found\n", "text/plain", "404 Not Found"
        start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
        return [body]

    def stop(self) -> None:
        for dispatcher in list(self._server._map.values()):
            dispatcher.close()
        self._server.task_dispatcher.shutdown()
        self._thread.join(timeout=5)
