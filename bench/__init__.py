"""Benchmarks: scripts that print figures side by side with a peer.

Run each from the repository root as a module (`python -m bench.local`), so `ambassador`,
`manager` and the tests' support package (`tests.support`) import as packages - no `sys.path`
edits, and no script named like a package can shadow it.
"""


def spread(values: list[float], form: str = ",.0f") -> str:
    """min / median / max of `values` (a run's rounds), each written as `form` says - the way
    every bench reports a figure it repeated."""
    ordered = sorted(values)
    return " / ".join(f"{v:{form}}" for v in (ordered[0], ordered[len(ordered) // 2], ordered[-1]))
