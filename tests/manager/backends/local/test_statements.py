"""The SQLite ledger's statements (`statements.py`): each names itself once, and each `hot` one
- sent for every item's run or listing - finds its row by the name's key, however many rows
the table holds: a SEARCH through the primary key in SQLite's plan, never a SCAN of items."""

from __future__ import annotations

import sqlite3

from kube_workqueue.manager.backends.local import statements as sql
from kube_workqueue.manager.backends.local.ledger import COLUMNS, PRIORITY, SqliteLedger


def plan_of(db: sqlite3.Connection, statement: sql.Statement) -> str:
    text = statement.sql.format(columns=COLUMNS + PRIORITY)
    params = (None,) * text.count("?")
    return "\n".join(row[-1] for row in db.execute("EXPLAIN QUERY PLAN " + text, params))


def test_hot_statements_find_their_row_by_its_key(tmp_path):
    ledger = SqliteLedger(str(tmp_path / "state")).open()
    try:
        ledger.see(f"item-{i:05}.mp4" for i in range(20_000))
        db = sqlite3.connect(tmp_path / "state" / "ledger.sqlite3")
        db.execute("ANALYZE")
        hot = [s for s in sql.ALL if s.hot]
        assert {s.name for s in hot} >= {"row", "see", "start", "finish", "requeue", "cancel"}
        for statement in hot:
            plan = plan_of(db, statement)
            assert "SCAN items" not in plan, (statement.name, plan)
            if "WHERE name=?" in statement.sql:
                assert "SEARCH items USING INDEX sqlite_autoindex_items_1 (name=?)" in plan, (
                    statement.name, plan)  # fmt: skip
        db.close()
    finally:
        ledger.close()


def test_a_scan_is_what_the_check_would_see():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE items (name TEXT PRIMARY KEY, state TEXT)")
    assert "SCAN items" in plan_of(db, sql.Statement("x", "SELECT name FROM items WHERE state=?"))


def test_every_statement_has_its_own_name():
    names = [s.name for s in sql.ALL]
    assert len(names) == len(set(names)) and len(names) >= 20
