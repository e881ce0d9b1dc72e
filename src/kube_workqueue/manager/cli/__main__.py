"""`python -m kube_workqueue.manager.cli` is the `workqueue` command."""

from .main import console

console()
