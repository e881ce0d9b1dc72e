"""The shared ledger's statements against a real PostgreSQL: each hot one reads through its
index (an EXPLAIN regression test at a size where the planner would rather scan), and the
connection lost at any statement of a claim, a heartbeat, a start or a finish - before the
server ran it, or after it committed but before the answer came - leaves nothing claimed or
running that nobody knows of, and no item run twice."""

from __future__ import annotations

import psycopg
import pytest

from kube_workqueue.manager.faults import StorageFault
from kube_workqueue.manager.fleet import group_claims, manager_statements, placement_statements
from kube_workqueue.manager.fleet import statements as sql_statements
from kube_workqueue.manager.fleet.statements import Statement

from .conftest import Cut, sql

INDEXED = {  # hot statement -> the index its plan must use
    "claim": "items_line",
    "waiting": "items_line",
    "claimed_count": "items_claims",
    "owned": "items_claims",
    "others_running": "items_claims",
    "changes_since": "items_changed",
    "beat": "managers_pkey",
    "group_claimed": "items_claims",
    "group_starts": "group_starts_at",
    "group_heads": "items_line",
    "claim_named": "items_pkey",
    "finish_and_claim": "items_line",
}
PARAMS = {"owner": "a", "key": 1, "longest": 60, "each": 4, "held": "{}",
          "names": "{waiting}", "name": "x", "state": "succeeded", "at": 0, "exit_code": 0,
          "error": "", "failed": "false", "max_attempts": 3, "backoff": 0,
          "attempt": 1}  # fmt: skip


def hot_statements() -> list[Statement]:
    return [
        s
        for module in (sql_statements, manager_statements, placement_statements, group_claims)
        for s in vars(module).values()
        if isinstance(s, Statement) and s.hot
    ]


def test_every_hot_statement_is_checked():
    assert {s.name for s in hot_statements()} - {"settings"} == set(INDEXED)


def test_every_hot_statement_reads_through_its_index(open_ledger):
    a = open_ledger("a")
    sql(a, "INSERT INTO items (name, first_seen, state, claimable) SELECT 'done-' || i, 0, "
           "'succeeded', false FROM generate_series(1, 50000) i")  # fmt: skip
    sql(a, "INSERT INTO managers (id, lease) SELECT 'm' || i, 30 FROM generate_series(1, 500) i")
    sql(
        a,
        "INSERT INTO group_starts (grp, at) SELECT 'g' || mod(i, 50), now() - interval '1 day' "
        "FROM generate_series(1, 20000) i",
    )  # fmt: skip  (a rate's old starts, not yet pruned)
    a.see(["waiting"])
    a.claim(1)
    sql(a, "ANALYZE")
    now = sql(a, "SELECT pg_current_snapshot()::text")[0][0]  # a reader's snapshot: recent
    for statement in hot_statements():
        if statement.name == "settings":  # the queue's one row
            continue
        text = statement.sql.format(
            turn="true", may="need = ANY('{1,2,3}'::integer[])", spill="true", limit=8
        )
        plan = "\n".join(row[0] for row in sql(a, "EXPLAIN " + _inline(text, since=now)))
        assert INDEXED[statement.name] in plan, (statement.name, plan)


def _inline(text: str, **given) -> str:
    """The statement with its parameters written in (EXPLAIN takes no parameters here)."""
    for key, value in {**PARAMS, **given}.items():
        text = text.replace(f"%({key})s", repr(value) if isinstance(value, str) else str(value))
    return text


CASES = [
    (op, statement, phase)
    for op, statements in {
        "claim": ["claim"],
        "bounded claim": ["bound_lock", "claimed_count", "claim"],
        "start": ["start"],
        "finish": ["finish"],
        "beat": ["beat", "observe", "orphans"],
    }.items()
    for statement in statements
    for phase in ("before", "after")
]


