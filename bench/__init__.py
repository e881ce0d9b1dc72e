"""Benchmarks: scripts that print figures side by side with a peer.

Run each from the repository root as a module (`python -m bench.local`), so `ambassador`,
`manager` and the tests' support package (`tests.support`) import as packages - no `sys.path`
edits, and no script named like a package can shadow it.
"""
