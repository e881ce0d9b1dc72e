"""A shared ledger's URL and its database, as a user gets them wrong - against a real PostgreSQL,
on the real command: each mistake is one line naming its cause, exit 2, no traceback, no
password shown; a password typed on the command line is refused; a ledger keeps to a schema
of its own beside another application's tables; commands that only read create nothing."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import uuid

import psycopg
import pytest

from tests.manager.cli import test_user_errors as user_errors
from tests.support.servers import wait_until

SECRET = "s3cret-Pw"


def workqueue(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli",
         *map(str, args)], capture_output=True, text=True,
        timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def in_process(*args):
    """The command in this process (a mistake that needs no environment of its own: the
    same `main` the console script runs, without an interpreter's start-up per case)."""
    from kube_workqueue.manager.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as done:
            code = done.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def one_line_exit_2(r, *words):
    user_errors.one_line_exit_2(r, *words)
    assert SECRET not in r.stderr + r.stdout


@pytest.fixture(scope="module")
def pw_user(postgres_server):
    """A role that must give a password, and a database it owns."""
    name = f"pw_{uuid.uuid4().hex[:8]}"
    postgres_server.password_role(name, SECRET)
    url = postgres_server.role_database(name)
    no_password = url.replace(f"{name}@", f"{name}:@")

    def refused() -> bool:
        try:
            psycopg.connect(no_password, connect_timeout=3).close()
        except psycopg.OperationalError:
            return True
        return False

    wait_until(refused, timeout=30)  # the server has read its new rule
    return name, url


def test_a_wrong_password_is_the_users_mistake(pw_user):
    name, url = pw_user
    r = workqueue("status", "--ledger", url, env={"PGPASSWORD": "wrong"})
    one_line_exit_2(r, f"the password of user {name} is wrong", "PGPASSWORD")


def test_no_password_where_one_is_needed(pw_user):
    name, url = pw_user
    nothing = {"PGPASSWORD": "", "PGPASSFILE": "/nonexistent/pgpass"}
    r = workqueue("status", "--ledger", url, env=nothing)
    one_line_exit_2(r, "none was given", "PGPASSWORD")


def test_the_right_password_from_the_environment_works(pw_user, tmp_path):
    _, url = pw_user
    r = workqueue("pause", "--ledger", url, env={"PGPASSWORD": SECRET})
    assert r.returncode == 0, r.stderr
    with_password = url.replace("@", f":{SECRET}@")
    r = workqueue("status", env={"WORKQUEUE_LEDGER": with_password, "PGPASSWORD": ""})
    assert r.returncode == 0, r.stderr  # the whole URL in the environment: accepted ...
    assert SECRET not in r.stdout + r.stderr and "***" in r.stdout  # ... never shown


@pytest.mark.parametrize(
    ("ledger", "says"),
    [
        ("postgresql://nobody_here@127.0.0.1:{port}/postgres", "there is no role nobody_here"),
        ("postgresql://postgres@127.0.0.1:{port}/no_such_db", "there is no database no_such_db"),
        ("postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=require", "SSL"),
        ("postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=bogus", "invalid sslmode"),
        ("postgresql://postgres@127.0.0.1:{port}/postgres?bogus=1", 'query parameter: "bogus"'),
        ("postgresql://postgres@127.0.0.1:{port}/postgres?schema=Not-A-Name", "schema="),
        ("postgresql://postgres@[::1:{port}/postgres", "not a URL"),
        ("postgresql://postgres@127.0.0.1:port/postgres", "the port is not a number"),
        ("postgresql://postgres@127.0.0.1:{port}/postgres?schema=pg_catalog", "PostgreSQL's own"),
        (
            "postgresql://postgres@127.0.0.1:{port}/postgres?schema=information_schema",
            "PostgreSQL's own",
        ),
    ],
)
def test_each_url_mistake_is_one_line_naming_its_cause(postgres_server, ledger, says):
    r = in_process("status", "--ledger", ledger.format(port=postgres_server.port))
    one_line_exit_2(r, says)


@pytest.mark.parametrize(
    "ledger",
    [f"postgresql://wq:{SECRET}@127.0.0.1/q", f"postgresql://wq@127.0.0.1/q?password={SECRET}"],
)
@pytest.mark.parametrize("command", [["status"], ["pause"], ["run", ".", "--", "true"]])
def test_a_password_typed_on_the_command_line_is_refused(ledger, command):
    argv = [*command[:1], "--ledger", ledger, *command[1:]]
    r = in_process(*argv)
    one_line_exit_2(r, "--ledger", "visible to every user", "PGPASSWORD", "WORKQUEUE_LEDGER")


def test_a_password_typed_for_a_migration_is_refused(tmp_path):
    r = in_process("ledger", "migrate", "--state-dir", tmp_path, "--to",
                  f"postgresql://wq:{SECRET}@127.0.0.1/q")  # fmt: skip
    assert r.returncode == 2 and "visible to every user" in r.stderr
    assert SECRET not in r.stderr


def test_a_state_directory_that_is_a_file_beside_a_ledger(postgres, tmp_path):
    (tmp_path / "items").mkdir()
    (tmp_path / "a-file").write_text("")
    r = in_process("run", tmp_path / "items", "--ledger", postgres, "--state-dir",
                  tmp_path / "a-file", "--", "true")  # fmt: skip
    one_line_exit_2(r, "is a file, not a folder")


def test_a_command_that_reads_creates_nothing_in_an_empty_database(postgres):
    r = in_process("status", "--ledger", postgres)
    one_line_exit_2(r, "no queue here", "schema workqueue")
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT to_regnamespace('workqueue')").fetchone()[0] is None


def test_a_ledger_beside_another_applications_tables(postgres, tmp_path):
    """Another application's `items`, `queue` and `managers` tables in `public` are never
    ours: a run, `status` and `retry` work on the ledger's own schema."""
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id serial PRIMARY KEY, sku text)")
        conn.execute("CREATE TABLE queue (job text)")
        conn.execute("CREATE TABLE managers (who text)")
        conn.execute("INSERT INTO items (sku) VALUES ('theirs')")
    folder = tmp_path / "items"
    folder.mkdir()
    for name in ("a.txt", "fail-b.txt"):
        (folder / name).write_text(name)
    worker = tmp_path / "w.sh"
    worker.write_text('#!/bin/sh\ncase "$(cat "$WORK_ITEM_FILE")" in *fail*) exit 3;; esac\n')
    worker.chmod(0o755)
    r = workqueue("run", folder, "--suffix", ".txt", "--settle", "0", "--ledger", postgres,
                  "--state-dir", tmp_path / "state", "--max-attempts", "1",
                  "--", worker)  # fmt: skip
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr  # one failed on purpose
    r = workqueue("status", "--ledger", postgres)
    assert r.returncode == 0 and "2 items" in r.stdout, r.stderr
    assert workqueue("retry", "fail-b.txt", "--ledger", postgres).returncode == 0
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT sku FROM public.items").fetchall() == [("theirs",)]
        assert conn.execute("SELECT count(*) FROM workqueue.items").fetchone()[0] == 2


