"""Drivers of the peers `bench/sharing.py` measures beside the shared ledger: each runs in an
environment of its own (`bench/peers/venv.py` makes it), never in the project's."""