@pytest.mark.parametrize(("op", "statement", "phase"), CASES)
def test_a_connection_lost_at_any_statement_loses_nothing_and_runs_nothing_twice(
    open_ledger, postgres, op, statement, phase
):
    a, b = open_ledger("a", max_attempts=3), open_ledger("b", max_attempts=3)
    a.see(["x"])
    if op == "bounded claim":
        a.want_parallelism(4)
        a._settings = (-1e18, a._settings[1])
    if op in ("start", "finish"):
        assert a.claim(1) == ["x"]
    if op == "finish":
        a.start("x", "log")
    with psycopg.connect(postgres, autocommit=True) as admin:
        cut = Cut(admin, statement, phase)
        a.db.statement_hook = a.liveness.db.statement_hook = cut
        with pytest.raises(StorageFault):
            if op in ("claim", "bounded claim"):
                a.claim(1)
            elif op == "start":
                a.start("x", "log")
            elif op == "finish":
                a.finish("x", True, 0, None)
            else:
                a.liveness._last_beat = None  # (a beat is due)
                a.liveness._last_orphans = -1e18  # (the orphans' look is due too)
                a.heartbeat_round()
        assert cut.done
    # the manager's duties after a fault: hold, then - the database back - its heartbeat
    # round (which settles what it does not know it holds), and the writes it kept
    a.heartbeat_round()
    if op == "finish":
        a.finish("x", True, 0, None)  # the outcome kept from the record, written again
        row = a.row("x")
        assert (row.state, row.attempts) == ("succeeded", 1)
        assert a.claim_counters()["lost"] == 0 and a.claim_counters()["done"] == 1
        return
    if op == "beat":
        assert b.heartbeat_round() == []  # a beat lost is no death
        assert sql(a, "SELECT count(*) FROM managers") == [(2,)]
        return
    # claim or start: whatever happened, x is claimable again and nobody holds it unknowingly
    row = a.row("x")
    assert (row.state, row.attempts) == ("pending", 0)
    assert sql(a, "SELECT owner FROM items WHERE name = 'x'") == [(None,)]
    assert b.claim(1) == ["x"]  # b runs it, once
    assert b.start("x", "log") == 1
    b.finish("x", True, 0, None)
    assert a.claim(1) == []


def test_a_connection_the_server_ended_while_idle_is_replaced_before_its_next_statement(
    open_ledger,
):
    """An outage's `pg_terminate_backend` ends connections nobody is using: the next statement
    goes out on a new one, instead of failing on the dead one (a finished `--once` run ended
    "does not answer" releasing its claims)."""
    from kube_workqueue.manager.fleet.database import _ended
    from tests.support.servers import wait_until

    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x"])
    (pid,) = sql(a, "SELECT pg_backend_pid()")[0]
    sql(b, "SELECT pg_terminate_backend(%s)", pid)
    wait_until(lambda: _ended(a.db._conn), timeout=30)  # its farewell is on the socket
    assert a.see(["y"]) == ["y"]  # no StorageFault: a new connection took it
    assert sql(a, "SELECT pg_backend_pid()")[0][0] != pid


def test_a_big_listing_into_a_line_last_analyzed_empty_still_claims_through_the_index(
    open_ledger,
):
    """Statistics that saw the line empty made PostgreSQL scan and sort every waiting row for
    each claim under four managers' turns (1.3 ms a claim at 5,000 waiting, against 0.06 ms):
    a listing of many new names brings them up to date, and the claim walks the line's index
    in order (no sort) and stops at its first free row."""
    a = open_ledger("a")
    sql(a, "ANALYZE")  # what the statistics know: an empty line
    a.see([f"item-{i:05}" for i in range(5000)])
    turn = (
        "(listed_at < clock_timestamp() - interval '0.25 seconds' "
        "OR mod(hashtext(name) & 2147483647, 4) = 0)"
    )  # four live managers, the first's
    text = _inline(sql_statements.CLAIM.sql.format(turn=turn, may="false", spill="true", limit=1))
    plan = "\n".join(row[0] for row in sql(a, "EXPLAIN " + text))
    assert "Index Scan using items_line" in plan and "Sort" not in plan, plan


def test_the_claim_is_planned_once_a_connection_not_at_every_call(open_ledger):
    """A plan made for any limit ("LIMIT $n") reads a tenth of the line and sorts it, so
    PostgreSQL made a custom plan for every claim - 270-300 us of planning a claim, more than
    the claim's own 100-120 us (pg_stat_statements over a drain of 5,000). With the limit
    written into the text, the claim's prepared statement keeps its one generic plan."""
    a = open_ledger("a")
    a.see([f"item-{i:05}" for i in range(2000)])
    taken = [a.claim(1) for _ in range(20)]
    assert [name for names in taken for name in names] == [f"item-{i:05}" for i in range(20)]
    ((generic, custom),) = sql(
        a,
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '%%FOR UPDATE SKIP LOCKED%%'",
    )
    assert generic >= 5 and custom <= 5, (generic, custom)


