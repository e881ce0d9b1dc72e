"""One worker of a keeper, as the manager sees it: `KeptChild`, with the face of a child process
(`wait`, `exited_within`, `done`, `signal_group`, `end`), so the runner treats a worker it
started and one it adopted from a dead manager's keeper alike (`kept.KeeperLink` makes both).

Its end arrives once, from the link's reader thread (`_end`, the keeper's `Ended` message or a
lost keeper's verdict); every field is written before `_done` is set, and read only after it
is: a caller that saw `done` (or whose `wait` returned) reads the whole end. A signal is asked
of the keeper, never sent here - the worker is the keeper's child, and only the keeper knows
whether it has been reaped (a pid no longer its own is never signalled).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Protocol


class Link(Protocol):
    """What a child and its holders ask of the link that made it (`kept.KeeperLink`; not
    imported here - the link imports its children)."""

    running: int

    def signal(self, ident: int, sig: int) -> bool: ...
    def ack(self, ident: int) -> None: ...
    def close(self, wait: float = ...) -> None: ...


class KeptChild:
    """One worker of a keeper. `returncode` once it ended (negative: the signal, as
    `Popen.returncode`); `error` when it never started or its end was lost; `began` and
    `ended` are wall-clock times from the keeper."""

    def __init__(self, link: Link, ident: int, began: float | None = None) -> None:
        self.link = link
        self.id = ident
        self.returncode: int | None = None
        self.error: str | None = None
        self.began = began
        self.ended: float | None = None
        self.refused: tuple[str, int | None] | None = None
        self.interrupted = False
        self._done = threading.Event()

    def _end(self, message: dict) -> None:
        self.returncode = message.get("code")
        self.error = message.get("error")
        # a start refused: "log" (the state directory's disk) or "program", with the errno
        self.refused = None
        if message.get("refused"):
            self.refused = (message["refused"], message.get("errno"))
        # ended by its shim because the manager that started it died (a shared ledger's
        # worker, watched here after its keeper died too): not the item's failure
        self.interrupted = bool(message.get("interrupted"))
        self.began = message.get("began", self.began)
        self.ended = message.get("at") or time.time()
        self._done.set()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once it ended; None if still running after `timeout` s (or if it
        never started: see `error`)."""
        self._done.wait(timeout)
        return self.returncode

    def exited_within(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def signal_group(self, sig: int) -> bool:
        """Ask the keeper to signal the worker's process group (it does only while the worker
        is not reaped). False when it has already ended."""
        if self._done.is_set():
            return False
        return self.link.signal(self.id, sig)

    def end(self, grace: float) -> None:
        """SIGTERM the group; SIGKILL it if the worker has not exited `grace` s later."""
        if self.signal_group(signal.SIGTERM) and not self.exited_within(grace):
            self.signal_group(signal.SIGKILL)
