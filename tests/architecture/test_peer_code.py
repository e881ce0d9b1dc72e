"""A benchmark's peer runs the peer's code: a checkout from before the installed parent through
its top-level `manager`, one with the parent mapped by setup.py through a shim ahead of this
checkout's editable install, one in the src layout through its src/ on PYTHONPATH."""

from __future__ import annotations

import shutil
import subprocess

from tests.support.peer_code import REPO, peer_code

WHERE = "import kube_workqueue.manager as m; print(m.__file__)"
WHERE_OLD = "import manager as m; print(m.__file__)"


def where(code, script: str) -> str:
    done = subprocess.run([code.command[0], "-c", script], env=code.env, cwd=code.cwd,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return done.stdout.strip()


def test_this_checkout_is_the_installed_one():
    code = peer_code(None)
    assert code.command[1:] == ["-m", "kube_workqueue.manager.cli"] and code.shim is None
    assert where(code, WHERE) == str(REPO / "src" / "kube_workqueue" / "manager" / "__init__.py")


def test_a_checkout_in_the_src_layout_runs_its_own_manager(tmp_path):
    package = tmp_path / "peer" / "src" / "kube_workqueue" / "manager"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""the peer\'s"""\n')
    code = peer_code(tmp_path / "peer")
    assert code.command[1:] == ["-m", "kube_workqueue.manager.cli"] and code.shim is None
    assert where(code, WHERE) == str(package / "__init__.py")


def test_a_checkout_with_the_parent_runs_its_own_manager(tmp_path):
    tree = tmp_path / "peer"
    (tree / "manager").mkdir(parents=True)
    (tree / "manager" / "__init__.py").write_text('"""the peer\'s"""\n')
    (tree / "setup.py").write_text('PARENT = "kube_workqueue"\n')
    code = peer_code(tree)
    try:
        assert where(code, WHERE) == str(code.shim / "kube_workqueue/manager/__init__.py")
        assert (code.shim / "kube_workqueue/manager").resolve() == tree / "manager"
    finally:
        shutil.rmtree(code.shim)


def test_a_checkout_from_before_runs_its_top_level_manager(tmp_path):
    tree = tmp_path / "before"
    (tree / "manager").mkdir(parents=True)
    (tree / "manager" / "__init__.py").write_text("")
    code = peer_code(tree)
    assert code.command[1:] == ["-m", "manager.cli"]
    assert where(code, WHERE_OLD) == str(tree / "manager" / "__init__.py")
