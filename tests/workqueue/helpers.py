"""Shared helpers for the workqueue tests."""

from __future__ import annotations

import threading
import time


def eventually(predicate, timeout: float = 5.0) -> None:
    """Wait (briefly polling) until `predicate()` holds: for effects of a background thread that
    a FakeClock step has triggered. Never used to let time pass."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.001)


def in_thread(fn, *args) -> threading.Thread:
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t
