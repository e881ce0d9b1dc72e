"""The backends, by name: where one unit of work per item runs.

Each backend is a package here with the same face (see `Backend` below): its typed options,
`setup()` that builds a manager's ledger and runner (and recovers what an earlier manager left),
and `status()` / `item_detail()` / `retry()` for the commands that act on a queue's record.
The command line offers `--backend` from `NAMES`, builds its flags from each backend's option
declarations, and dispatches through `load(name)`. Adding a backend is one package beside
these two, and one line in `_PACKAGES`.

A backend package is imported only when it is chosen, so a local run never imports the
`kubernetes` client.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from ..ports import Parts, QueueRecord

_PACKAGES = {
    "local": "manager.backends.local",
    "kubernetes": "manager.backends.kubernetes",
}
NAMES = tuple(_PACKAGES)
DEFAULT = "local"


class Backend(Protocol):
    """The face of a backend package."""

    Options: type  # a dataclass of `manager.declared.option` fields: what a manager needs
    Queue: type  # the same, for naming a queue: what `status` and `retry` need

    def setup(self, options: Any, *, registry: Any = None) -> Parts: ...

    def status(self, queue: Any, *, listed: list[str] | None = None) -> QueueRecord:
        """What the queue's record says; `listed` (the source's names) lets a record keyed by
        hash (Kubernetes) name its items."""

    def item_detail(self, queue: Any, name: str, record: QueueRecord) -> dict:
        """What `workqueue status NAME` adds for one item (a log tail, a pod's state)."""

    def retry(self, queue: Any, name: str) -> str: ...

    def pause(self, queue: Any) -> str:
        """Hold the queue (see `Ledger.paused_since`); a line for people."""

    def resume(self, queue: Any) -> str: ...

    def retry_many(
        self, queue: Any, *, matching: str | None = None, listed: list[str] | None = None
    ) -> list[str]:
        """Every failed item (whose name matches the glob `matching`) run again; their names."""


def load(name: str) -> Backend:
    """The backend package called `name` (one of `NAMES`)."""
    return importlib.import_module(_PACKAGES[name])  # type: ignore[return-value]
