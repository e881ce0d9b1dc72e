"""The fault hold on its own: held once for the first fault, its reason following what the
probes meet (a database that comes back read-only is read-only now, said once), released when
a probe and the kept outcomes' writes succeed."""

from __future__ import annotations

import threading

from kube_workqueue.manager.faults import LEDGER_READ_ONLY, UNREACHABLE, StorageFault
from kube_workqueue.manager.runtime.fault_hold import FaultHold
from tests.support.servers import wait_until


def test_the_reason_follows_the_fault_the_probes_meet_and_the_hold_ends_when_they_pass():
    faults = [StorageFault(LEDGER_READ_ONLY, "db")] * 3  # then the probe passes
    changes: list[str | None] = []
    stopped = threading.Event()

    def probe():
        if faults:
            raise faults.pop()

    hold = FaultHold(
        probe=probe, record_kept=lambda: None, kept=lambda: 0,
        changed=lambda: changes.append(hold.fault.kind if hold.fault else None),
        stop=stopped.set, stopped=stopped, probe_interval=0.01, grace=1.0,
    )  # fmt: skip
    try:
        hold.hold_for(StorageFault(UNREACHABLE, "db", "connection refused"))
        hold.hold_for(StorageFault(UNREACHABLE, "db", "again"))  # held already: nothing more
        wait_until(lambda: hold.fault is None, timeout=30)
    finally:
        stopped.set()
    assert changes == [UNREACHABLE, LEDGER_READ_ONLY, None]  # each change said once
