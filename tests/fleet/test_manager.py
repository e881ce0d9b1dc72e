"""The Manager in-process on a shared ledger (a real PostgreSQL): a claim taken from it between
its claim and its start is not run, and a `--once` run hears of that item's end from the
ledger instead of waiting for it forever."""

from __future__ import annotations

import os
import threading

from kube_workqueue.manager.backends.local.process import LocalBackend
from kube_workqueue.manager.fleet.database import Database
from kube_workqueue.manager.fleet.ledger import PostgresLedger
from kube_workqueue.manager.runtime.reconciler import Result
from kube_workqueue.manager.runtime.runner import Manager, ManagerOptions
from tests.support.folders import open_folder


class Stolen(PostgresLedger):
    """A ledger whose claim on `victim` a rival takes just before it starts the item - and
    finishes a moment later, on its own machine."""

    victim = "b.x"

    def start(self, name, log_path, version=None):
        if name == self.victim:
            with self.db.session() as session:
                session.cursor.execute("UPDATE items SET owner = 'rival', state = 'running', "
                                       "attempts = 1 WHERE name = %s", (name,))  # fmt: skip
            threading.Timer(0.3, self._rival_finishes, args=(name,)).start()
        return super().start(name, log_path, version)

    def _rival_finishes(self, name):
        with Database(self.db.url) as db, db.session() as session:
            session.cursor.execute(
                "UPDATE items SET owner = NULL, state = 'succeeded', claimable = false, "
                "changed = pg_current_xact_id() WHERE name = %s", (name,)
            )  # fmt: skip


def run_once_on(tmp_path, postgres, ledger_class, names, script: str, parallelism: int):
    """A `--once` run of `names` (files settled long ago) through a local backend whose worker
    is `script`, on a ledger of `ledger_class`: the ledger and the run's report."""
    folder = tmp_path / "items"
    folder.mkdir()
    for name in names:
        (folder / name).touch()
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))
    worker = tmp_path / "worker.sh"
    worker.write_text(f"#!/bin/sh\n{script}\n")
    worker.chmod(0o755)
    source = open_folder(str(folder), [".x"])
    ledger = ledger_class(Database(postgres), "me", lease=30)
    ledger.join()
    backend = LocalBackend([str(worker)], str(tmp_path / "state"), end_with_manager=True)
    try:
        manager = Manager.built(source, ledger, backend, ManagerOptions(parallelism=parallelism))
        return ledger, manager.run_once()
    finally:
        backend.close()
        ledger.close()
        source.stop()


def test_a_claim_lost_before_its_start_is_not_run_and_the_run_hears_how_it_ended(
    tmp_path, postgres
):
    ran = tmp_path / "ran"
    ledger, report = run_once_on(tmp_path, postgres, Stolen, ["a.x", "b.x", "c.x"],
                                 f'cat "$WORK_ITEM_FILE" >> {ran}; echo >> {ran}', 1)  # fmt: skip
    assert report.results == {
        "a.x": Result.SUCCEEDED, "b.x": Result.ELSEWHERE, "c.x": Result.SUCCEEDED,
    }  # fmt: skip
    assert '"b.x"' not in ran.read_text()  # never run here
    assert ledger.claim_counters()["lost"] == 1


class Counting(PostgresLedger):
    """A ledger that notes, at each claim, what this manager held and how many it asked for."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.asked: list[tuple[int, int]] = []

    def claim(self, limit):
        with self._writes:
            self.asked.append((len(self._claimed) + len(self._started), limit))
        return super().claim(limit)


def test_claims_come_in_batches_never_above_the_free_slots(tmp_path, postgres):
    names = [f"{i:02}.x" for i in range(24)]
    ledger, report = run_once_on(tmp_path, postgres, Counting, names, "sleep 0.2", 4)
    assert set(report.results.values()) == {Result.SUCCEEDED}
    assert max(limit for _, limit in ledger.asked) > 1  # batches were claimed ...
    assert all(held + limit <= 4 for held, limit in ledger.asked), ledger.asked  # ... in slots
