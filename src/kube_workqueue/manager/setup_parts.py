"""What a backend package is given to set up one manager, and what it gives back: the data the
ports' users exchange at assembly (`manager.assembly`; `manager.backends.BackendPackage.setup`,
`manager.fleet.joining.join`), apart from the ports themselves (`ports.py`).

    ManagerSeeds  what a backend may read of the manager it is set up for
    Parts         its ledger, backend, elector, and how to close and fence them
    SharesALedger a backend package whose managers can share a ledger (`--ledger`)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .ports import Backend, Elector, Ledger


@dataclass(frozen=True)
class ManagerSeeds:
    """What a backend may read of the manager it is set up for (`BackendPackage.setup`): where
    its metrics go (None: nowhere), its parallelism at start, its attempts per item, the
    credentials its workers must not inherit. A backend
    takes what it needs - the local one none; the cluster's seeds its WorkQueue and sizes its
    connection pool with the parallelism, and gives an Indexed Job's items as many retries."""

    registry: Any = None  # a prometheus_client CollectorRegistry
    parallelism: int = 1
    max_attempts: int = 3
    retry_backoff: tuple[float, float] = (1.0, 300.0)  # a failed item's first wait, and cap
    # the credentials the queue's sources and cloud clients read from the environment: a
    # local worker never inherits them (`--worker-env` names one it may have)
    credentials: frozenset[str] = frozenset()


@dataclass
class Parts:
    """What a backend package sets up for one manager: its ledger, its backend, a leader
    elector when it has one, and `close()` that stops them all."""

    ledger: Ledger
    backend: Backend
    close: Callable[[], None]
    elector: Elector | None = None
    # `fence(timeout)`: from now on nothing of these parts writes to what other managers read
    # (the API, a shared ledger), writes in flight waited for; whether they all ended in time
    fence: Callable[[float], bool] = lambda timeout: True


@runtime_checkable
class SharesALedger(Protocol):
    """A backend package whose managers can share a ledger (`--ledger`): both backends here
    are; one that is not is refused with one line when a ledger is given."""

    def fleet_runner(self, options: Any, seeds: ManagerSeeds) -> Any:
        """The runner of a manager on a shared ledger, for `manager.fleet.joining.join`: a
        `FleetRunner` - the backend, its name in the claims, and the one start hook that
        settles what that name held."""
