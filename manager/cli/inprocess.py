"""An ambassador served in-process for `workqueue run`: the one place manager/ starts one.

`workqueue run DIR -- CMD` needs a source for the manager to poll; it serves the ambassador app
on a free loopback port from threads of this process (`manager.threaded_server`: waitress), for
the length of the run. Waitress keeps connections alive, so the manager's session fetches every
item over one connection (werkzeug's development server closes each one, which made a TCP
handshake part of every item). Bound to 127.0.0.1 only.
"""

from __future__ import annotations

import time

from ..threaded_server import ThreadedServer


class FolderServer:
    def __init__(self, app, server) -> None:
        """Serve `app` through `server` (a waitress server made for it) from a thread."""
        self.app = app
        self._serving = ThreadedServer(server, name="ambassador")
        self._thread = self._serving.thread
        self.url = f"http://127.0.0.1:{self._serving.port}"

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
        self._serving.stop()
        self.source.stop()


def serve_folder(
    root: str,
    suffixes: list[str],
    *,
    recursive: bool = False,
    settle: float = 2.0,
    version_by: str = "stat",
) -> FolderServer:
    from waitress import create_server

    from ambassador import create_app

    app = create_app(
        {
            "ROOT": root,
            "SUFFIXES": suffixes,
            "RECURSIVE": recursive,
            "SETTLE": settle,
            "VERSION_BY": version_by,
        }
    )
    server = create_server(app, host="127.0.0.1", port=0, threads=4, ident="workqueue")
    return FolderServer(app, server)
