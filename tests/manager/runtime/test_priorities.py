"""Where an item's priority comes from (rules first, then the source, else 0), when the line
becomes a priority order, and what is recorded; the `--priority` flag's errors; the SQLite
ledger keeps priorities (and a ledger of an earlier version gains the column)."""

from __future__ import annotations

import sqlite3

import pytest

from kube_workqueue.manager.backends.local.ledger import open_ledger
from kube_workqueue.manager.priority_rules import Rules
from kube_workqueue.manager.runtime.priorities import Prioritizer
from kube_workqueue.manager.workqueue import Queue
from kube_workqueue.manager.workqueue.ordering import ByPriority, Fifo
from tests.e2e.conftest import workqueue
from tests.manager.fakes import FakeLedger, FakeSource


def test_rules_first_match_wins_and_a_star_crosses_folders():
    rules = Rules([("urgent/*", 10), ("*.mov", -5), ("*", 1)])
    assert rules.of("urgent/deep/x.mov") == 10  # the first that matches, not the highest
    assert rules.of("a/b.mov") == -5
    assert rules.of("plain.mp4") == 1
    assert Rules([("a?", 3)]).of("abc") is None  # a glob matches the whole name
    assert not Rules([]) and Rules([]).of("x") is None


def setup(items: dict[str, dict], rules=()):
    source, ledger, line = FakeSource(items), FakeLedger(), Queue()
    ledger.see(sorted(items))
    return Prioritizer(Rules(rules), source, ledger, line), source, ledger, line


def test_nothing_ranked_keeps_the_line_a_fifo_and_records_nothing():
    prioritizer, _, ledger, line = setup({"a": {}, "b": {}})
    prioritizer.listed(["a", "b"])
    assert isinstance(line._line, Fifo) and not prioritizer.ordered
    assert all("priority" not in item for item in ledger.items.values())


def test_the_source_ranks_rules_win_and_changes_are_recorded_and_moved():
    items = {"a": {}, "b": {"priority": 3}, "c": {"priority": 7}, "d": {}}
    prioritizer, source, ledger, line = setup(items, [("c", 1)])
    for name in "abcd":
        line.add(name)
    prioritizer.listed(["a", "b", "c", "d"])
    assert isinstance(line._line, ByPriority)
    assert {n: ledger.priority(n) for n in "abcd"} == {"a": 0, "b": 3, "c": 1, "d": 0}
    assert line.waiting() == ["b", "c", "a", "d"]
    source.items["d"] = {"priority": 9}  # the source changed its mind while d waits
    prioritizer.listed(["a", "b", "c", "d"])
    assert ledger.priority("d") == 9 and line.waiting() == ["d", "b", "c", "a"]
    source.items["b"] = {}  # a priority that went away is 0 again
    prioritizer.listed(["a", "b", "c", "d"])
    assert ledger.priority("b") == 0 and line.waiting() == ["d", "c", "a", "b"]


def test_the_sqlite_ledger_keeps_priorities_and_a_ledger_without_the_column_gains_it(tmp_path):
    ledger = open_ledger(str(tmp_path / "state"))
    ledger.see(["a", "b"])
    ledger.prioritize({"a": 4, "b": 0})
    ledger.close()
    again = open_ledger(str(tmp_path / "state"))
    assert again.priority("a") == 4 and again.row("a").priority == 4
    assert again.row("b").priority == 0
    again.close()
    path = tmp_path / "state" / "ledger.sqlite3"  # an earlier version: no priority column
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE items2 AS SELECT name, state, attempts, first_seen, started, finished, "
        "exit_code, log_path, last_error, pgid, pgid_start, version FROM items; "
        "DROP TABLE items; ALTER TABLE items2 RENAME TO items;"
    )
    db.close()
    old = open_ledger(str(tmp_path / "state"))
    assert old.row("a").priority == 0  # gained, at 0
    old.prioritize({"a": 2})
    assert old.query(order="priority DESC")[0].name == "a"
    old.close()


@pytest.mark.parametrize(
    "word, message",
    [
        ("urgent", "wants GLOB=N"),
        ("=3", "wants GLOB=N"),
        ("a*=high", "not an integer priority"),
        ("a*=99999999999", "a priority is within"),
    ],
)
def test_a_bad_priority_rule_is_one_line_and_exit_2(tmp_path, word, message):
    done = workqueue("run", tmp_path, "--priority", word, "--", "true")
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2