def test_a_claim_with_a_thousand_needs_half_met_walks_the_line_in_order_by_one_expression(
    open_ledger,
):
    """Placement (`statements.FREE`'s `{may}`): the needs a manager meets are one constant bit
    string, looked up per row of the line's index - no sort, no scan of the table, at 1,000
    distinct needs as at none; and the planner estimates it as one expression, where a list
    of 500 met ids was estimated id by id at every claim (0.8 ms of planning, twice the
    claim)."""
    from kube_workqueue.manager.placement import Placement, offer

    a = open_ledger("a", join=False)
    a.place(Placement([offer(f"k{i}=y") for i in range(1, 1001, 2)], []))
    a.join()
    sql(a, "INSERT INTO needs (expr) SELECT 'k' || i FROM generate_series(1, 1000) i")
    a.see([f"item-{i:05}" for i in range(5000)])
    sql(a, "UPDATE items SET need = 1 + mod(hashtext(name) & 2147483647, 1000)")
    sql(a, "ANALYZE")
    may = a._may_condition()
    assert "get_bit" in may and may.count("1") >= 500  # the odd ones, one bit each
    spill = "greatest(listed_at, ready_at) < clock_timestamp() - interval '30.000 seconds'"
    text = _inline(sql_statements.CLAIM.sql.format(turn="true", may=may, spill=spill, limit=1))
    plan = "\n".join(row[0] for row in sql(a, "EXPLAIN " + text))
    assert "Index Scan using items_line" in plan and "Sort" not in plan, plan
    (taken,) = a.claim(1)
    need = sql(a, "SELECT expr FROM needs JOIN items ON items.need = needs.id WHERE name = %s",
               taken)[0][0]  # fmt: skip
    assert int(need[1:]) % 2 == 1  # one this manager meets


@pytest.mark.parametrize("phase", ["before", "after"])
def test_a_finish_that_claims_and_loses_its_answer_runs_nothing_twice_and_holds_nothing_unknown(
    open_ledger, postgres, phase
):
    """A finish that claims the slot's next item in its statement (`finish_and_claim`): the
    connection lost before the server ran it, or after it committed - the finish is written
    again and found done, and the item it may have claimed is let go, claimable by anyone,
    run once."""
    a, b = open_ledger("a", max_attempts=3), open_ledger("b", max_attempts=3)
    told: list[list[str]] = []
    a.claim_with_finishes(lambda: 1, told.append)
    a.see(["x", "y"])
    assert a.claim(1) == ["x"]
    a.start("x", "log")
    with psycopg.connect(postgres, autocommit=True) as admin:
        cut = Cut(admin, "finish_and_claim", phase)
        a.db.statement_hook = cut
        with pytest.raises(StorageFault):
            a.finish("x", True, 0, None)
        assert cut.done
    assert told == []  # nothing it may have claimed is told to the line
    a.heartbeat_round()  # the database back: what a holds without knowing it is let go
    a.claim_with_finishes(lambda: 0, told.append)
    a.finish("x", True, 0, None)  # the outcome kept, written again, found done
    row = a.row("x")
    assert (row.state, row.attempts) == ("succeeded", 1)
    assert a.claim_counters()["lost"] == 0
    assert sql(a, "SELECT owner FROM items WHERE name = 'y'") == [(None,)]
    assert b.claim(1) == ["y"]  # b runs it, once
    assert b.start("y", "log") == 1
    b.finish("y", True, 0, None)
    assert a.claim(1) == []


def test_a_finish_claims_for_its_slot_in_one_statement(open_ledger):
    """What the line asks of a finish is claimed in its statement and told, noted as this
    manager's claims; none wanted, or none free, and it is a finish alone."""
    a = open_ledger("a")
    wanted, told = [2], []
    a.claim_with_finishes(lambda: wanted[0], told.append)
    a.see(["x", "y", "z"])
    assert a.claim(1) == ["x"]
    a.start("x", "log")
    a.finish("x", True, 0, None)
    assert told == [["y", "z"]] and a.holds("y") and a.holds("z")
    assert sql(a, "SELECT name, owner FROM items WHERE owner IS NOT NULL ORDER BY name") == [
        ("y", "a"), ("z", "a")
    ]  # fmt: skip
    a.start("y", "log")
    a.finish("y", True, 0, None)  # z is the only one left, and it is a's already
    assert told[-1] == []
    wanted[0] = 0
    a.start("z", "log")
    a.finish("z", False, 1, "failed")
    assert len(told) == 2  # not asked: not told
    assert a.state("z") == ("failed", 1) and a.claim_counters()["done"] == 3
