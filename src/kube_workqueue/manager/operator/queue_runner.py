"""One WorkQueue's manager, run in the operator's process and kept alive there.

`QueueRun` is the chart's per-queue manager container turned into threads: the same
`assemble(...)` of the Kubernetes backend (its own API client, Job cache and record), then
`run_forever()`. The queue has no Lease of its own (`queue_spec` turns `leader_elect` off): the
operator holds one Lease for all its queues, so two operator replicas, or an old and a new one
during a rolling update, never both dispatch a queue.

Never two runs of one queue in one process (as kopf never runs two daemons of one object):
`stop()` asks the manager to stop and waits its grace; a run that has not ended by then is
*fenced* before it is abandoned - its API client refuses every write from then on and its
shared ledger's connections close and open no more (`Assembled.fence`), the writes in flight
waited for - so whatever its threads still do, they change nothing another run reads. Only
then does `stop()` return, and the reconciler start the queue's next run.

Isolation: everything one queue does happens in its threads. An exception anywhere in it -
a setup the cluster refuses, a manager that dies, a lost lease - ends that run only: it is
logged, reported (`on_state`: the operator turns it into the queue's conditions and an
Event), and the run starts again after a back-off (1 s, doubling, at most 5 min) while the
other queues go on. What a restart costs is what a manager pod's restart costs: nothing runs
twice (Jobs are named after their items, the record says what finished, running Jobs are
adopted).

Caller duties: `start()` once; `stop()` before dropping it (running Jobs run on: whoever runs
the queue next records them).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

from ..errors import UserError
from .queue_spec import Plan

log = logging.getLogger(__name__)

BACKOFF_FIRST, BACKOFF_CAP = 1.0, 300.0


class QueueRun:
    def __init__(
        self,
        plan: Plan,
        on_state: Callable[[str, str, str], None],
        ledger_url: str | None = None,
    ) -> None:
        """`on_state(state, reason, message)`: "Starting", "Running" (leading and
        dispatching), "Standby" (waiting for the queue's own Lease - only a plan whose options
        elect a leader; the operator's plans never do, `queue_spec` turning `leader_elect` off)
        or "Failed" (it will start again); called from this run's thread."""
        self.plan = plan
        self.on_state = on_state
        self.ledger_url = ledger_url
        self.failures = 0  # in a row; reset once a run leads
        self._stopping = threading.Event()
        self._manager = None
        self._built = None  # the assembled manager while it lives (under `_lock`)
        self._fenced = False  # set (under `_lock`) once abandoned: nothing of it writes
        self.abandoned = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._loop, name=f"queue {plan.namespace}/{plan.name}", daemon=True
        )

    def start(self) -> QueueRun:
        self._thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the queue's manager (its own grace for work in hand) and wait for it; if it
        has not ended after `timeout`, fence it (see the module docstring). On return the run
        has ended or can write nothing more."""
        self.ask_to_stop()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.fence(timeout)

    def fence(self, timeout: float) -> None:
        """Make this run's manager unable to write (now, or as soon as it is assembled)."""
        with self._lock:
            self._fenced = True
            built = self._built
        self.abandoned = True
        done = built.fence(timeout) if built is not None else True
        log.warning("queue %s/%s: its manager did not stop in time; its writes are fenced "
                    "(API writes refused, ledger sessions closed%s) and it is abandoned",
                    self.plan.namespace, self.plan.name,
                    "" if done else "; a write still in flight was not waited for")  # fmt: skip

    def ask_to_stop(self) -> None:
        """Stop without waiting (`Operator.stop` asks every queue first, then waits once)."""
        self._stopping.set()
        with self._lock:
            manager = self._manager
        if manager is not None:
            manager.stop()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _loop(self) -> None:
        delay = BACKOFF_FIRST
        while not self._stopping.is_set():
            try:
                led = self._run_once()
                if self._stopping.is_set():
                    return
                if led:  # it led, then lost the lease (or its manager stopped): stand by again
                    delay = BACKOFF_FIRST
                    continue
            except UserError as exc:
                self.failures += 1
                self._report("Failed", "ManagerFailed", str(exc))
            except Exception as exc:  # one queue's surprise is never the operator's end
                self.failures += 1
                log.exception("queue %s/%s: its manager failed", self.plan.namespace,
                              self.plan.name)  # fmt: skip
                self._report("Failed", "ManagerFailed", f"{type(exc).__name__}: {exc}")
            if self._stopping.wait(delay):
                return
            delay = min(delay * 2, BACKOFF_CAP)

    def _run_once(self) -> bool:
        """One manager's life: assembled, leading, dispatching until stopped. Whether it led."""
        from ..assembly import assemble

        self._report("Starting", "Starting", "the queue's manager is starting")
        kube = self.plan.kube
        if self.ledger_url:
            kube = dataclasses.replace(kube, ledger=self.ledger_url)
        built = assemble(self.plan.source_url, "kubernetes", kube, self.plan.manager)
        try:
            manager = built.manager
            with self._lock:
                self._manager, self._built = manager, built
                fenced = self._fenced
            if fenced:  # abandoned while it was being assembled: it writes nothing
                built.fence(0)
                return False
            if self._stopping.is_set():
                return False
            if manager.elector is not None:
                self._report("Standby", "WaitingForLease",
                             f"waiting for the Lease {manager.elector.lease_name}")  # fmt: skip
            if not manager.lead():
                return False
            self.failures = 0
            self._report("Running", "Running", "the queue's manager leads and dispatches")
            manager.run_forever()
            return True
        finally:
            with self._lock:
                self._manager = self._built = None
            built.close()

    def _report(self, state: str, reason: str, message: str) -> None:
        try:
            self.on_state(state, reason, message)
        except Exception:
            log.exception("queue %s/%s: reporting %s failed", self.plan.namespace,
                          self.plan.name, state)  # fmt: skip
