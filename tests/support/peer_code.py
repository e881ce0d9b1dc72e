"""The `workqueue` command of another checkout - a benchmark's peer, the code before a change -
run the way that checkout's layout wants.

The installed package is `kube_workqueue`, and this checkout's editable install answers that
name from anywhere: a peer is chosen by what comes before it on sys.path. Three layouts have been:

  * no tree, or this checkout: `python -m kube_workqueue.manager.cli`, nothing else;
  * a checkout in the src layout (src/kube_workqueue/ is the package, as this one): PYTHONPATH
    at its src/ - a namespace package's portions are searched in sys.path order, before the
    editable install's finder;
  * a checkout from before the installed parent (no mapping in its setup.py): its top-level
    `manager` package, `python -m manager.cli` in the tree (the current folder is first on
    sys.path) with PYTHONPATH at it;
  * a checkout with the parent mapped by its setup.py (manager/, ambassador/, safelog/ and
    workers/ at its top): a shim folder whose `kube_workqueue/` links to the tree's packages,
    first on PYTHONPATH, for the same reason.

The caller runs `command` with `env` in `cwd` (None: its own), and may remove `shim` when done
(a temporary folder).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PARTS = ("manager", "ambassador", "safelog", "workers")


@dataclass(frozen=True)
class PeerCode:
    command: list[str]  # the `workqueue` command: the interpreter and its module
    env: dict[str, str]
    cwd: Path | None = None
    shim: Path | None = None


def has_installed_parent(tree: Path) -> bool:
    setup = tree / "setup.py"
    return setup.is_file() and "kube_workqueue" in setup.read_text()


def peer_code(tree: Path | None) -> PeerCode:
    env = dict(os.environ)
    if tree is None or Path(tree).resolve() == REPO:
        return PeerCode([sys.executable, "-m", "kube_workqueue.manager.cli"], env)
    tree = Path(tree).resolve()
    if (tree / "src" / "kube_workqueue").is_dir():
        env["PYTHONPATH"] = str(tree / "src")
        return PeerCode([sys.executable, "-m", "kube_workqueue.manager.cli"], env)
    if not has_installed_parent(tree):
        env["PYTHONPATH"] = str(tree)
        return PeerCode([sys.executable, "-m", "manager.cli"], env, cwd=tree)
    shim = Path(tempfile.mkdtemp(prefix="peer-shim-"))
    (shim / "kube_workqueue").mkdir()
    for part in PARTS:
        if (tree / part).is_dir():
            (shim / "kube_workqueue" / part).symlink_to(tree / part, target_is_directory=True)
    env["PYTHONPATH"] = str(shim)
    return PeerCode([sys.executable, "-m", "kube_workqueue.manager.cli"], env, shim=shim)
