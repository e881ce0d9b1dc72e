"""One ledger under the contract, and its caller's duties: `Subject` does for a ledger what its
manager would do around the port - a ledger that `ClaimsWork` is claimed before it starts an
item, reopened as the next manager's start reopens it - and nothing else: every rule the
contract checks is the ledger's own.

A ledger whose manager does more around it says so in a subclass of its own test file (the
cluster's: its settler records a Job's end before the ledger hears of it), and a difference the
contract allows is a flag here, named and documented (docs/architecture.md, "The ledger
contract").
"""

from __future__ import annotations

from collections.abc import Callable

from kube_workqueue.manager.ports import ClaimsWork


class Subject:
    # Whether a finished item's exit code and error outlive its manager (the cluster's record
    # keeps neither: ~30 bytes an item, which live with the Job until it is cleaned up).
    keeps_exit_details = True
    # Whether an item that has not finished - waiting, with its priority, or running -
    # outlives the manager in the ledger (the cluster's record is of what ended: what waits
    # the source lists again, what runs its Job says).
    keeps_unfinished_items = True

    def __init__(self, opener: Callable[[], object]) -> None:
        """`opener()`: the ledger as a manager's start opens it (the same record each time)."""
        self._open = opener
        self.ledger = opener()

    def reopen(self) -> None:
        """The manager stops (its ledger closed, whatever ran left as it was) and the next one
        opens the same record, as its start does: a ledger that claims work takes what its
        owner held as its own (`owned`, which `manager.fleet.joining` calls at every start)."""
        self.ledger.close()
        self.ledger = self._open()
        if isinstance(self.ledger, ClaimsWork):
            self.ledger.owned()

    def start(self, name: str, version: str | None = None) -> int:
        """Start `name` as its manager would: claimed first where the ledger claims work."""
        if isinstance(self.ledger, ClaimsWork):
            claimed = self.ledger.claim(10_000)
            assert name in claimed, f"{name} could not be claimed: {self.ledger.state(name)}"
            for other in claimed:
                if other != name:
                    self.ledger.release(other)
        return self.ledger.start(name, f"/logs/{name}.log", version)

    def ended(self, name: str, succeeded: bool) -> None:
        """What the manager records of a run's end before the ledger is told (nothing here)."""

    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None):
        """End `name`'s run as its manager would."""
        self.ended(name, succeeded)
        self.ledger.finish(name, succeeded, exit_code, error)

    def close(self) -> None:
        self.ledger.close()
