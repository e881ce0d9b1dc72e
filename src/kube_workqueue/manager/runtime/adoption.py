"""Work a manager that died left running, waited for by the manager that took over.

A backend whose work outlives its manager (the local backend's keepers, the Kubernetes
backend's running Jobs: `AdoptsWork` in `manager.ports`) hands the new manager the (name,
attempt) of every unit still running. Each is
neither queued nor started: it takes a capacity slot at once (it is running, whatever the
limit), and a thread of its own waits for its end through `Reconciler.finish` - the same
recording, retry, cancel (`--cancel-removed` ends it like any running item), metrics and
`--once` report as work this manager started. When the manager stops, the backend's shut-down
ends it after the grace period like the rest; `join` waits until each has been recorded.

The caller's duties: `start()` once dispatching begins (the `--once` report, if any, already
made), `join()` before the manager marks anything left running as pending.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..faults import StorageFault
from ..ports import AdoptsWork, Backend
from .cancellation import Cancellations
from .capacity import Capacity
from .reconciler import Reconciler, Result, Started

log = logging.getLogger(__name__)


class Adoption:
    def __init__(
        self,
        backend: Backend,
        reconciler: Reconciler,
        capacity: Capacity,
        cancellations: Cancellations,
        *,
        retry: Callable[[str], None],
        fault: Callable[[StorageFault], None],
        tenants=None,
    ) -> None:
        """`retry(name)` puts an item whose adopted attempt failed back in line after its
        backoff; `fault(f)` holds dispatch for a record that could not be written;
        `tenants` (`runtime.tenants.Tenants`, or None) counts each adopted run against its
        group's limit while it runs."""
        self.tenants = tenants
        self.reconciler = reconciler
        self.capacity = capacity
        self.cancellations = cancellations
        self.retry = retry
        self.fault = fault
        adopts = isinstance(backend, AdoptsWork)
        self.units = backend.adopted() if adopts else []
        # a backend that re-dispatches what it adopts (Kubernetes: the Job's ConfigMap a crash
        # kept from being written) is given the item's data as the source has it now
        self.needs_data = adopts and backend.adopted_needs_data
        self.names = {name for name, _ in self.units}
        # Each adopted run is this manager's from now on: a removal acted on before `start`
        # (a hold that ran out while no manager ran is acted on at the first listing) finds
        # it running here, and its worker is ended as soon as it is followed.
        with cancellations.gate:
            self._cancels = {name: cancellations.started(name) for name in self.names}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for name, attempt in self.units:
            self.capacity.occupy()
            if self.tenants is not None:
                self.tenants.occupy(name)
            started = Started(name, {}, attempt, self._cancels[name], adopted=True)
            thread = threading.Thread(target=self._wait, args=(started,), daemon=True,
                                      name=f"adopted-{len(self._threads) + 1}")  # fmt: skip
            thread.start()
            self._threads.append(thread)

    def _data(self, name: str) -> dict:
        """The item as the source has it now ({} when it left, or the source cannot say)."""
        try:
            return self.reconciler.source.get_item(name) or {}
        except Exception as exc:  # the adopted work is awaited all the same
            log.warning("%s: adopted, but the source could not give its data: %s", name, exc)
            return {}

    def _wait(self, started: Started) -> None:
        try:
            if self.needs_data:
                started = Started(started.name, self._data(started.name), started.attempt,
                                  started.cancel, adopted=True)  # fmt: skip
            result = self.reconciler.finish(started)
        except StorageFault as fault:  # its outcome waits in the reconciler's `unrecorded`
            self.fault(fault)
            return
        except Exception:  # one item's trouble never stops the others
            log.exception("%s: an adopted worker's end could not be recorded", started.name)
            return
        finally:
            self.capacity.release()
            if self.tenants is not None:
                self.tenants.vacate(started.name)
        if result == Result.RETRY:
            self.retry(started.name)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
