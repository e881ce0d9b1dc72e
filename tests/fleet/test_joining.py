"""A manager's start on a shared ledger rides out a connection ended under its last statements
(`joining.riding_out_a_lost_connection`): a failover's `pg_terminate_backend` between the
manager's registration and its look at its drain ended a `--once` run with exit 3."""

from __future__ import annotations

import psycopg
import pytest

from kube_workqueue.manager.faults import LEDGER_ERROR, UNREACHABLE, StorageFault
from kube_workqueue.manager.fleet.joining import (
    RETRY_PAUSE_SECONDS,
    riding_out_a_lost_connection,
    settle_claims_and_drain,
)

from .conftest import Cut, sql


@pytest.fixture
def admin(postgres):
    with psycopg.connect(postgres, autocommit=True) as conn:
        yield conn


def test_a_connection_ended_under_the_starts_last_statements_is_ridden_out(open_ledger, admin):
    ledger = open_ledger("a")
    ledger.see(["x"])
    assert ledger.claim(1) == ["x"]  # claimed, never started: let go at the start
    ledger.db.statement_hook = cut = Cut(admin, "is_drained", "before")
    drained = riding_out_a_lost_connection(
        lambda: settle_claims_and_drain(ledger, "a", True), pause=RETRY_PAUSE_SECONDS
    )
    assert cut.done and drained is True
    assert sql(ledger, "SELECT owner FROM items WHERE name = 'x'") == [(None,)]


def test_the_same_statements_alone_fail_on_the_ended_connection(open_ledger, admin):
    """(What the test above rides out is a fault indeed.)"""
    ledger = open_ledger("a")
    ledger.db.statement_hook = Cut(admin, "is_drained", "before")
    with pytest.raises(StorageFault) as raised:
        settle_claims_and_drain(ledger, "a", None)
    assert raised.value.kind == UNREACHABLE


def test_a_refusal_no_wait_mends_is_raised_at_once():
    tries = []

    def refused():
        tries.append(1)
        raise StorageFault(LEDGER_ERROR, "the ledger", "column does not exist")

    with pytest.raises(StorageFault):
        riding_out_a_lost_connection(refused, pause=RETRY_PAUSE_SECONDS)
    assert len(tries) == 1


def test_a_database_that_stays_away_is_raised_once_the_time_is_up():
    tries = []

    def away():
        tries.append(1)
        raise StorageFault(UNREACHABLE, "the ledger", "connection refused")

    with pytest.raises(StorageFault):
        riding_out_a_lost_connection(away, seconds=0.0, pause=RETRY_PAUSE_SECONDS)
    assert len(tries) >= 1
