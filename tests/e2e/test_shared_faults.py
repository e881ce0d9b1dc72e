"""A fleet's faults against a real PostgreSQL: two `workqueue run --ledger` managers share a
folder while the database is cut off (a connection limit of 0), read-only, full, or has its
clock stepped past the lease - each fault longer than the lease - and every item still ends
exactly once, counted from the workers' own marks, with no traceback; a manager stopped longer
than its lease counts what it lost, never another's success as its own.

The faults are made for the test's own role and database on the test process's server (a
connection limit, `default_transaction_read_only`, a tablespace), so the server is shared; a
step of the server's clock needs a server of its own."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from tests.support.postgres import PostgresServer
from tests.support.servers import wait_until

from .conftest import spawn_workqueue

LEASE = "3s"
FAULT_SECONDS = 8  # longer than the lease: a clock or a per-row lease would expire live work


def folder(tmp_path: Path, count: int) -> tuple[Path, list[str]]:
    items = tmp_path / "items"
    items.mkdir()
    names = [f"item-{i:02}.txt" for i in range(count)]
    for name in names:
        (items / name).write_text(name)
    return items, names


@pytest.fixture(autouse=True)
def no_manager_left():
    """Whatever a failed test left running is ended (a stuck manager would hold its server)."""
    yield
    while _SPAWNED:
        run = _SPAWNED.pop()
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)


def start_fleet(tmp_path, url, worker, items, *, managers=2, sleep=0.6, extra=()):
    env = {**os.environ, "SLEEP": str(sleep), "WORKQUEUE_LEDGER": url}
    runs = [
        spawn_workqueue(
            "run",
            items,
            "--suffix",
            ".txt",
            "--settle",
            "0",
            "--lease",
            LEASE,
            "--parallelism",
            "2",
            "--state-dir",
            tmp_path / f"state-{i}",
            *extra,
            "--",
            worker.path,
            env=env,
        )  # fmt: skip
        for i in range(managers)
    ]
    _SPAWNED.extend(runs)
    return runs


_SPAWNED: list[subprocess.Popen] = []


def finish(runs, timeout=240) -> list[tuple[str, str]]:
    outs = []
    for run in runs:
        out, err = run.communicate(timeout=timeout)
        outs.append((out, err))
        assert run.returncode == 0, err
        assert "Traceback" not in err, err
    return outs


def once_each(worker, names) -> None:
    assert Counter(worker.ended()) == Counter(names)  # every item ended, none twice
    assert sorted(worker.started()) == sorted(names)  # and none started twice


def running_soon(worker, count=2, url=None, managers=2) -> None:
    """Until `count` items run and (given the ledger's `url`) every manager is in the line."""
    wait_until(lambda: len(worker.started()) - len(worker.ended()) >= count, timeout=60)
    if url is not None:
        wait_until(lambda: _managers(url) >= managers, timeout=60)


def _managers(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM workqueue.managers").fetchone()[0]


@pytest.fixture
def fleet_db(postgres_server, postgres):
    """A database of its own and its URL as a role of its own that is not a superuser."""
    role = f"wq_{uuid.uuid4().hex[:8]}"
    return postgres_server, postgres_server.role(role, postgres), role


def admin(server: PostgresServer):
    return psycopg.connect(server.url("postgres"), autocommit=True)


def cut_off(conn, role: str) -> None:
    """Every connection of `role` ended (as a failover, a restart or a network cut would)."""
    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                 (role,))  # fmt: skip


def test_an_outage_that_is_not_a_restart_runs_nothing_twice(tmp_path, fleet_db, marker_worker):
    """Every manager cut off (its role's connections limited to 0, its connections ended)
    longer than the lease: when it ends, none expires another's live work."""
    server, url, role = fleet_db
    items, names = folder(tmp_path, 16)
    runs = start_fleet(tmp_path, url, marker_worker, items)
    running_soon(marker_worker, url=url)
    with admin(server) as conn:
        conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT 0")
        cut_off(conn, role)
        time.sleep(FAULT_SECONDS)  # the fault's length is the point: longer than the lease
        conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
    outs = finish(runs)
    once_each(marker_worker, names)
    assert any("does not answer" in err for _, err in outs)  # the fault was met, and held
    # Said when it begins and when it ends (a connection found dead later is a second fault,
    # said again), never at each probe: three warnings every 0.5 s were 48 lines in 8 s.
    for _, err in outs:
        assert len(err.splitlines()) < 30, err


def test_a_read_only_spell_holds_and_passes(tmp_path, fleet_db, marker_worker):
    """The database read-only for longer than the lease (as a failover to a standby and back
    is: connections dropped, then every transaction refused writes, then dropped again):
    every manager holds (one line, no dead thread), and carries on when it is writable."""
    server, url, role = fleet_db
    database = url.rsplit("/", 1)[1]
    items, names = folder(tmp_path, 16)
    runs = start_fleet(tmp_path, url, marker_worker, items)
    running_soon(marker_worker, url=url)
    with admin(server) as conn:
        conn.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        cut_off(conn, role)
        time.sleep(FAULT_SECONDS)
        conn.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        cut_off(conn, role)
    outs = finish(runs)
    once_each(marker_worker, names)
    assert any("read-only" in err for _, err in outs), "\n".join(e for _, e in outs)
    for _, err in outs:
        assert err.count("takes no writes") <= 2, err


def test_a_read_only_spell_ended_by_a_setting_alone_ends_by_itself(
    tmp_path, fleet_db, marker_worker
):
    """As a cloud database whose disk filled is made writable again: the setting is reset and
    nobody ends the sessions opened during the spell. A session that answered read-only is
    closed before the next try, so every manager writes again within a lease - none keeps a
    read-only session for good, nothing runs twice."""
    server, url, role = fleet_db
    database = url.rsplit("/", 1)[1]
    items, names = folder(tmp_path, 16)
    runs = start_fleet(tmp_path, url, marker_worker, items)
    running_soon(marker_worker, url=url)
    with admin(server) as conn:
        conn.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        cut_off(conn, role)  # the managers reconnect during the spell: read-only sessions
        time.sleep(FAULT_SECONDS)
        conn.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        resumed = time.monotonic()
    # within a lease of the reset, every manager's heartbeat counts on again
    with psycopg.connect(url, autocommit=True) as conn:

        def beats() -> dict[str, int]:
            return dict(conn.execute("SELECT id, beat FROM workqueue.managers").fetchall())

        before = beats()
        assert len(before) == 2
        wait_until(lambda: all(beats()[who] > beat for who, beat in before.items()), timeout=60)
    assert time.monotonic() - resumed < float(LEASE.rstrip("s")) * 4
    outs = finish(runs)
    once_each(marker_worker, names)
    assert any("read-only" in err for _, err in outs), "\n".join(e for _, e in outs)


def test_a_manager_stopped_during_a_read_only_spell_runs_nothing_twice(
    tmp_path, fleet_db, marker_worker
):
    """A manager stopped (SIGTERM) while its ends cannot be written: it tries them once more as
    it leaves, and what it still could not write waits in its keeper's journal, settled by its
    next start - every item once, by the workers' marks."""
    server, url, role = fleet_db
    database = url.rsplit("/", 1)[1]
    items, names = folder(tmp_path, 10)
    (run,) = start_fleet(tmp_path, url, marker_worker, items, managers=1, sleep=0.4)
    running_soon(marker_worker, url=url, managers=1)
    said: list[str] = []  # its log as it comes (a thread reads it: the test waits on it)
    reader = threading.Thread(target=lambda: said.extend(run.stderr), daemon=True)
    reader.start()
    with admin(server) as conn:
        conn.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        cut_off(conn, role)
        held = len(marker_worker.ended())
        wait_until(lambda: len(marker_worker.ended()) >= held + 2, timeout=60)  # ends unwritten
        # its first fault may be the ended connection (an outage) or the read-only session; a
        # probe every 2 s meets the read-only one: stopped once it has said so
        wait_until(lambda: any("read-only" in line for line in said), timeout=60)
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=120)
        reader.join(60)
        err = "".join(said)
        assert "Traceback" not in err, err
        assert "next start records it without running it again" in err, err
        conn.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
    (again,) = start_fleet(tmp_path, url, marker_worker, items, managers=1, sleep=0.4)
    finish([again])
    once_each(marker_worker, names)


