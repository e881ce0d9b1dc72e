"""The Manager in-process over the folder source `workqueue run` uses (the ambassador's own
file-system source): the --once progress bar on a terminal, and a backend failure that must not
leave an item marked running."""

from __future__ import annotations

import io
import os
from contextlib import contextmanager

import pytest

from kube_workqueue.manager.backends.local.ledger import SqliteLedger
from kube_workqueue.manager.backends.local.process import LocalBackend
from kube_workqueue.manager.cli.once import run_with_progress
from kube_workqueue.manager.runtime.runner import Manager, ManagerOptions
from tests.support.folders import open_folder


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@contextmanager
def manager_over(tmp_path, names, backend_class=LocalBackend, **options):
    """A Manager over the folder source of `names` (files at rest), with a ledger in
    tmp_path; yields (manager, ledger)."""
    folder = tmp_path / "items"
    folder.mkdir()
    for name in names:
        (folder / name).touch()
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))
    source = open_folder(str(folder), [".x"])
    try:
        with SqliteLedger(str(tmp_path / "state")).open() as ledger:
            backend = backend_class(["true"], ledger.state_dir)
            yield Manager.built(source, ledger, backend, ManagerOptions(**options)), ledger
    finally:
        source.stop()


def test_progress_bar_counts_every_item_on_a_terminal(tmp_path):
    with manager_over(tmp_path, [f"{i}.x" for i in range(5)]) as (manager, _):
        terminal = FakeTerminal()
        report = run_with_progress(manager, stream=terminal)
    assert len(report.names_with(*report.results.values())) == 5
    assert "5/5" in terminal.getvalue()


def test_no_bar_on_a_pipe(tmp_path):
    with manager_over(tmp_path, []) as (manager, _):
        pipe = io.StringIO()
        run_with_progress(manager, stream=pipe)
    assert pipe.getvalue() == ""


def test_a_backend_that_raises_fails_the_item_and_leaves_nothing_running(tmp_path):
    from kube_workqueue.manager.runtime.reconciler import Result

    class Exploding(LocalBackend):
        def run(self, *args, **kwargs):
            raise RuntimeError("disk on fire")

    with manager_over(tmp_path, ["a.x"], Exploding, max_attempts=1) as (manager, ledger):
        report = manager.run_once()
        row = ledger.row("a.x")
    assert report.results["a.x"] == Result.FAILED
    assert row.state == "failed" and "disk on fire" in row.last_error


def test_measured_line_reads_well_for_one_item_and_for_many():
    from kube_workqueue.manager.planning.measure import measure_rows
    from kube_workqueue.manager.ports import Row

    def row(name, seen, took):
        return Row(name, "succeeded", 1, seen, seen + 1, seen + 1 + took, 0, None, None)

    one = measure_rows([row("a", 100.0, 2.0)]).describe()
    assert one.startswith("measured: mean service time 2.00s over 1 run(s);")
    many = measure_rows([row(str(i), 100.0 + 10 * i, 2.0 + i % 2) for i in range(5)]).describe()
    assert "cv" in many and "mean interarrival 10.00s (cv 0.00)" in many


def test_a_once_run_ends_when_a_rival_starts_an_item_between_listing_and_queueing():
    """The item needs work when the run takes stock, and a rival manager's Job for it shows up
    before it is queued: it must still be queued (and so reported), or the run never ends."""
    import threading

    from ..fakes import FakeBackend, FakeLedger, FakeSource

    class RivalLedger(FakeLedger):
        looks = 0

        def state(self, name):
            if name == "b":
                self.looks += 1
                if self.looks > 1:  # from the second look on, a rival runs it
                    return ("running", 1)
            return super().state(name)

    ledger = RivalLedger()
    manager = Manager.built(
        FakeSource({"a": {}, "b": {}}), ledger, FakeBackend(), ManagerOptions(parallelism=1)
    )
    done = []
    t = threading.Thread(target=lambda: done.append(manager.run_once()), daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():
        manager.stop()
    assert done, "the --once run never ended"
    report = done[0]
    assert set(report.results) == {"a", "b"}


@pytest.mark.parametrize("waits_out_faults", [True, False])
def test_an_outage_met_reading_what_was_asked_at_start_is_waited_out_where_faults_are(
    tmp_path, waits_out_faults
):
    """The reads before any worker takes a slot (a pause in force, the parallelism asked) met
    a fault - a fleet's manager that came up during an outage, after it had joined: where the
    manager waits out faults it holds and reads again, and the run goes on; a `--once` run on
    its own record ends on the fault, as on any other."""
    from kube_workqueue.manager.faults import UNREACHABLE, StorageFault
    from kube_workqueue.manager.runtime.reconciler import Result

    refusals = [StorageFault(UNREACHABLE, "db", "too many connections")] * 2
    with manager_over(tmp_path, ["a.x", "b.x"], probe_interval=0.05) as (manager, ledger):
        paused_since = ledger.paused_since

        def refusing():
            if refusals:
                raise refusals.pop()
            return paused_since()

        ledger.paused_since = refusing
        manager.mode.waits_out_faults = waits_out_faults  # (a fleet's mode says True)
        if not waits_out_faults:
            with pytest.raises(StorageFault):
                manager.run_once()
            return
        report = manager.run_once()
    assert not refusals  # read again after each refusal
    assert report.results == {"a.x": Result.SUCCEEDED, "b.x": Result.SUCCEEDED}
    assert manager.final_fault() is None
