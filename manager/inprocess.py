"""An ambassador served in-process for `workqueue run`: the one place manager/ starts one.

`workqueue run DIR -- CMD` needs a source for the manager to poll; it serves the ambassador app
on a free loopback port from threads of this process, for the length of the run. Gunicorn cannot
run inside another program (it forks and takes over signals), so waitress carries it here: a
production WSGI server that lives in threads and keeps connections alive, so the manager's
session fetches every item over one connection (werkzeug's development server closes each one,
which made a TCP handshake part of every item). Bound to 127.0.0.1 only.
"""

from __future__ import annotations

import threading
import time


class FolderServer:
    def __init__(self, app, server) -> None:
        self.app = app
        self._server = server
        self.url = f"http://127.0.0.1:{int(server.effective_port)}"
        self._thread = threading.Thread(target=server.run, name="ambassador", daemon=True)
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
        server = self._server

        # waitress's loop runs until its socket map is empty. Closing the listener, every open
        # (keep-alive) connection and the trigger from the loop's own thread - a thunk run when
        # the trigger is pulled - wakes the loop at once; closing them from here would leave it
        # asleep in select() for up to a second (its loop timeout), the tail of every run.
        def close_all() -> None:
            for dispatcher in list(server._map.values()):
                dispatcher.close()

        server.trigger.pull_trigger(close_all)
        self._thread.join(timeout=5)
        if self._thread.is_alive():  # the loop did not run the thunk: close from here
            close_all()
        server.task_dispatcher.shutdown()
        self._thread.join(timeout=5)
        self.source.stop()


def serve_folder(
    root: str, suffixes: list[str], *, recursive: bool = False, settle: float = 2.0
) -> FolderServer:
    from waitress import create_server

    from ambassador import create_app

    app = create_app({"ROOT": root, "SUFFIXES": suffixes, "RECURSIVE": recursive, "SETTLE": settle})
    server = create_server(app, host="127.0.0.1", port=0, threads=4, ident="workqueue")
    return FolderServer(app, server)
