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
        [*prefix, sys.executable, "-m", "kube_workqueue.manager.cli", *map(str, args)],
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
        # found by a round of 255 mistakes tried as a new user would
        (["manager", "--source", "http://[::1", "--worker-cmd", "true", "--once"],
         "Invalid IPv6 URL"),
        (["manager", "--source", "http://127.0.0.1:99999", "--worker-cmd", "true", "--once"],
         "Port out of range"),
        (["stability", "--interarrival", "60s", "--service", "90s", "--plot", "out.txt"],
         "'.txt' is not an image format"),
        (["simulate", "--interarrival", "60s", "--service", "90s", "--plot", "out.txt"],
         "'.txt' is not an image format"),
        (["stability", "--interarrival", "60s", "--service", "90s", "--plot", "."],
         "it is a folder"),
        (["lab", "--keys", "100000000"], "at most 10,000"),
        (["lab", "--workers", "100000000"], "at most 4096"),
        (["scale", "--parallelism", "100000000"], "at most 4096"),
        (["scale", "--parallelism", "-1"], ""),
        (["run", ".", "--state-dir", "", "--", "true"], "--state-dir: empty"),
        (["status", "--state-dir", ""], "--state-dir: empty"),
        (["stability", "--from-state", ""], "--from-state is empty"),
        (["run", ".", "--endpoint-url", "http://minio:9000", "--", "true"],
         "--endpoint-url applies to S3 sources only"),
        (["run", ".", "--sqs-queue-url", "http://q", "--", "true"],
         "--sqs-queue-url applies to S3 sources only"),
        (["run", ".", "--relist-interval", "5s", "--", "true"],
         "--relist-interval applies to S3 and Redis sources only"),
        (["run", ".", "--lease", "10s", "--", "true"], "--lease goes with --ledger"),
        (["run", ".", "--ledger", "postgresql://h/q", "--lease", "100d", "--", "true"],
         "a lease longer than a day"),
        (["status", "--ledger", "postgresql://h/q", "--state-dir", "."],
         "--ledger names a shared ledger and --state-dir a local queue: give one"),
        (["status", "--ledger", "postgresql://h/q", "--backend", "kubernetes", "--namespace",
          "n", "--queue", "q"], "drop --backend kubernetes"),
        (["run", ".", "--priority", "[=1", "--", "true"], "a [ that nothing closes"),
        (["run", ".", "--priority", "sample-00[=1", "--", "true"], "a [ that nothing closes"),
        (["run", "--bogus", ".", "--", "true"], "workqueue run: error: unrecognized arguments"),
        (["status", "--nope"], "(see workqueue status --help)"),
        # found by the next round, as an attacker and a new user would
        (["ambassador", "--source", "redis://127.0.0.1:9/0?stream=k&name="], "name= is empty"),
        (["ambassador", "--source", "nats://127.0.0.1:9/S?name="], "name= is empty"),
        (["run", ".", "--limit", "a=1", "--", "true"], "--limit applies to groups"),
        (["run", ".", "--fair", "--", "true"], "--fair applies to groups"),
        (["run", ".", "--group", "^(a)+$", "--limit", "a=1", "--group", "(?=x)(.)", "--",
          "true"], "lookaround"),
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


def test_an_endpoint_in_the_environment_is_checked_as_the_flag_is(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "run", "s3://bucket/", "--", "true"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, AWS_ENDPOINT_URL="notaurl", AWS_ACCESS_KEY_ID="x",
                 AWS_SECRET_ACCESS_KEY="y"),
    )  # fmt: skip
    one_line_exit_2(r, "AWS_ENDPOINT_URL must be an http(s) URL")


def test_https_to_a_plain_http_server_says_so_at_once(tmp_path):
    import threading
    from http.server import HTTPServer, SimpleHTTPRequestHandler

    server = HTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}"
        r = workqueue("manager", "--source", url, "--worker-cmd", "true", "--once",
                      "--state-dir", tmp_path / "state")  # fmt: skip
    finally:
        server.shutdown()
    one_line_exit_2(r, "is it a plain http:// server?", "WRONG_VERSION_NUMBER")
    assert "unreachable" not in r.stderr  # a wrong scheme is not an outage to wait out


def test_a_ledger_in_the_environment_beside_a_state_directory_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli",
         "status", "--state-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "WORKQUEUE_LEDGER": "postgresql://h/q"},
    )  # fmt: skip
    one_line_exit_2(r, "WORKQUEUE_LEDGER names a shared ledger and --state-dir a local queue")


def test_rediss_to_a_plain_server_says_tls_not_a_time_out(tmp_path, redis_store):
    url = redis_store.url.replace("redis://", "rediss://") + "?set=s"
    one_line_exit_2(workqueue("run", url, "--", "true"), "does the server speak TLS?")


def test_a_wrong_redis_database_is_said_as_refused(tmp_path, redis_store):
    url = redis_store.url.rsplit("/", 1)[0] + "/99?set=s"
    one_line_exit_2(workqueue("run", url, "--", "true"), "the server refused it", "DB index")


def test_a_backlog_s_stability_claims_no_utilization_verdict_or_recommendation(tmp_path):
    folder = tmp_path / "items"
    folder.mkdir()
    for i in range(5):
        (folder / f"{i}.mp4").write_bytes(b"x")
    state = tmp_path / "state"
    ran = workqueue("run", folder, "--settle", "0", "--state-dir", state, "--", "true")
    assert ran.returncode == 0, ran.stderr
    said = workqueue("stability", "--from-state", state, "--parallelism", "2")
    assert said.returncode == 0, said.stderr
    table = {line[:19].strip(): line[19:] for line in said.stdout.splitlines() if line[:1] != " "}
    assert "the 5 items arrived together (a backlog, not a rate)" in table["interarrival"]
    assert table["utilization"].startswith("-") and table["verdict"].startswith("-")
    assert table["recommended P"].startswith("-")
    assert "for 5 items" in table["drain backlog"]


def test_ledger_care_beside_a_shared_ledger_in_the_environment_is_one_line(tmp_path):
    """`ledger check` or `backup` with WORKQUEUE_LEDGER set: the shared ledger is not the
    state directory it would look at - said, instead of checking .workqueue."""
    env = dict(os.environ, WORKQUEUE_LEDGER="postgresql://u@127.0.0.1:9/q")
    for action in ("check", "backup"):
        r = subprocess.run(
            [sys.executable, "-m", "kube_workqueue.manager.cli", "ledger", action],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd=tmp_path,
        )
        one_line_exit_2(r, "WORKQUEUE_LEDGER names a shared one", "pg_dump")


def test_a_folder_with_items_of_another_suffix_gets_a_hint(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.md"):
        (folder / name).write_text(name)
    r = workqueue("run", folder, "--state-dir", tmp_path / "state", "--", "true")
    assert r.returncode == 0, r.stderr
    hint = (f"hint: {folder} has 3 file(s), none ending with .mp4; most end with .txt: give "
            "--suffix .txt")  # fmt: skip
    assert hint in r.stdout, r.stdout
