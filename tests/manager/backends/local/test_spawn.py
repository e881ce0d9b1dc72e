"""The local backend's process start (`spawn.py` via `LocalBackend`), with real processes: the
worker inherits no descriptor beyond 0, 1 and 2, is in a session of its own (its shim's, which
leads it: `shim.py`), has SIGPIPE and SIGTERM at their default actions (whatever its shim
ignores), gets its item in a private file (0600) that holds exactly its own item even as item
files are reused, and its exit code, a signal, a timeout and a missing program come back as
they did with subprocess."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from kube_workqueue.manager.backends.local.process import LocalBackend
from kube_workqueue.manager.ports import Cancel

WORKER = """#!{python}
import json, os, sys
path = os.environ["WORK_ITEM_FILE"]
item = json.load(open(path))
inherited = []
for fd in range(3, 256):
    try:
        os.fstat(fd)
    except OSError:
        continue
    inherited.append(fd)
report = {{"item": item, "path": path, "mode": oct(os.stat(path).st_mode & 0o777),
          "inherited": inherited, "stdin": sys.stdin.read(), "sid": os.getsid(0),
          "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0),
          "sigterm": str(__import__("signal").getsignal(__import__("signal").SIGTERM))}}
with open({out!r} + "/" + item["name"] + ".json", "w") as f:
    json.dump(report, f)
if item["name"] == "sleepy":
    import time
    time.sleep(30)
sys.exit(item.get("exit", 0))
"""


def backend(tmp_path, **kw):
    out = tmp_path / "out"
    out.mkdir()
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(python=sys.executable, out=str(out)))
    worker.chmod(0o755)
    return LocalBackend([str(worker)], str(tmp_path / "state"), **kw), out


def test_the_worker_inherits_only_stdio_and_reads_its_own_item(tmp_path):
    runner, out = backend(tmp_path)
    keep_open = os.open(os.devnull, os.O_RDONLY)  # the manager's own descriptors stay its own
    try:
        for i in range(3):
            outcome = runner.run(f"item-{i}", {"name": f"item-{i}", "n": i}, 1, Cancel())
            assert outcome.succeeded and outcome.exit_code == 0
    finally:
        os.close(keep_open)
    paths = set()
    for i in range(3):
        report = json.loads((out / f"item-{i}.json").read_text())
        assert report["item"] == {"name": f"item-{i}", "n": i}
        assert report["inherited"] == [] and report["stdin"] == ""
        # a session and process group of its own: its shim's, which is its parent
        assert report["sid"] == report["pgid"] == report["ppid"] != os.getsid(0)
        assert report["sigterm"] in ("0", "Handlers.SIG_DFL")  # what the shim ignores, it does not
        assert report["mode"] == "0o600"
        paths.add(report["path"])
    assert len(paths) == 1  # one at a time: the same slot file, rewritten in place
    item_file = paths.pop()
    assert stat.S_ISREG(os.lstat(item_file).st_mode)
    log = Path(runner.log_path("item-1")).read_text()
    assert "=== workqueue: item-1 attempt 1 at" in log


def test_sigpipe_is_not_ignored_by_the_worker(tmp_path):
    """Python ignores SIGPIPE for itself; a shell worker shows what it inherited."""
    script = tmp_path / "sig.sh"
    script.write_text(f"#!/bin/sh\ngrep '^SigIgn:' /proc/$$/status > {tmp_path}/sig\n")
    script.chmod(0o755)
    runner = LocalBackend([str(script)], str(tmp_path / "state"))
    assert runner.run("x", {"name": "x"}, 1, Cancel()).succeeded
    ignored = int((tmp_path / "sig").read_text().split()[1], 16)
    assert not ignored & (1 << (13 - 1)), "SIGPIPE (13) is ignored in the worker"


def test_exit_codes_signals_timeouts_and_a_missing_program(tmp_path):
    runner, _ = backend(tmp_path, timeout=1.0)
    failed = runner.run("bad", {"name": "bad", "exit": 3}, 1, Cancel())
    assert not failed.succeeded and failed.exit_code == 3 and failed.error == "exit code 3"
    slow = runner.run("sleepy", {"name": "sleepy"}, 1, Cancel())
    assert not slow.succeeded and slow.error == "timed out after 1s"
    missing = LocalBackend([str(tmp_path / "nope")], str(tmp_path / "state2"))
    gone = missing.run("x", {"name": "x"}, 1, Cancel())
    assert not gone.succeeded and gone.error.startswith("cannot start worker: ")
