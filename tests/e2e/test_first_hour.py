"""What a new user meets in the first hour, on the real commands: a mistyped --source, a
stray kubeconfig, a bad value in the environment, the help text, typos in `retry`, and what
`status` says of items a stopped manager left running."""

from __future__ import annotations

import json
import signal
import sqlite3
import time

import pytest

from tests.support.servers import wait_until

from .conftest import spawn_workqueue, workqueue

# Port 9 (discard): privileged and served by nothing here. A port found free a moment ago is
# not: another test's server took one between the look and the manager's first request (once
# in a make test run: the manager reached it and stopped with a user error, not at SIGTERM).
NOTHING_LISTENS = "http://127.0.0.1:9"


def one_line(done, code: int, *words: str) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1, done.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def test_an_unreachable_source_with_once_gives_up_after_source_timeout(tmp_path):
    url = NOTHING_LISTENS
    started = time.monotonic()
    done = workqueue(
        "manager", "--source", url, "--worker-cmd", "true", "--once",
        "--source-timeout", "2s", "--state-dir", tmp_path / "state", timeout=60,
    )  # fmt: skip
    took = time.monotonic() - started
    line = one_line(done, 2, url, "unreachable", "--source-timeout")
    assert "waited 2.0 s" in line
    assert took < 30  # the subprocess bound is 60 s: it gave up on its own, not by a kill


def test_an_https_source_that_never_answers_the_handshake_is_given_up_on_time(tmp_path):
    """`https://` against a plain-HTTP server (or anything that never answers a TLS hello)
    waits `--source-timeout` in all - retries included - and says what is likely wrong; a
    --once run says nothing of trying again before its one line."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # connections queue, nothing answers
    try:
        url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        done = workqueue("manager", "--source", url, "--worker-cmd", "true", "--once",
                         "--source-timeout", "2s", "--state-dir", tmp_path / "s",
                         timeout=60)  # fmt: skip
        took = time.monotonic() - started
    finally:
        silent.close()
    one_line(done, 2, url, "does it speak HTTPS?", "waited 2.0 s")
    assert "will keep trying" not in done.stderr
    assert took < 20  # (it waited for 40 s, its retries' own timeouts, before)


def test_the_source_timeout_defaults_to_30s_and_is_shown_in_help():
    text = workqueue("manager", "--help").stdout
    assert "--source-timeout" in text and "default 30s" in " ".join(text.split())


def test_sigterm_while_waiting_for_the_source_says_nothing_ran(tmp_path):
    url = NOTHING_LISTENS
    proc = spawn_workqueue(
        "manager", "--source", url, "--worker-cmd", "true", "--once",
        "--state-dir", tmp_path / "state",
    )  # fmt: skip
    try:
        wait_until(lambda: (tmp_path / "state" / "manager.lock").exists(), timeout=30)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert "stopped before the source answered: nothing ran" in out
    assert "0 succeeded" not in out


@pytest.mark.parametrize(
    "content, says",
    [
        ("just a string\n", "is not a kubeconfig"),
        ("root:x:0:0:root:/root:/bin/bash\n", "is not a kubeconfig"),
        ("clusters: [\n", "is not valid YAML (line 2)"),
    ],
)
def test_a_file_that_is_not_a_kubeconfig_is_named(tmp_path, content, says):
    path = tmp_path / "config"
    path.write_text(content)
    done = workqueue(
        "status", "--backend", "kubernetes", "--kubeconfig", path, "--namespace", "n",
        "--queue", "q",
    )  # fmt: skip
    line = one_line(done, 2, str(path), says)
    assert "item assignment" not in line


def test_a_bad_value_from_the_environment_names_the_variable(tmp_path):
    (tmp_path / "v").mkdir()
    env = {"WORKQUEUE_TIMEOUT": "soon", "PATH": "/usr/bin:/bin"}
    import os

    done = workqueue("run", tmp_path / "v", "--", "true", env={**os.environ, **env})
    one_line(done, 2, "WORKQUEUE_TIMEOUT", "not a duration")
    done = workqueue("run", tmp_path / "v", "--timeout", "soon", "--", "true")
    line = one_line(done, 2, "--timeout", "not a duration")
    assert "WORKQUEUE_" not in line


@pytest.mark.parametrize(
    "command",
    ["run", "manager", "status", "retry", "pause", "resume", "ledger check", "plan", "simulate"],
)
def test_help_shows_no_internal_placeholders(command):
    text = workqueue(*command.split(), "--help").stdout
    assert "usage:" in text and "DECLARED_" not in text


def backups(state) -> list[str]:
    folder = state / "backups"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_retry_takes_no_backup_so_typos_never_push_out_the_managers(tmp_path):
    videos = tmp_path / "v"
    videos.mkdir()
    (videos / "bad.mp4").write_bytes(b"x")
    state = tmp_path / "state"
    assert workqueue("run", videos, "--state-dir", state, "--settle", "0", "--max-attempts",
                     "1", "--", "false").returncode == 1  # fmt: skip
    kept = backups(state)
    assert kept  # the manager's own, at its stop
    for typo in ("bda.mp4", "bad.mp", "nope"):
        assert workqueue("retry", typo, "--state-dir", state).returncode == 2
    assert workqueue("retry", "bad.mp4", "--state-dir", state).returncode == 0
    assert backups(state) == kept


def test_status_says_what_becomes_of_items_left_running_by_a_stopped_manager(tmp_path):
    videos = tmp_path / "v"
    videos.mkdir()
    (videos / "a.mp4").write_bytes(b"x")
    state = tmp_path / "state"
    assert (
        workqueue("run", videos, "--state-dir", state, "--settle", "0", "--", "true").returncode
        == 0
    )
    db = sqlite3.connect(state / "ledger.sqlite3")  # what a manager killed mid-run leaves
    with db:
        db.execute("UPDATE items SET state='running', started=?, finished=NULL", (time.time(),))
    db.close()
    text = workqueue("status", "--state-dir", state).stdout
    assert "so far" not in text
    body = json.loads(workqueue("status", "--state-dir", state, "--json").stdout)
    (item,) = body["items"]
    assert item["state"] == "running"
    assert "its manager stopped while it ran" in item["reason"]
    assert "the next manager records how its worker ended" in item["reason"]
