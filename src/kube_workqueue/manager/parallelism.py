"""A queue's parallelism, as anyone may ask it: one rule for every path a number comes in by -
`--parallelism` (at least 1), `workqueue scale`, the parallelism file beside a local ledger,
a shared ledger's settings, the WorkQueue's `spec.parallelism` (a person, an HPA or KEDA
through `/scale`) and the built-in autoscaler (0 holds the queue: nothing new starts).
"""

from __future__ import annotations

MAX_PARALLELISM = 4096  # a manager holds one thread per unit of work it may run at once


def parallelism_problem(value: object, *, least: int = 0) -> str | None:
    """Why `value` cannot be a queue's parallelism - asked by `workqueue scale`, the parallelism
    file, the WorkQueue's `spec.parallelism`, the autoscaler or `--parallelism` (least 1) - or
    None when it can. One rule for every path a number comes in by."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"not a whole number: {value!r}"
    if value < least:
        return f"must be at least {least}: {value}"
    if value > MAX_PARALLELISM:
        return f"must be at most {MAX_PARALLELISM}: {value}"
    return None
