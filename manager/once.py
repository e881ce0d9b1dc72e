"""A `--once` run with a progress bar (done/total, rate, ETA) when stderr is a terminal.

tqdm draws the bar: it is the well-kept standard for this and handles terminal widths, rates
and ETAs; on a pipe or in CI nothing is drawn.
"""

from __future__ import annotations

import sys
import threading

from .reconciler import Result
from .runner import TERMINAL, Manager, RunReport


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
