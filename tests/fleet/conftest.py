"""What the shared ledger's tests share: ledgers on a real PostgreSQL (one database per test),
a monotonic clock the test steps, a heartbeat watched over stepped time, raw SQL, and a
connection lost at one statement (`Cut`)."""

from __future__ import annotations

import psycopg
import pytest

from kube_workqueue.manager.fleet.database import Database
from kube_workqueue.manager.fleet.ledger import PostgresLedger
from tests.support.servers import wait_until


class Ticking:
    """A monotonic clock the test moves (the heartbeat's judge of silence)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def open_ledger(postgres):
    """`make(owner, join=True, **kw)`: a ledger of this test's database, closed at the end."""
    opened = []

    def make(owner: str, *, join: bool = True, **kw) -> PostgresLedger:
        ledger = PostgresLedger(Database(postgres), owner, **kw)
        if join:
            ledger.join()
        opened.append(ledger)
        return ledger

    yield make
    for ledger in opened:
        ledger.close()


def watch(observer: PostgresLedger, clock: Ticking, seconds: float, step: float = 1.0):
    """`observer`'s heartbeat rounds over `seconds` of its clock, a round every `step`."""
    let_go = observer.heartbeat_round()
    for _ in range(int(seconds / step)):
        clock.now += step
        let_go += observer.heartbeat_round()
    return let_go


def sql(ledger: PostgresLedger, text: str, *values):
    with ledger.db.session() as session:
        session.cursor.execute(text, values)
        cur = session.cursor
        return cur.fetchall() if cur.description else cur.rowcount


class Cut:
    """Loses the connection at the first run of one statement: `before` the server got it
    (the backend terminated from outside), or `after` it committed (the answer dropped)."""

    def __init__(self, admin: psycopg.Connection, statement: str, phase: str) -> None:
        self.admin = admin
        self.statement = statement
        self.phase = phase
        self.done = False

    def __call__(self, name: str, phase: str, cursor) -> None:
        if self.done or name != self.statement or phase != self.phase:
            return
        self.done = True
        if phase == "before":
            pid = cursor.connection.info.backend_pid
            self.admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            gone = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)"
            wait_until(lambda: self.admin.execute(gone, (pid,)).fetchone()[0], timeout=30)
        else:
            cursor.connection.close()
            raise psycopg.OperationalError("the answer was lost (the test cut the connection)")