def test_a_full_disk_holds_and_passes(tmp_path, postgres_server, marker_worker):
    """The ledger's tables on a tablespace whose file system fills up for longer than the
    lease. A transaction held open meanwhile (a long report elsewhere) keeps every row version
    the managers write from then on, so their writes need new pages while the disk is full:
    without it PostgreSQL could reuse the space of versions it pruned, and a loaded machine's
    managers met no full disk at all (seen twice)."""
    space = Path(tempfile.mkdtemp(prefix="wq-small-"))  # (the server's user must reach it)
    space.chmod(0o755)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(space)],
                       check=True, capture_output=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a small file system here: {exc}")
    name = f"small_{uuid.uuid4().hex[:8]}"
    try:
        os.chown(space, *_postgres_ids())
        with admin(postgres_server) as conn:
            conn.execute(f"CREATE TABLESPACE {name} LOCATION '{space}'")
            conn.execute(f"CREATE DATABASE {name} TABLESPACE {name}")
        url = postgres_server.role(name, postgres_server.url(name))
        items, names = folder(tmp_path, 60)
        runs = start_fleet(tmp_path, url, marker_worker, items, sleep=0.3)
        running_soon(marker_worker, url=url)
        server_log = os.path.join(postgres_server.folder, "log")
        logged = os.path.getsize(server_log)
        with psycopg.connect(postgres_server.url(name)) as report:  # (not autocommit)
            report.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            report.execute("SELECT count(*) FROM workqueue.items")  # its snapshot, held
            ballast = space / "ballast"
            subprocess.run(["dd", "if=/dev/zero", f"of={ballast}", "bs=64k"],
                           capture_output=True)  # fmt: skip
            wait_until(lambda: "No space left on device"
                       in PostgresServer._log_since(server_log, logged), timeout=120)  # fmt: skip
            time.sleep(FAULT_SECONDS)  # (the fault met: it lasts longer than the lease)
            ballast.unlink()
        outs = finish(runs)
        once_each(marker_worker, names)
        assert any("has no room" in err for _, err in outs)  # the fault was met, and held
    finally:
        # The database and its tablespace go before their file system does: the server is
        # the test process's for its other tests, and its next checkpoint would write the
        # small database's dirty pages into a folder that is gone (a later CREATE DATABASE
        # failed on it).
        with admin(postgres_server) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"DROP TABLESPACE IF EXISTS {name}")
        subprocess.run(["umount", "-l", str(space)], capture_output=True)
        shutil.rmtree(space, ignore_errors=True)


