"""LISTEN for the shared line's notifications (`workqueue_line`: items may be claimable; the
payload, when there is one, names whose turn the first new item is), on a connection of its
own, reconnecting after an outage - and telling the callbacks then too, since what changed
meanwhile was not notified.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .database import Database


class Notifier:
    """LISTENs for `workqueue_line` on a connection of its own (`db`, used by nothing else)
    and calls its callbacks on each notification (and after a reconnect: what changed
    meanwhile was not notified). It never stops listening until `stop`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.callbacks: list[Callable[[str], None]] = []
        self._stopped = threading.Event()
        self._conn = None

    def start(self) -> Notifier:
        threading.Thread(target=self._run, name="line-notifications", daemon=True).start()
        return self

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._conn = self.db.connect()
                self._conn.execute("LISTEN workqueue_line")
                self._tell("")
                while not self._stopped.is_set():
                    for notice in self._conn.notifies(timeout=1.0, stop_after=1):
                        self._tell(notice.payload)
            except Exception:  # the database went away: listen again when it is back
                self._close()
                self._stopped.wait(1.0)
        self._close()

    def _tell(self, payload: str) -> None:
        for callback in self.callbacks:
            callback(payload)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def stop(self) -> None:
        self._stopped.set()
