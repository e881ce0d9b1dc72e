"""The shared ledger's connection keeps one cursor for its statements in turn (`Database._cursor`):
what that must never change - a nested session's results, a big result's memory, a connection
the server ended."""

from __future__ import annotations

import psycopg
import pytest

from kube_workqueue.manager.fleet.database import KEPT_ROWS, Database, _ended
from kube_workqueue.manager.fleet.statements import Statement
from tests.support.servers import wait_until

ECHO = Statement("echo", "SELECT %(value)s::int")
SERIES = Statement("series", "SELECT generate_series(1, %(rows)s)")
BACKEND = Statement("backend", "SELECT pg_backend_pid()")


@pytest.fixture
def db(postgres):
    database = Database(postgres)
    yield database
    database.close()


def test_statements_in_turn_share_one_cursor(db):
    assert db.run(ECHO, value=1) == [(1,)]
    kept = db._cursor
    assert db.run(ECHO, value=2) == [(2,)]
    assert db._cursor is kept and not kept.closed


def test_a_session_nested_in_another_never_overwrites_its_result(db):
    with db.session() as outer:
        outer.execute(ECHO, None, {"value": 1})
        assert db.run(ECHO, value=2) == [(2,)]  # (a nested session, the same thread)
        assert outer.cursor.fetchall() == [(1,)]


def test_a_big_result_is_not_kept_alive_after_its_session(db):
    assert len(db.run(SERIES, rows=KEPT_ROWS)) == KEPT_ROWS
    assert db._cursor is not None  # small enough: kept
    assert len(db.run(SERIES, rows=KEPT_ROWS + 1)) == KEPT_ROWS + 1
    assert db._cursor is None  # its rows went with its cursor
    assert db.run(ECHO, value=3) == [(3,)]


def test_a_connection_the_server_ended_takes_its_cursor_with_it(db, postgres):
    first = db.run(BACKEND)[0][0]
    kept = db._cursor
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    wait_until(lambda: _ended(db._conn), timeout=30)  # its farewell is on the socket
    assert db.run(BACKEND)[0][0] != first  # a new connection, and a new cursor with it
    assert db._cursor is not kept