def _postgres_ids() -> tuple[int, int]:
    import pwd

    user = pwd.getpwnam("postgres") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    return user.pw_uid, user.pw_gid


def test_steps_of_the_database_clock_past_the_lease_expire_nothing(tmp_path, marker_worker):
    server = PostgresServer(stepped_clock=True)
    try:
        url = server.role("wq", server.database())
        items, names = folder(tmp_path, 16)
        runs = start_fleet(tmp_path, url, marker_worker, items)
        running_soon(marker_worker, url=url)
        for offset in (45, 90, 150):  # three forward steps, each past the lease
            server.step_clock(offset)
            time.sleep(1.5)
        finish(runs)
        once_each(marker_worker, names)
        with psycopg.connect(url) as conn:
            stepped = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0]
        assert stepped > time.time() + 100  # the server's clock really was ahead
    finally:
        server.close()


def test_a_manager_stopped_longer_than_its_lease_counts_what_it_lost(
    tmp_path, fleet_db, marker_worker
):
    """SIGSTOP past the lease: the other manager takes its claims (the documented case where
    work runs twice - its workers ran on); when it wakes it ends what it still runs of them,
    writes none of their ends, and its summary counts them lost, not succeeded."""
    server, url, _ = fleet_db
    items, names = folder(tmp_path, 12)
    stopped, other = start_fleet(tmp_path, url, marker_worker, items, sleep=2.5)
    running_soon(marker_worker, 4, url=url)
    stopped.send_signal(signal.SIGSTOP)
    try:
        time.sleep(FAULT_SECONDS)
    finally:
        stopped.send_signal(signal.SIGCONT)
    outs = finish([stopped, other])
    succeeded = [_count(out, "succeeded") for out, _ in outs]
    assert sum(succeeded) == len(names), "\n".join(o + e for o, e in outs)  # one manager each
    assert "lost" in outs[0][0] or "did not beat" in outs[1][1], outs
    with psycopg.connect(url) as conn:
        states = dict(conn.execute("SELECT name, state FROM workqueue.items").fetchall())
    assert set(states.values()) == {"succeeded"}


def _count(summary: str, what: str) -> int:
    import re

    found = re.search(rf"(\d+) {what}", summary)
    return int(found.group(1)) if found else 0


def test_connections_killed_again_and_again_lose_and_repeat_nothing(
    tmp_path, fleet_db, marker_worker
):
    """Every connection of the managers ended every 0.3 s for a while: at any statement of a
    claim, a beat, a start or a finish."""
    server, url, role = fleet_db
    items, names = folder(tmp_path, 24)
    runs = start_fleet(tmp_path, url, marker_worker, items, sleep=0.3)
    running_soon(marker_worker, url=url)  # (a manager's set-up is not what this is about)
    stop = threading.Event()

    def kill_connections():
        with admin(server) as conn:
            while not stop.wait(0.3):
                cut_off(conn, role)

    killer = threading.Thread(target=kill_connections)
    killer.start()
    try:
        wait_until(lambda: len(marker_worker.ended()) >= len(names) // 2, timeout=120)
    finally:
        stop.set()
        killer.join()
    finish(runs)
    once_each(marker_worker, names)
