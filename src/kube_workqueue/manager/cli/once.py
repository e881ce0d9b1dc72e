"""What a `--once` run shows: a progress bar while it runs, a summary when it is over.

The bar (done/total, rate, ETA) is drawn only when stderr is a terminal; tqdm draws it: it is
the well-kept standard for this and handles terminal widths, rates and ETAs. On a pipe or in CI
nothing is drawn.

The summary gives the counts, each failed item with the tail of its log, and the measured
service and interarrival times; its return value is the run's exit code.
"""

from __future__ import annotations

import os
import sys
import threading

from ..planning.measure import measure_rows
from ..ports import ClaimsWork, Ledger, State
from ..runtime.reconciler import Result
from ..runtime.runner import TERMINAL, Manager, RunReport


def run_with_progress(manager: Manager, *, stream=None) -> RunReport:
    stream = stream or sys.stderr
    if not stream.isatty():
        return manager.run_once()
    from tqdm import tqdm

    lock = threading.Lock()
    bar: dict[str, object] = {}
    counted: set[str] = set()

    def on_start(report: RunReport) -> None:
        targets = set(report.targets)
        bar["targets"] = targets
        bar["bar"] = tqdm(
            total=len(targets),
            unit="item",
            file=stream,
            dynamic_ncols=True,
            initial=len(report.results),
        )
        counted.update(report.results)

    def on_result(name: str, result: Result) -> None:
        with lock:
            progress = bar.get("bar")
            if progress is None or result not in TERMINAL or name in counted:
                return
            if name in bar["targets"]:
                counted.add(name)
                progress.update(1)

    manager.on_result = on_result
    try:
        return manager.run_once(on_start=on_start)
    finally:
        if "bar" in bar:
            bar["bar"].close()


def _log_tail(path: str | None, lines: int = 5) -> list[str]:
    if not path or not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 8192))
        text = f.read().decode("utf-8", "replace")
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]


CANNOT_FINISH = 4  # the exit code of a run that ended with items nothing may run here


def print_summary(report, ledger: Ledger, out=None) -> int:
    """Print what the run did; return the exit code (0 all succeeded - or were cancelled, which
    is what the source asked for - 1 any failed or was left unfinished, CANNOT_FINISH items
    were left that nothing may run here: `runtime.cannot_finish`)."""
    out = out or sys.stdout
    if not report.listed:
        print("workqueue: stopped before the source answered: nothing ran", file=out)
        return 1
    done_now = report.names_with(Result.SUCCEEDED)
    failed = report.names_with(Result.FAILED)
    skipped = report.names_with(Result.SKIPPED)
    gone = report.names_with(Result.GONE)
    cancelled = report.names_with(Result.CANCELLED)
    elsewhere = report.names_with(Result.ELSEWHERE)  # a shared ledger's other managers
    skipped += [n for n in elsewhere if (ledger.state(n) or ("",))[0] == State.FAILED.value]
    elsewhere = [n for n in elsewhere if n not in skipped]
    already_failed = [n for n in skipped if (ledger.state(n) or ("",))[0] == State.FAILED.value]
    already_done = [n for n in skipped if n not in already_failed]
    unfinished = [n for n in report.targets if n not in report.results]
    took = report.finished - report.started
    parts = [f"{len(done_now)} succeeded"]
    if already_done:
        parts.append(f"{len(already_done)} already done")
    if elsewhere:
        parts.append(f"{len(elsewhere)} done by other managers")
    lost = int(ledger.claim_counters().get("lost", 0)) if isinstance(ledger, ClaimsWork) else 0
    if lost:  # its runs whose claims others took: their ends are not this manager's
        parts.append(f"{lost} of its claims lost to other managers")
    parts.append(f"{len(failed) + len(already_failed)} failed")
    if gone:
        parts.append(f"{len(gone)} gone from the source")
    if cancelled:
        parts.append(f"{len(cancelled)} cancelled (left the source)")
    if unfinished and report.cannot_run:
        parts.append(f"{len(unfinished)} not run (nothing may run them here)")
    elif unfinished:
        parts.append(f"{len(unfinished)} not finished (interrupted)")
    print(
        f"workqueue: {len(report.targets)} items: " + ", ".join(parts) + f" in {took:.1f}s",
        file=out,
    )
    for name in failed + already_failed:
        row = ledger.row(name)
        error = "failed"
        if row is not None and row.last_error:
            error = row.last_error
        elif row is not None and row.exit_code is not None:
            error = f"exit code {row.exit_code}"
        attempts = row.attempts if row else 0
        log_path = (row.log_path if row else None) or "-"
        print(
            f"failed: {name} ({error}, {attempts} attempt(s)); log: {log_path}",
            file=out,
        )
        for line in _log_tail(row.log_path if row else None):
            print(f"    | {line}", file=out)
    for line in report.cannot_run:  # why the rest could not run: one line a cause
        print(f"not run: {line}", file=out)
    wanted = set(report.targets)
    figures = measure_rows(r for r in ledger.rows() if r.name in wanted)
    if figures is not None:
        print(figures.describe(), file=out)
    if report.cannot_run:
        return CANNOT_FINISH
    return 1 if failed or already_failed or unfinished else 0
