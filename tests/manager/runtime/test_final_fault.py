"""A `--once` run's exit for a fault held at its end (`Manager.final_fault`): a fleet's run whose
every target was settled and recorded ended whole; anything else is the fault's exit 3."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kube_workqueue.manager.faults import UNREACHABLE, StorageFault
from kube_workqueue.manager.runtime.reconciler import Result
from kube_workqueue.manager.runtime.run_report import RunReport
from kube_workqueue.manager.runtime.runner import Manager


def manager_with(*, fleet: bool, settled: int, unrecorded: int) -> Manager:
    manager = Manager.__new__(Manager)  # only what final_fault reads
    fault = StorageFault(UNREACHABLE, "postgresql://db", "server closed the connection")
    manager.hold = SimpleNamespace(final=lambda: fault)
    manager.mode = SimpleNamespace(waits_out_faults=fleet)
    manager._report = RunReport(targets=["a", "b"])
    for name in ["a", "b"][:settled]:
        manager._report.note(name, Result.SUCCEEDED, None)
    manager.reconciler = SimpleNamespace(unrecorded={f"x{i}": None for i in range(unrecorded)})
    return manager


@pytest.mark.parametrize(
    "fleet, settled, unrecorded, ends_in_the_fault",
    [
        (True, 2, 0, False),  # a fleet's run, whole: nothing to run again
        (True, 1, 0, True),  # a target not settled
        (True, 2, 1, True),  # an outcome kept from the record
        (False, 2, 0, True),  # alone, a fault ends the run (and says so)
    ],
)
def test_a_fault_held_at_the_end_fails_only_a_run_that_is_not_whole(
    fleet, settled, unrecorded, ends_in_the_fault
):
    fault = manager_with(fleet=fleet, settled=settled, unrecorded=unrecorded).final_fault()
    assert (fault is not None) is ends_in_the_fault