def test_status_reads_a_read_only_database(postgres, tmp_path):
    assert workqueue("pause", "--ledger", postgres).returncode == 0  # (a ledger made)
    name = postgres.rsplit("/", 1)[1]
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    r = workqueue("status", "--ledger", postgres)
    assert r.returncode == 0 and "paused since" in r.stdout, r.stderr
    r = workqueue("resume", "--ledger", postgres)  # a write: refused, one line
    assert r.returncode == 3 and "read-only" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_role_without_rights_on_the_ledger_is_told_what_to_grant(postgres_server, tmp_path):
    """A role that may connect but not make or use the ledger's schema: one line naming the
    GRANT, at once (no retries, no traceback) - for a manager and for `status`; given USAGE
    but no rights on the tables, still one line."""
    admin = postgres_server.database()
    database = admin.rsplit("/", 1)[1]
    role = f"norights_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'REVOKE CREATE ON DATABASE "{database}" FROM PUBLIC')
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    url = admin.replace("postgresql://postgres@", f"postgresql://{role}@")
    folder = tmp_path / "items"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    run = ("run", folder, "--suffix", ".txt", "--ledger", url, "--state-dir", tmp_path / "s",
           "--", "true")  # fmt: skip
    one_line_exit_2(workqueue(*run), "permission denied")
    first = workqueue("run", folder, "--suffix", ".txt", "--ledger", admin,
                      "--state-dir", tmp_path / "admin", "--", "true")  # fmt: skip
    assert first.returncode == 0, first.stderr  # the ledger made by its owner
    for command in (run, ("status", "--ledger", url)):
        one_line_exit_2(workqueue(*command), f"GRANT USAGE, CREATE ON SCHEMA workqueue TO {role}")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'GRANT USAGE ON SCHEMA workqueue TO "{role}"')
    one_line_exit_2(workqueue("status", "--ledger", url), "permission denied for table")


def test_a_local_socket_url_is_kept_as_written(postgres_server):
    """`postgresql:///db` (the local socket, host and user from PGHOST, PGUSER) is what libpq
    reads - not rewritten to `postgresql:/db` - and shown as written."""
    database = postgres_server.database().rsplit("/", 1)[1]
    env = {"PGHOST": postgres_server.folder, "PGPORT": str(postgres_server.port),
           "PGUSER": "postgres"}  # fmt: skip
    r = workqueue("pause", "--ledger", f"postgresql:///{database}", env=env)
    assert r.returncode == 0, r.stderr
    r = workqueue("status", "--ledger", f"postgresql:///{database}", env=env)
    assert r.returncode == 0 and f"postgresql:///{database}" in r.stdout, r.stdout + r.stderr


