"""No secret is printed and no name reaches a terminal raw, with the real commands: a password in
a source URL is hidden in the manager's log, its `--once` error, `status` and `run` errors; a
dashboard token on the command line is refused without being echoed; an item named with escape
codes is shown escaped by `run`, `status` and the log, and exact in `status --json`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from kube_workqueue.ambassador.sources.registry import credential_variables
from kube_workqueue.safelog.redaction import redact_text, redact_url
from tests.support.servers import descendants, free_port, wait_until

from .conftest import spawn_workqueue, workqueue

SECRET = "s3cr3t-pw"


def test_redaction_keeps_what_is_not_a_secret():
    assert redact_url(f"http://admin:{SECRET}@host:8080/x") == "http://admin:***@host:8080/x"
    assert redact_url(f"redis://:{SECRET}@r:6379/0?set=v") == "redis://:***@r:6379/0?set=v"
    assert redact_url(f"https://h/o?X-Amz-Signature={SECRET}&part=2") == (
        "https://h/o?X-Amz-Signature=***&part=2"
    )
    assert redact_url(f"http://{SECRET}@h/") == "http://***@h/"
    assert redact_url("http://h/?set=videos") == "http://h/?set=videos"
    assert SECRET not in redact_text(f"x http://a:{SECRET}@[::1 y")
    # an Azure account key (base64: `/`, `+`, `=`) typed as a password: no parser sees
    # userinfo in it - it was printed back whole in the refusal
    key = "c2Vj/cmV0+a2V5MTIz=="
    assert redact_url(f"azblob://acct:{key}@container/in/") == "azblob://acct:***@container/in/"
    assert redact_url("s3://bucket/user@example.com/a.mp4") == "s3://bucket/user@example.com/a.mp4"


def test_an_azure_key_typed_in_a_source_url_is_refused_and_never_printed():
    typed = f"azblob://acct:{SECRET}/x==@container/in/"
    for command in (["run", typed, "--", "true"], ["ambassador", "--source", typed]):
        done = in_process_cli(*command)
        assert done.returncode == 2 and "password in the source URL" in done.stderr, done
        assert SECRET not in done.stderr + done.stdout
    done = in_process_cli("ambassador", env={"WORKQUEUE_SOURCE": f"azblob://a:{SECRET}/x@c/"})
    assert done.returncode == 2 and SECRET not in done.stderr + done.stdout, done


def in_process_cli(*args, env=None):
    """A command in this process (a refusal needs no interpreter of its own)."""
    import contextlib
    import io

    from kube_workqueue.manager.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as done:
                code = done.code
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_a_password_in_the_source_url_is_never_printed(tmp_path, ambassador_server):
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "a.mp4").write_bytes(b"x")
    server = ambassador_server(tmp_path / "videos")
    with_password = server.url.replace("http://", f"http://admin:{SECRET}@")
    state = tmp_path / "state"
    closed = f"http://admin:{SECRET}@127.0.0.1:{free_port()}"
    typed = workqueue("manager", "--source", closed, "--worker-cmd", "true", "--once",
                      "--state-dir", state)  # fmt: skip
    assert typed.returncode == 2 and "WORKQUEUE_SOURCE" in typed.stderr, typed.stderr
    once = workqueue(
        "manager",
        "--worker-cmd",
        "true",
        "--once",
        "--source-timeout",
        "1s",
        "--state-dir",
        state,
        env=dict(os.environ, WORKQUEUE_SOURCE=closed),
    )
    assert once.returncode == 2 and "admin:***@" in once.stderr, once.stderr
    status = workqueue(
        "status", "--state-dir", state, env=dict(os.environ, WORKQUEUE_SOURCE=closed)
    )
    assert "admin:***@" in status.stderr
    redis = workqueue("run", f"redis://:{SECRET}@127.0.0.1:{free_port()}/0?set=s", "--", "true")
    assert redis.returncode == 2 and "REDIS_PASSWORD" in redis.stderr
    live = spawn_workqueue("manager", "--worker-cmd", "true", "--state-dir", state,
                           "--poll-interval", "0.5s",
                           env=dict(os.environ, WORKQUEUE_SOURCE=with_password))  # fmt: skip
    try:
        wait_until(lambda: '"succeeded": 1' in workqueue("status", "--state-dir", state,
                                                          "--json").stdout, 30)  # fmt: skip
        live.send_signal(signal.SIGTERM)
        _, err = live.communicate(timeout=60)
    finally:
        if live.poll() is None:
            live.kill()
    assert f"manager: source {server.url.replace('http://', 'http://admin:***@')}" in err, err
    for said in (typed.stderr, once.stdout, once.stderr, status.stdout, status.stderr,
                 redis.stderr, err):  # fmt: skip
        assert SECRET not in said


def test_a_dashboard_token_on_the_command_line_is_refused_unechoed(tmp_path):
    token = "a-long-token-nobody-should-see-1234"
    r = workqueue("run", tmp_path, "--metrics-port", "0", "--ui-token", token, "--", "true")
    assert r.returncode == 2 and "WORKQUEUE_UI_TOKEN" in r.stderr and token not in r.stderr
    folder = tmp_path / "items"
    folder.mkdir()
    from_env = workqueue("run", folder, "--settle", "0", "--metrics-port", "0",
                         "--state-dir", tmp_path / "state", "--", "true",
                         env=dict(os.environ, WORKQUEUE_UI_TOKEN=token))  # fmt: skip
    assert from_env.returncode == 0, from_env.stderr


HOSTILE = "esc\x1b[2J\x1b]0;owned\x07x.mp4"


def test_a_name_with_escape_codes_is_shown_escaped_and_exact_in_json(tmp_path):
    folder = tmp_path / "items"
    folder.mkdir()
    (folder / HOSTILE).write_bytes(b"x")
    state = tmp_path / "state"
    ran = workqueue("run", folder, "--settle", "0", "--max-attempts", "1", "--state-dir", state,
                    "--", "false")  # fmt: skip
    text = workqueue("status", "--state-dir", state)
    shown = "esc\\x1b[2J\\x1b]0;owned\\x07x.mp4"
    for said in (ran.stdout, ran.stderr, text.stdout):
        assert "\x1b" not in said and "\x07" not in said
    assert shown in ran.stdout and shown in ran.stderr and shown in text.stdout
    body = json.loads(workqueue("status", "--state-dir", state, "--json").stdout)
    assert [i["name"] for i in body["items"]] == [HOSTILE]  # JSON: the name exactly


def test_a_source_password_reaches_no_process_s_arguments(tmp_path):
    """Given in the environment, a source's password shows in no process's arguments (`ps`):
    the ambassador hands its configuration to its snapshot process through a pipe."""
    import requests

    from tests.support.stores import RedisServer

    redis = RedisServer(password=SECRET)
    try:
        redis.client().sadd("jobs", "a", "b")
        url = redis.url.replace("redis://", f"redis://:{SECRET}@") + "?set=jobs"
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "kube_workqueue.manager.cli", "ambassador", "--port", str(port)],
            env=dict(os.environ, WORKQUEUE_SOURCE=url), stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:

            def ready() -> bool:
                try:
                    return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).ok
                except requests.RequestException:
                    return False

            wait_until(ready, timeout=60)
            seen = [server.pid, *descendants(server.pid)]
            commands = [read(f"/proc/{pid}/cmdline") for pid in seen]
            assert any(b"kube_workqueue.ambassador.publication" in c for c in commands), (
                commands
            )  # the publisher
            for command in commands:
                assert SECRET.encode() not in command, command
        finally:
            server.terminate()
            server.wait(30)
    finally:
        redis.stop()


def read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_no_worker_gets_the_managers_secrets(tmp_path, postgres):
    """On a shared ledger every worker's environment lacks the ledger's URL, libpq's
    credentials and the dashboard's token (an item's worker could write the ledger); without
    one, a user's own PG* settings stay the worker's. No worker ever gets a source's or a
    cloud client's credential (every one the registry declares: an item's worker could write
    to or delete the queue's own source) - but one named by `--worker-env`, and the settings
    beside them (an endpoint) are the worker's."""
    folder = tmp_path / "items"
    folder.mkdir()
    for i in range(3):
        (folder / f"i{i}.txt").write_text("x")
    dump = tmp_path / "dump.sh"
    dump.write_text('#!/bin/sh\nenv > "$ENV_DIR/$$.env"\n')
    dump.chmod(0o755)
    secrets = {"WORKQUEUE_LEDGER": postgres, "PGPASSWORD": SECRET, "PGUSER": "postgres",
               "WORKQUEUE_UI_TOKEN": "a-long-dashboard-token-1234567890"}  # fmt: skip
    sources = {name: SECRET for name in credential_variables()}
    secrets.update(sources, AWS_ENDPOINT_URL="http://127.0.0.1:9/")  # (a setting: passed on)
    for shared in (True, False):
        envs = tmp_path / f"env-{shared}"
        envs.mkdir()
        env = dict(os.environ, ENV_DIR=str(envs), **secrets)
        if not shared:
            del env["WORKQUEUE_LEDGER"]
        ran = workqueue(
            "run",
            folder,
            "--suffix",
            ".txt",
            "--settle",
            "0",
            "--metrics-port",
            "0",
            "--state-dir",
            tmp_path / f"state-{shared}",
            *([] if shared else ["--worker-env", "AZURE_STORAGE_CONNECTION_STRING"]),
            "--",
            dump,
            env=env,
        )
        assert ran.returncode == 0, ran.stderr
        assert "REDIS_PASSWORD" in ran.stderr and SECRET not in ran.stderr  # said, by name
        seen = [p.read_text() for p in envs.iterdir()]
        assert len(seen) == 3
        passed = set() if shared else {"AZURE_STORAGE_CONNECTION_STRING"}
        for text in seen:
            names = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
            assert not names & {"WORKQUEUE_LEDGER", "WORKQUEUE_UI_TOKEN"}, names
            assert ("PGPASSWORD" in names) is not shared and ("PGUSER" in names) is not shared
            assert names & set(sources) == passed, names & set(sources)
            assert "ENV_DIR" in names and "WORK_ITEM_FILE" in names
            assert "AWS_ENDPOINT_URL" in names


def test_a_variable_in_the_environment_lets_no_secret_in_on_the_command_line(postgres):
    """`WORKQUEUE_LEDGER` set, and a password typed in `--ledger` as well: refused, as it is
    without the variable; the same for `--ui-token` beside `WORKQUEUE_UI_TOKEN`."""
    typed = postgres.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")
    said = workqueue("status", "--ledger", typed, env=dict(os.environ, WORKQUEUE_LEDGER=postgres))
    assert said.returncode == 2 and "visible to every user" in said.stderr, said.stderr
    assert SECRET not in said.stderr
    token = "typed-token-nobody-should-see-123456"
    run = workqueue(
        "run",
        ".",
        "--metrics-port",
        "0",
        "--ui-token",
        token,
        "--",
        "true",
        env=dict(os.environ, WORKQUEUE_UI_TOKEN="another-long-token-1234567890"),
    )
    assert run.returncode == 2 and "WORKQUEUE_UI_TOKEN" in run.stderr and token not in run.stderr
