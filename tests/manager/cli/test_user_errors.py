"""Careless typing never gets a traceback: each mistake below, found by trying the commands as a
new user would, is one line on stderr naming the problem and exit code 2 - checked on the real
command."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest

SOURCE = "http://127.0.0.1:9"  # nothing listens: these must fail before they would poll


def workqueue(*args, prefix=()):
    return subprocess.run(
        [*prefix, sys.executable, "-m", "manager.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in lines[0], lines[0]


def without_root_powers():
    """A command prefix that makes file permissions hold even for root (the suite runs as root
    in CI): drop the capabilities that bypass them."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to test permissions as root"
    drop = "-dac_override,-dac_read_search"
    return (setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["manager", "--source", SOURCE, "--worker-cmd", "'unbalanced"], "no closing quotation"),
        (
            ["manager", "--source", SOURCE, "--backend", "kubernetes", "--namespace", "n",
             "--queue", "q", "--image", "i", "--command", 'say "hi'],
            "no closing quotation",
        ),
        (
            ["manager", "--source", SOURCE, "--backend", "kubernetes", "--namespace", "n",
             "--queue", "q", "--image", "i", "--args", "'x"],
            "--args",
        ),
        (["manager", "--source", SOURCE, "--worker-cmd", "true", "--metrics-port", "-1"], "port"),
        (["manager", "--source", SOURCE, "--worker-cmd", "true", "--metrics-port", "99999"],
         "port"),
        (["manager", "--source", SOURCE, "--worker-cmd", "true", "--metrics-port", "0",
          "--metrics-host", "999.1.1.1"], "999.1.1.1"),
        (["manager", "--source", SOURCE, "--worker-cmd", "true", "--parallelism",
          "99999999999999999999"], "at most"),
        (["manager", "--source", SOURCE, "--worker-cmd", "true", "--timeout", "-5s"], "> 0"),
        (["manager", "--source", SOURCE, "--worker-cmd", "true", "--grace", "nan"],
         "not a duration"),
        (["run", ".", "--settle", "nan", "--", "true"], "not a duration"),
        (["run", ".", "--settle", "-1", "--", "true"], ">= 0"),
        (["stability", "--interarrival", "60s", "--service", "1s", "--parallelism",
          "99999999999999999999"], "parallelism"),
        (["stability", "--interarrival", "60s", "--service", "1s", "--plot",
          "/nonexistent/dir/p.png"], "/nonexistent/dir"),
        (["--bogus"], "unknown option '--bogus'"),
        (["lab", "--duration", "-3"], "> 0"),
    ],
)  # fmt: skip
def test_mistakes_are_one_line_and_exit_2(tmp_path, args, says):
    one_line_exit_2(workqueue(*args), says)


def test_a_metrics_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = workqueue(
            "manager", "--source", SOURCE, "--worker-cmd", "true", "--once",
            "--state-dir", tmp_path, "--metrics-port", port,
        )  # fmt: skip
    one_line_exit_2(r, "in use")


def test_run_on_a_folder_it_cannot_read(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "a.mp4").write_bytes(b"x")
    folder.chmod(0)
    try:
        r = workqueue("run", folder, "--", "true", prefix=without_root_powers())
    finally:
        folder.chmod(0o755)
    one_line_exit_2(r, "cannot read the folder")


def test_a_plot_into_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        r = workqueue(
            "stability", "--interarrival", "60s", "--service", "1s", "--plot", folder / "p.png",
            prefix=without_root_powers(),
        )  # fmt: skip
    finally:
        folder.chmod(0o755)
    one_line_exit_2(r, "permission denied")