def test_a_statement_timeout_in_the_urls_options_is_never_called_an_outage(postgres_server):
    """`?options=-c statement_timeout=1` (1 ms, valid for psql): the ledger's first statement
    sets its own timeout - if the server cancels even that one, one line says why at once;
    else the ledger's own timeout holds and the command works. Never "does not answer"."""
    url = postgres_server.database() + "?options=-c%20statement_timeout%3D1"
    for _ in range(5):
        r = in_process("pause", "--ledger", url)
        if r.returncode == 0:
            continue
        one_line_exit_2(r, "cancelled the ledger's first statement", "statement_timeout")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("-c%20x", "give -c x without a value"),
        ("-c%20work_mem%3Dbanana", 'set work_mem to "banana"'),
        ("-c%20no_such_setting%3D1", "no_such_setting, a setting the server does not know"),
        ("-c%20default_transaction_read_only%3Dbogus", "takes a Boolean value"),
    ],
)
def test_a_setting_the_server_refuses_is_named_never_an_outage(postgres_server, options, says):
    """A setting in the URL's options that the server refuses at the connection's start: one
    line naming it, exit 2 - it was called "does not answer" (exit 3), an outage."""
    r = in_process("status", "--ledger", postgres_server.database() + f"?options={options}")
    one_line_exit_2(r, says)
    assert "does not answer" not in r.stderr


def test_a_need_too_long_for_the_ledger_s_index_is_refused_at_start(postgres, tmp_path):
    """`--needs '*=zone in (z0,…,z999)'` (4.9 KB) passed the start and then failed every write
    on PostgreSQL's index row limit, said as an outage every 2 s while nothing ran: now one
    line at start, exit 2, before the database is touched; the same for --prefers, and an
    error the server gives for what was asked is a refusal, never "does not answer"."""
    need = "zone in (" + ",".join(f"z{i}" for i in range(1000)) + ")"
    for flags in (["--needs", f"*={need}"], ["--prefers", need]):
        r = in_process("run", tmp_path, "--ledger", postgres, *flags, "--", "true")
        one_line_exit_2(r, "at most 1,024 characters", "2,704 bytes")
    with psycopg.connect(postgres, autocommit=True) as conn:
        made = conn.execute("SELECT count(*) FROM information_schema.schemata "
                            "WHERE schema_name = 'workqueue'").fetchone()[0]  # fmt: skip
    assert made == 0  # refused before any connection


def test_an_answer_about_what_was_asked_is_a_refusal_not_an_outage(postgres):
    """What the database returns about a statement (a row too large for its index: class 54,
    which psycopg files under OperationalError) is the ledger refusing it; only a lost or
    refused connection is "does not answer"."""
    from kube_workqueue.manager.faults import LEDGER_ERROR, UNREACHABLE
    from kube_workqueue.manager.fleet.database import fault_of

    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("CREATE TABLE wide (expr text UNIQUE)")
        with pytest.raises(psycopg.Error) as refused:
            conn.execute("INSERT INTO wide VALUES (%s)", (os.urandom(2000).hex(),))
    assert isinstance(refused.value, psycopg.OperationalError)  # (psycopg's filing of it)
    fault = fault_of(refused.value, "the ledger")
    assert fault.kind == LEDGER_ERROR and "does not answer" not in str(fault), fault
    with pytest.raises(psycopg.OperationalError) as lost:
        psycopg.connect("postgresql://postgres@127.0.0.1:9/x", connect_timeout=2)
    assert fault_of(lost.value, "the ledger").kind == UNREACHABLE


def test_a_write_that_makes_the_queue_says_so(postgres):
    """`pause` or `scale` on a database (or schema) without a queue makes one - a pause before
    any manager starts is a use - and says so, so a mistyped name is seen; only the first."""
    url = postgres + "?schema=typo_queue"
    first = workqueue("scale", "--limit", "a=1", "--ledger", url)
    assert first.returncode == 0 and "no queue was there: made one" in first.stdout, first
    again = workqueue("pause", "--ledger", url)
    assert again.returncode == 0 and "no queue was there" not in again.stdout


def test_without_the_postgresql_extra_a_ledger_is_one_line():
    """The wheel without its `postgresql` extra: psycopg is missing - one line naming the
    extra, for a command, a run and a migration."""
    script = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from kube_workqueue.manager.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    for argv in (["status", "--ledger", "postgresql://u@h/db"],
                 ["run", ".", "--ledger", "postgresql://u@h/db", "--", "true"],
                 ["ledger", "migrate", "--to", "postgresql://u@h/db"]):  # fmt: skip
        r = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
        one_line_exit_2(r, "pip install 'kube-workqueue[postgresql]'")
