"""The summary a `--once` run prints: counts, each failed item with the tail of its log, and
the measured service and interarrival times. Its return value is the run's exit code.
"""

from __future__ import annotations

import os
import sys

from .ledger import Ledger, State
from .reconciler import Result


def _log_tail(path: str | None, lines: int = 5) -> list[str]:
    if not path or not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 8192))
        text = f.read().decode("utf-8", "replace")
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]


def print_summary(report, ledger: Ledger, out=None) -> int:
    """Print what the run did; return the exit code (0 all succeeded, 1 any failed)."""
    from .measure import measure_run

    out = out or sys.stdout
    done_now = report.names_with(Result.SUCCEEDED)
    failed = report.names_with(Result.FAILED)
    skipped = report.names_with(Result.SKIPPED)
    gone = report.names_with(Result.GONE)
    already_failed = [n for n in skipped if (ledger.state(n) or ("",))[0] == State.FAILED.value]
    already_done = [n for n in skipped if n not in already_failed]
    unfinished = [n for n in report.targets if n not in report.results]
    took = report.finished - report.started
    parts = [f"{len(done_now)} succeeded"]
    if already_done:
        parts.append(f"{len(already_done)} already done")
    parts.append(f"{len(failed) + len(already_failed)} failed")
    if gone:
        parts.append(f"{len(gone)} gone from the source")
    if unfinished:
        parts.append(f"{len(unfinished)} not finished (interrupted)")
    print(
        f"workqueue: {len(report.targets)} items: " + ", ".join(parts) + f" in {took:.1f}s",
        file=out,
    )
    for name in failed + already_failed:
        row = ledger.row(name)
        error = row.last_error if row else "failed"
        attempts = row.attempts if row else 0
        print(
            f"failed: {name} ({error}, {attempts} attempt(s)); log: {row.log_path if row else '-'}",
            file=out,
        )
        for line in _log_tail(row.log_path if row else None):
            print(f"    | {line}", file=out)
    figures = measure_run(ledger, report.targets)
    if figures is not None:
        print(figures.describe(), file=out)
    return 1 if failed or already_failed or unfinished else 0
