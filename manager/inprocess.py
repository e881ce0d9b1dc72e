"""An ambassador served in-process for `workqueue run`: the one place manager/ starts one.

`workqueue run DIR -- CMD` needs a source for the manager to poll; it serves the ambassador app
on a free loopback port from a thread of this process, for the length of the run. Gunicorn
cannot run inside another program (it forks and takes over signals), so werkzeug's threaded WSGI
server carries it here: bound to 127.0.0.1 only, with one client (this manager). The standalone
`workqueue ambassador` always uses gunicorn.
"""

from __future__ import annotations

import threading
import time

from werkzeug.serving import WSGIRequestHandler, make_server


class _KeepAliveHandler(WSGIRequestHandler):
    """HTTP/1.1, so the manager's session reuses one connection for every request."""

    protocol_version = "HTTP/1.1"


class FolderServer:
    def __init__(self, app, server) -> None:
        self.app = app
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_port}"
        self._thread = threading.Thread(target=server.serve_forever, name="ambassador", daemon=True)
        self._thread.start()

    @property
    def source(self):
        return self.app.extensions["workqueue.source"]

    def wait_settled(self, timeout: float | None = None) -> None:
        """Wait until no file is still settling, so the first listing holds every file that
        was there when the run began (a file still being copied is waited for)."""
        source = self.source
        deadline = None if timeout is None else time.monotonic() + timeout
        while source.snapshot.pending_names():
            if deadline is not None and time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self.source.stop()


def serve_folder(
    root: str, suffixes: list[str], *, recursive: bool = False, settle: float = 2.0
) -> FolderServer:
    from ambassador import create_app

    app = create_app({"ROOT": root, "SUFFIXES": suffixes, "RECURSIVE": recursive, "SETTLE": settle})
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_KeepAliveHandler)
    return FolderServer(app, server)
