"""The conventions people expect of a CLI, through the real command: --version, every flag from
WORKQUEUE_<FLAG> (flags win), --log-format/--log-level, and shell completion run in bash."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from kube_workqueue.manager.cli.environment import variable


def workqueue(*args, env=None, **kw):
    return subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        **kw,
    )


def test_version():
    from importlib import metadata

    # The distribution is kube-workqueue (the name `workqueue` is another project's on the
    # package index); the command and what --version prints stay `workqueue`.
    r = workqueue("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"workqueue {metadata.version('kube-workqueue')}"


def test_flag_names_become_variables():
    assert variable("--ui-token") == "WORKQUEUE_UI_TOKEN"
    assert variable("--parallelism") == "WORKQUEUE_PARALLELISM"


def test_values_come_from_the_environment_and_flags_win():
    env = {"WORKQUEUE_INTERARRIVAL": "10s", "WORKQUEUE_SERVICE": "30s", "WORKQUEUE_JSON": "yes"}
    r = workqueue("stability", "--parallelism", "4", env=env)
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["interarrival_seconds"] == 10 and body["service_seconds"] == 30
    assert body["parallelism"] == 4
    r = workqueue("stability", "--parallelism", "5", env={**env, "WORKQUEUE_PARALLELISM": "2"})
    assert json.loads(r.stdout)["parallelism"] == 5  # the flag wins
    r = workqueue("stability", env={**env, "WORKQUEUE_PARALLELISM": "2"})
    assert json.loads(r.stdout)["parallelism"] == 2
    r = workqueue("stability", "--service", "1m", env={**env, "WORKQUEUE_JSON": "0"})
    assert r.returncode == 0 and not r.stdout.lstrip().startswith("{")  # a switch turned off


@pytest.mark.parametrize(
    "name, value, words",
    [
        ("WORKQUEUE_PARALLELISM", "many", "invalid int value"),
        ("WORKQUEUE_JSON", "maybe", "not true or false"),
        ("WORKQUEUE_MODEL", "mm1", "invalid choice"),
    ],
)
def test_a_bad_value_in_the_environment_is_one_line_naming_the_variable(name, value, words):
    r = workqueue("stability", "--interarrival", "10s", "--service", "5s", env={name: value})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and words in lines[0], lines


def test_a_required_flag_may_come_from_the_environment(tmp_path):
    r = workqueue("manager", env={"WORKQUEUE_SOURCE": "http://127.0.0.1:9"})
    assert r.returncode == 2
    assert "--source" not in r.stderr and "--worker-cmd is required" in r.stderr


def test_log_format_json_and_log_level(tmp_path):
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "a.mp4").write_bytes(b"x")
    common = ["run", tmp_path / "v", "--settle", "0", "--metrics-port", "0"]
    r = workqueue(*common, "--state-dir", tmp_path / "s1", "--log-format", "json", "--", "true")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    assert lines, r.stderr
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any("metrics" in line["message"] for line in lines)
    r = workqueue(*common, "--state-dir", tmp_path / "s2", "--log-level", "warning", "--", "true")
    assert r.returncode == 0 and "metrics" not in r.stderr
    r = workqueue(*common, "--state-dir", tmp_path / "s3", env={"WORKQUEUE_LOG_FORMAT": "json"})
    assert r.returncode == 2  # no worker command: still one plain line for the user
    assert r.stderr.startswith("workqueue run: error:")


def complete(line: str) -> list[str]:
    """What bash completes for `line` (the last word partial) with our script loaded."""
    script = workqueue("completion", "bash").stdout
    words = line.split(" ")
    program = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n_workqueue\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    )
    r = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return sorted(w for w in r.stdout.splitlines() if w)


def test_bash_completes_commands_flags_and_choices():
    assert complete("workqueue sta") == ["stability", "status"]
    assert "--json" in complete("workqueue status --j")
    assert complete("workqueue manager --backend ") == ["kubernetes", "local"]
    assert complete("workqueue run --log-format ") == ["json", "text"]
    assert complete("workqueue completion ") == ["bash", "zsh"]


def test_zsh_completion_is_the_bash_one_under_bashcompinit():
    bash = workqueue("completion", "bash").stdout
    zsh = workqueue("completion", "zsh").stdout
    assert zsh.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert zsh.splitlines()[2:] == bash.splitlines()[1:]
    if shutil.which("zsh"):
        r = subprocess.run(["zsh", "-c", zsh], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr


def test_every_server_says_where_a_busy_port_is_in_one_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (tmp_path / "v").mkdir()
        r = workqueue("run", tmp_path / "v", "--metrics-port", port, "--", "true")
        assert r.returncode == 2
        assert r.stderr.strip().count("\n") == 0 and f"127.0.0.1:{port}" in r.stderr
        r = workqueue("ambassador", "--root", tmp_path / "v", "--port", port)
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
