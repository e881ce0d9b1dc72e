"""The Manager in-process over a real ambassador: the --once progress bar on a terminal, and a
backend failure that must not leave an item marked running."""

from __future__ import annotations

import io
import os

from manager.backends.local import LocalBackend
from manager.inprocess import serve_folder
from manager.ledger import Ledger
from manager.once import run_with_progress
from manager.runner import Manager, ManagerOptions
from manager.source_client import SourceClient


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_counts_every_item_on_a_terminal(tmp_path):
    folder = tmp_path / "items"
    folder.mkdir()
    for i in range(5):
        (folder / f"{i}.x").touch()
        os.utime(folder / f"{i}.x", (1_000_000_000, 1_000_000_000))
    server = serve_folder(str(folder), [".x"])
    try:
        with Ledger(str(tmp_path / "state")).open() as ledger:
            manager = Manager(
                SourceClient(server.url),
                ledger,
                LocalBackend(["true"], ledger.state_dir),
                ManagerOptions(),
            )
            terminal = FakeTerminal()
            report = run_with_progress(manager, stream=terminal)
    finally:
        server.stop()
    assert len(report.names_with(*report.results.values())) == 5
    assert "5/5" in terminal.getvalue()


def test_no_bar_on_a_pipe(tmp_path):
    folder = tmp_path / "items"
    folder.mkdir()
    server = serve_folder(str(folder), [".x"])
    try:
        with Ledger(str(tmp_path / "state")).open() as ledger:
            manager = Manager(
                SourceClient(server.url),
                ledger,
                LocalBackend(["true"], ledger.state_dir),
                ManagerOptions(),
            )
            pipe = io.StringIO()
            run_with_progress(manager, stream=pipe)
    finally:
        server.stop()
    assert pipe.getvalue() == ""


def test_a_backend_that_raises_fails_the_item_and_leaves_nothing_running(tmp_path):
    from manager.reconciler import Result

    class Exploding(LocalBackend):
        def run(self, *args, **kwargs):
            raise RuntimeError("disk on fire")

    folder = tmp_path / "items"
    folder.mkdir()
    (folder / "a.x").touch()
    os.utime(folder / "a.x", (1_000_000_000, 1_000_000_000))
    server = serve_folder(str(folder), [".x"])
    try:
        with Ledger(str(tmp_path / "state")).open() as ledger:
            manager = Manager(
                SourceClient(server.url),
                ledger,
                Exploding(["true"], ledger.state_dir),
                ManagerOptions(max_attempts=1),
            )
            report = manager.run_once()
            row = ledger.row("a.x")
    finally:
        server.stop()
    assert report.results["a.x"] == Result.FAILED
    assert row.state == "failed" and "disk on fire" in row.last_error
