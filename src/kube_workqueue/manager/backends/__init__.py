"""The backends, by name: where one unit of work per item runs.

Each backend is a package here with the same face (see `BackendPackage` below): its typed
options, `setup()` that builds a manager's ledger and runner (and recovers what an earlier
manager left), `fleet_runner()` that builds the runner alone for a ledger the assembly brings
(`manager.fleet.joining`), `queue_ops()` for the commands that act on a queue's record
(`queue_ops.py`: the rules every backend shares, the hooks each fills) and `measured_record()`
for the planning commands' `--from-state`.
The command line offers `--backend` from `NAMES`, builds its flags from each backend's option
declarations, and dispatches through `load(name)`. Adding a backend is one package beside
these two, and one line in `_PACKAGES`.

The command line reads every backend's option declarations (light modules); what a backend
needs to run - for Kubernetes, the `kubernetes` client - is imported only when it is chosen,
so a local run never imports that client.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from ..items import QueueRecord
from ..queue_ops import QueueOps
from ..setup_parts import ManagerSeeds, Parts

_PACKAGES = {
    "local": "kube_workqueue.manager.backends.local",
    "kubernetes": "kube_workqueue.manager.backends.kubernetes",
}
NAMES = tuple(_PACKAGES)
DEFAULT = "local"


class BackendPackage(Protocol):
    """The face of a backend package (and, to share a ledger, `manager.ports.SharesALedger`)."""

    Options: type  # a dataclass of `manager.declared.option` fields: what a manager needs
    Queue: type  # the same, for naming a queue: what `status` and `retry` need

    def setup(self, options: Any, seeds: ManagerSeeds) -> Parts:
        """A manager's ledger, backend (and elector), what an earlier manager left recovered;
        the caller's duty: `Parts.close()`. `seeds`: what the backend may read of the manager
        (its metrics registry, parallelism and attempts)."""

    def queue_ops(self, queue: Any) -> QueueOps:
        """What `status`, `retry`, `pause` and `resume` do to the queue's record (one shape
        for every backend: `manager.queue_ops`); a context manager."""

    def measured_record(self, queue: Any) -> QueueRecord:
        """The queue's record as `--from-state` measures it (`stability`, `simulate`,
        `plan`): its rows, and whether their first-seen times are arrivals."""


def load(name: str) -> BackendPackage:
    """The backend package called `name` (one of `NAMES`)."""
    return importlib.import_module(_PACKAGES[name])  # type: ignore[return-value]
