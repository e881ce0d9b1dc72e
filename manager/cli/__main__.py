"""`python -m manager.cli` is the `workqueue` command."""

from .main import console

console()
