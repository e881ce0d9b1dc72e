"""Signals that stop a command: the same three everywhere, and one line when they come early.

SIGTERM (a supervisor, `kill`), SIGINT (Ctrl-C) and SIGHUP (the terminal closed) all mean
"stop". Once a manager runs, `manager_cmd.install_signal_handlers` turns them into its graceful
stop (running work gets its grace period). Before that - while a command imports, opens its
source and its ledger, takes back what a manager that died left - they end the command here:
`stop_early()` makes each raise `Interrupted`, which `main` turns into one line (what stopped
it, and that nothing ran) and the exit code a shell expects, 128 + the signal's number - never
a traceback, never a silent exit.
"""

from __future__ import annotations

import signal
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(BaseException):
    """A stop signal came before the command installed its own handling."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def _raise(signum, _frame) -> None:
    raise Interrupted(signum)


def stop_early() -> None:
    """From now until a command installs its own handlers, a stop signal raises `Interrupted`
    (in the main thread; elsewhere signals cannot be handled)."""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, _raise)


def said(subcommand: str | None, stopped: Interrupted, *, runs_work: bool) -> str:
    """The one line for a command stopped early."""
    what = f"workqueue {subcommand}" if subcommand else "workqueue"
    if runs_work:
        return f"{what}: stopped by {stopped.name} while starting: nothing ran"
    return f"{what}: stopped by {stopped.name}"
