"""The shared ledger against a real PostgreSQL: claims never overlap and come in batches, writes
of a run are fenced on its claim and attempt, changes are read in commit order, the line's
order is priority then arrival."""

from __future__ import annotations

import threading

import psycopg
import pytest

from kube_workqueue.manager.fleet import manager_statements, schema
from kube_workqueue.manager.fleet.database import Database
from kube_workqueue.manager.fleet.ledger import PostgresLedger
from kube_workqueue.manager.ports import ClaimLost, ClaimsWork, Ledger

from .conftest import Ticking, sql, watch


def test_it_is_a_ledger_that_claims(open_ledger):
    ledger = open_ledger("a")
    assert isinstance(ledger, ClaimsWork)
    for name in Ledger.__dict__:
        if not name.startswith("_") and callable(getattr(Ledger, name)):
            assert callable(getattr(ledger, name)), name


def test_two_managers_claim_disjoint_items_from_the_head_in_arrival_order(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    names = [f"item-{i:02}" for i in range(10)]
    assert a.see(names) == names
    assert b.see(names) == []  # known already: a rival's insert counts as seen
    assert a.claim(3) == names[:3]  # a batch: three items in one statement
    assert b.claim(3) == names[3:6]
    assert a.claim(10) == names[6:]
    assert b.claim(1) == [] and not b.waiting()


def test_priorities_order_the_line_and_arrival_breaks_ties(open_ledger):
    a = open_ledger("a")
    a.see(["low", "high", "mid", "high-later"])
    a.prioritize({"high": 5, "mid": 1, "high-later": 5})
    assert a.claim(4) == ["high", "high-later", "mid", "low"]


def test_many_threads_of_two_managers_claiming_in_batches_never_claim_an_item_twice(
    open_ledger,
):
    managers = [open_ledger("a"), open_ledger("b")]
    names = [f"n{i}" for i in range(600)]
    managers[0].see(names)
    taken: list[str] = []
    lock = threading.Lock()

    def work(ledger, size):
        db = Database(ledger.db.url)  # a connection per thread, as separate processes have
        mine = PostgresLedger(db, ledger.owner)
        try:
            while got := mine.claim(size):
                assert len(got) <= size
                with lock:
                    taken.extend(got)
        finally:
            mine.close()

    threads = [threading.Thread(target=work, args=(m, size)) for m in managers
               for size in (1, 3, 7, 16)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(taken) == sorted(names)  # each once, none lost


def test_a_run_writes_only_while_its_claim_and_attempt_are_the_items(open_ledger):
    clock = Ticking()
    a = open_ledger("a", max_attempts=3, lease=10, monotonic=clock)
    b = open_ledger("b", max_attempts=3, lease=10, monotonic=clock)
    a.see(["x"])
    with pytest.raises(ClaimLost):
        b.start("x", "log")  # never claimed by b
    assert a.claim(1) == ["x"]
    assert a.start("x", "a.log", "v1") == 1
    watch(b, clock, seconds=11)  # a beats no more: silent a whole lease of a working database

    row = b.row("x")
    assert (row.state, row.attempts) == ("failed", 1)
    assert "went silent" in row.last_error
    assert b.claim(1) == ["x"]
    assert b.start("x", "b.log") == 2
    with pytest.raises(ClaimLost):
        a.finish("x", True, 0, None)  # too late: b runs it now - lost, never a success of a's
    assert a.claim_counters()["lost"] == 1 and a.claim_counters()["done"] == 0
    assert b.row("x").state == "running"
    b.finish("x", True, 0, None)
    row = b.row("x")
    assert (row.state, row.attempts, row.log_path) == ("succeeded", 2, "b.log")


def test_an_old_run_of_an_item_claimed_again_writes_nothing_over_the_new_one(open_ledger):
    """The fence is the attempt too: the same manager's earlier run of an item cannot end
    its later run."""
    a = open_ledger("a", max_attempts=3)
    a.see(["x"])
    a.claim(1)
    a.start("x", "log")
    sql(a, "UPDATE items SET attempts = 2")  # as if a later attempt of x ran under a's claim
    with pytest.raises(ClaimLost):
        a.finish("x", True, 0, None)
    row = a.row("x")
    assert (row.state, row.attempts) == ("running", 2)


def test_a_failed_item_waits_for_its_backoff_and_out_of_attempts_leaves_the_line(open_ledger):
    a = open_ledger("a", max_attempts=2, backoff=lambda attempts: 3600.0)
    a.see(["x"])
    a.claim(1)
    a.start("x", "log")
    a.finish("x", False, 3, "exit 3")
    assert not a.waiting()  # backing off for an hour (the database's clock)
    sql(a, "UPDATE items SET ready_at = '-infinity'")
    assert a.claim(1) == ["x"]
    a.start("x", "log")
    a.finish("x", False, 3, "exit 3")
    sql(a, "UPDATE items SET ready_at = '-infinity'")
    assert not a.waiting() and a.claim(1) == []  # two attempts of two: failed for good
    assert a.retry("x") and a.claim(1) == ["x"]  # `workqueue retry`: a new series


def test_a_claim_released_unstarted_goes_back_and_a_parked_one_waits_for_a_listing(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x", "y"])
    assert a.claim(2) == ["x", "y"]
    assert a.holds("x")
    a.release("x")
    a.release("y", park=True)  # the source did not have it
    assert not a.holds("x")
    assert b.claim(5) == ["x"]
    b.refresh()
    assert b.parked("y")
    b.unpark(["y"])
    assert b.claim(5) == ["y"]


def test_requeue_gives_the_attempt_back_and_release_mine_lets_everything_go(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x", "y", "z"])
    a.claim(2)
    a.start("x", "log")
    a.release_mine()
    rows = {r.name: (r.state, r.attempts) for r in b.rows()}
    assert rows == {"x": ("pending", 0), "y": ("pending", 0), "z": ("pending", 0)}
    assert sorted(b.claim(3)) == ["x", "y", "z"]
    assert sql(b, "SELECT id FROM managers ORDER BY id") == [("b",)]  # a left, holding nothing


def test_a_stopping_manager_whose_work_outlives_it_keeps_its_running_claims(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x", "y"])
    a.claim(2)
    a.start("x", "job/x")
    a.release_mine(keep_running=True)  # a cluster's Job runs on: the next manager adopts it
    assert {r.name: r.state for r in b.rows()} == {"x": "running", "y": "pending"}
    assert b.claim(5) == ["y"]
    assert sql(b, "SELECT owner FROM items WHERE name = 'x'") == [("a",)]


def test_cancel_spares_an_item_another_manager_runs(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x", "y"])
    a.claim(1)
    a.start("x", "log")
    assert not b.cancel("x")  # a's to cancel
    assert b.cancel("y") and b.claim(5) == []
    assert a.cancel("x") and a.row("x").state == "cancelled"


def test_rerun_keeps_the_old_outcome_and_puts_the_item_at_the_back_of_the_line(open_ledger):
    a = open_ledger("a")
    a.see(["x", "y"])
    a.claim(1)
    a.start("x", "log", "v1")
    a.finish("x", True, 0, None)
    a.see(["z"])
    assert a.rerun("x", "v2")
    (earlier,) = a.history("x")
    assert (earlier["version"], earlier["state"], earlier["attempts"]) == ("v1", "succeeded", 1)
    assert (a.row("x").state, a.row("x").attempts) == ("pending", 0)
    assert a.claim(3) == ["y", "z", "x"]  # where `status` shows it: last


def test_what_one_manager_writes_the_other_reads_after_a_refresh(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x"])
    b.refresh()
    a.claim(1)
    a.start("x", "log", "v9")
    a.finish("x", True, 0, None)
    b.refresh()
    assert b.state("x") == ("succeeded", 1) and b.version_ran("x") == "v9"
    assert b.counts()["succeeded"] == 1


def test_a_write_that_commits_after_a_later_one_is_read_as_soon_as_it_commits(
    open_ledger, postgres
):
    """Changes in commit order: a transaction that took its id first and committed last is
    not skipped (a sequence number taken before commit would be)."""
    a, reader = open_ledger("a"), open_ledger("reader")
    a.see(["early", "late"])
    reader.refresh()
    with psycopg.connect(postgres, autocommit=False) as slow:
        slow.execute("SET search_path TO workqueue")
        slow.execute("UPDATE items SET state = 'succeeded', attempts = 1, claimable = false, "
                     "changed = pg_current_xact_id() WHERE name = 'early'")  # fmt: skip
        a.claim(2)  # a later transaction, committed at once
        a.start("late", "log")
        reader.refresh()
        assert reader.state("late") == ("running", 1)
        assert reader.state("early") == ("pending", 0)  # not committed yet
        slow.commit()
    reader.refresh()  # at once: not at a reload a minute later
    assert reader.state("early") == ("succeeded", 1)


def test_the_queue_settings_are_shared(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.set_setting("paused_since", 123.0)
    a.want_parallelism(7)
    b._settings = (-1e18, b._settings[1])  # (read within half a second otherwise)
    assert b.paused_since() == 123.0 and b.wanted_parallelism() == 7


def test_migrations_run_once_and_a_newer_schema_is_refused(postgres):
    db = Database(postgres)
    try:
        assert schema.migrate(db) == 0
        assert schema.migrate(db) == schema.VERSION
        assert schema.version_of(db) == schema.VERSION
        db.count(_raw("INSERT INTO schema_version VALUES (99)"))
        with pytest.raises(Exception, match="newer than this workqueue knows"):
            schema.migrate(db)
    finally:
        db.close()


def _raw(text: str):
    from kube_workqueue.manager.fleet.statements import Statement

    return Statement("test", text)


def test_two_first_migrations_at_once_leave_one_schema(postgres):
    errors = []

    def migrate():
        db = Database(postgres)
        try:
            schema.migrate(db)
        except Exception as exc:  # noqa: BLE001 - any failure fails the test
            errors.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    db = Database(postgres)
    assert db.run(_raw("SELECT count(*) FROM schema_version")) == [(schema.VERSION,)]
    db.close()


def test_a_claim_that_finds_every_free_item_being_taken_by_a_rival_counts_refused(
    open_ledger, postgres
):
    a = open_ledger("a")
    a.see(["only"])
    with psycopg.connect(postgres) as rival, rival.transaction():  # a rival mid-claim
        rival.execute("SELECT name FROM workqueue.items WHERE name = 'only' FOR UPDATE")
        assert a.claim(1) == []
        assert a.claim_counters()["refused"] == 1
    assert a.claim(1) == ["only"]
    assert a.claim(1) == []  # nothing free: an empty claim, not a refused one
    assert a.claim_counters()["refused"] == 1


def test_a_new_item_is_for_a_moment_only_the_claim_of_the_manager_whose_turn_it_is(
    open_ledger,
):
    a, b = open_ledger("a"), open_ledger("b")
    a.heartbeat_round(), b.heartbeat_round()  # each learns who lives: two, a first
    assert a.liveness.peers == (0, 2) and b.liveness.peers == (1, 2)
    a.see(["first", "second", "third"])
    turns = dict(sql(a, "SELECT name, hashtext(name) & 2147483647 FROM items ORDER BY seq"))
    assert a.claim(5) == [n for n in turns if turns[n] % 2 == 0]  # its turns only
    assert b.claim(5) == [n for n in turns if turns[n] % 2 == 1]
    assert a.first_to_answer(str(turns["first"])) == (turns["first"] % 2 == 0)
    a.release_mine(), b.release_mine()
    a.join(), b.join()
    sql(a, "UPDATE items SET listed_at = now() - interval '1 second'")  # the turns are over
    assert b.claim(5) == ["first", "second", "third"]  # anyone's now


def test_an_asked_parallelism_bounds_every_managers_claims_together(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see([f"n{i}" for i in range(6)])
    a.want_parallelism(2)
    for ledger in (a, b):
        ledger._settings = (-1e18, ledger._settings[1])  # (read within half a second otherwise)
    assert len(a.claim(5)) == 2  # a batch, cut to what the queue has room for
    assert b.claim(5) == []  # the queue is full: not a refusal
    assert b.claim_counters()["refused"] == 0
    first = sorted(a._claimed)[0]
    a.start(first, "log")
    a.finish(first, True, 0, None)
    assert len(b.claim(5)) == 1  # one slot of the queue's two came free


def test_a_version_1_ledger_in_public_is_moved_into_its_schema_and_kept(postgres, open_ledger):
    """A ledger made before the ledger had a schema of its own: read-only commands say so,
    the first manager moves it (what ran stays run) and brings it up to date."""
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(schema.MIGRATIONS[0][1])  # version 1, in public
        conn.execute("CREATE TABLE schema_version (version integer NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute(
            "INSERT INTO items (name, first_seen, state, attempts, claimable, ready_at) VALUES "
            "('done', 1, 'succeeded', 1, false, 0), ('waiting', 2, 'pending', 0, true, 0), "
            "('backing-off', 3, 'failed', 1, true, 4000000000)"
        )
    with pytest.raises(Exception, match="of an older workqueue"):
        PostgresLedger(Database(postgres), "reader", read_only=True)
    a = open_ledger("a")
    assert {r.name: r.state for r in a.rows()} == {
        "done": "succeeded", "waiting": "pending", "backing-off": "failed",
    }  # fmt: skip
    assert a.claim(5) == ["waiting"]  # the backoff (until 2096) kept, on the database's clock
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT to_regclass('public.items')").fetchone()[0] is None


def test_a_fenced_ledger_opens_no_session_on_any_of_its_connections(open_ledger):
    """What `QueueRun.fence` does to an abandoned manager's shared ledger: its connection and
    every sibling (heartbeat, probe) refuse from then on - a fault, never a write."""
    from kube_workqueue.manager.faults import StorageFault

    ledger = open_ledger("m1")
    ledger.see(["a"])
    heartbeat = ledger.db.sibling("heartbeat")
    assert ledger.db.fence(10) is True
    for db in (ledger.db, heartbeat, ledger.db.sibling("later")):
        with pytest.raises(StorageFault, match="replaced"):
            db.run(manager_statements.PROBE, owner="m1")
    with pytest.raises(StorageFault):
        ledger.probe()
