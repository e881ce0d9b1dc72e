"""The shared ledger against a real PostgreSQL: claims never overlap, leases run out and are
renewed, a lost claim writes nothing, the line's order is priority then arrival."""

from __future__ import annotations

import threading

import pytest

from manager.errors import UserError
from manager.faults import UNREACHABLE, StorageFault
from manager.ports import ClaimLost, ClaimsWork, Ledger
from manager.shared import schema
from manager.shared.database import Database, check_url, shown
from manager.shared.ledger import PostgresLedger


@pytest.fixture
def open_ledger(postgres):
    opened = []

    def make(owner: str, **kw) -> PostgresLedger:
        ledger = PostgresLedger(Database(postgres), owner, **kw)
        opened.append(ledger)
        return ledger

    yield make
    for ledger in opened:
        ledger.close()


def sql(ledger: PostgresLedger, text: str, *values):
    with ledger.db.cursor() as cur:
        cur.execute(text, values)
        return cur.fetchall() if cur.description else cur.rowcount


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
    assert a.claim(3) == names[:3]
    assert b.claim(3) == names[3:6]
    assert a.claim(10) == names[6:]
    assert b.claim(1) == [] and not b.waiting()


def test_priorities_order_the_line_and_arrival_breaks_ties(open_ledger):
    a = open_ledger("a")
    a.see(["low", "high", "mid", "high-later"])
    a.prioritize({"high": 5, "mid": 1, "high-later": 5})
    assert a.claim(4) == ["high", "high-later", "mid", "low"]


def test_many_threads_of_two_managers_never_claim_an_item_twice(open_ledger):
    managers = [open_ledger("a"), open_ledger("b")]
    names = [f"n{i}" for i in range(600)]
    managers[0].see(names)
    taken: list[str] = []
    lock = threading.Lock()

    def work(ledger):
        db = Database(ledger.db.url)  # a connection per thread, as separate processes have
        mine = PostgresLedger(db, ledger.owner)
        try:
            while got := mine.claim(1):
                with lock:
                    taken.extend(got)
        finally:
            db.close()

    threads = [threading.Thread(target=work, args=(m,)) for m in managers for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(taken) == sorted(names)  # each once, none lost


def test_start_and_finish_only_while_the_claim_is_ours(open_ledger):
    a = open_ledger("a", max_attempts=3)
    b = open_ledger("b", max_attempts=3, lease=0.01)  # (b's lease: how soon b may expire one)
    a.see(["x"])
    with pytest.raises(ClaimLost):
        b.start("x", "log")  # never claimed by b
    assert a.claim(1) == ["x"]
    assert a.start("x", "a.log", "v1") == 1
    # a's lease runs out while it runs (moved into the past: no waiting on a clock)
    sql(a, "UPDATE items SET lease_until = now() - interval '1 second'")
    assert b.expire() == [("x", "a")]
    row = b.row("x")
    assert (row.state, row.attempts) == ("failed", 1)
    assert "stopped renewing" in row.last_error
    assert b.claim(1) == ["x"]
    assert b.start("x", "b.log") == 2
    a.finish("x", True, 0, None)  # too late: b runs it now
    assert a.claim_counters()["lost"] == 1
    assert b.row("x").state == "running"
    b.finish("x", True, 0, None)
    row = b.row("x")
    assert (row.state, row.attempts, row.log_path) == ("succeeded", 2, "b.log")


def test_renewing_keeps_a_claim_and_expiry_spares_it(open_ledger):
    a, b = open_ledger("a", lease=30), open_ledger("b", lease=30)
    a.see(["x"])
    a.claim(1)
    sql(a, "UPDATE items SET lease_until = now() + interval '1 second'")
    assert a.renew() == 1
    (left,) = sql(a, "SELECT extract(epoch FROM lease_until - now()) FROM items")[0]
    assert left > 25
    assert b.expire() == []


def test_no_lease_expires_until_the_database_has_been_up_a_whole_lease(open_ledger):
    """After a restart of the database, live managers renew first."""
    a = open_ledger("a", lease=3600)
    a.see(["x"])
    a.claim(1)
    sql(a, "UPDATE items SET lease_until = now() - interval '1 hour'")
    assert a.expire() == []  # the test server has not been up an hour
    short = open_ledger("b", lease=0.01)
    assert short.expire() == [("x", "a")]


def test_a_failed_item_waits_for_its_backoff_and_out_of_attempts_leaves_the_line(open_ledger):
    a = open_ledger("a", max_attempts=2, backoff=lambda attempts: 3600.0)
    a.see(["x"])
    a.claim(1)
    a.start("x", "log")
    a.finish("x", False, 3, "exit 3")
    assert not a.waiting()  # backing off for an hour
    sql(a, "UPDATE items SET ready_at = 0")
    assert a.claim(1) == ["x"]
    a.start("x", "log")
    a.finish("x", False, 3, "exit 3")
    sql(a, "UPDATE items SET ready_at = 0")
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


def test_cancel_spares_an_item_another_manager_runs(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x", "y"])
    a.claim(1)
    a.start("x", "log")
    assert not b.cancel("x")  # a's to cancel
    assert b.cancel("y") and b.claim(5) == []
    assert a.cancel("x") and a.row("x").state == "cancelled"


def test_rerun_keeps_the_old_outcome_in_the_history(open_ledger):
    a = open_ledger("a")
    a.see(["x"])
    a.claim(1)
    a.start("x", "log", "v1")
    a.finish("x", True, 0, None)
    assert a.rerun("x", "v2")
    (earlier,) = a.history("x")
    assert (earlier["version"], earlier["state"], earlier["attempts"]) == ("v1", "succeeded", 1)
    assert (a.row("x").state, a.row("x").attempts) == ("pending", 0)
    assert a.claim(1) == ["x"]


def test_what_one_manager_writes_the_other_reads_after_a_refresh(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x"])
    a.claim(1)
    a.start("x", "log", "v9")
    a.finish("x", True, 0, None)
    b.refresh()
    assert b.state("x") == ("succeeded", 1) and b.version_ran("x") == "v9"
    assert b.counts()["succeeded"] == 1


def test_the_queue_settings_are_shared(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.set_setting("paused_since", 123.0)
    a.want_parallelism(7)
    b._settings = (0.0, b._settings[1])  # (read within half a second otherwise)
    assert b.paused_since() == 123.0 and b.wanted_parallelism() == 7


def test_migrations_run_once_and_a_newer_schema_is_refused(postgres):
    db = Database(postgres)
    try:
        assert schema.migrate(db) == 0
        assert schema.migrate(db) == schema.VERSION
        assert schema.version_of(db) == schema.VERSION
        with db.cursor() as cur:
            cur.execute("INSERT INTO schema_version VALUES (%s)", (schema.VERSION + 1,))
        with pytest.raises(UserError, match="newer than this workqueue knows"):
            schema.migrate(db)
    finally:
        db.close()


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
    with db.cursor() as cur:
        cur.execute("SELECT count(*) FROM schema_version")
        assert cur.fetchone()[0] == schema.VERSION
    db.close()


def test_a_claim_reads_the_line_by_its_index(open_ledger):
    """O(log n) at a million rows: the planner takes the line's partial index for a claim,
    and the claims' for what reads a manager's own claims."""
    a = open_ledger("a")
    sql(a, "INSERT INTO items (name, first_seen, state, claimable) SELECT 'done-' || i, 0, "
           "'succeeded', false FROM generate_series(1, 20000) i")  # fmt: skip
    a.see(["waiting"])
    sql(a, "ANALYZE items")
    plan = "\n".join(row[0] for row in sql(
        a, "EXPLAIN SELECT name FROM items WHERE claimable AND owner IS NULL AND ready_at <= 1 "
           "ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED"))  # fmt: skip
    assert "items_line" in plan, plan
    for statement in (  # renewing, counting the others' work, a manager's own claims
        "UPDATE items SET lease_until = now() WHERE owner = 'a'",
        "SELECT count(*) FROM items WHERE owner IS NOT NULL AND owner <> 'a' AND state = 'running'",
        "SELECT name FROM items WHERE owner = 'a' ORDER BY seq",
    ):
        plan = "\n".join(row[0] for row in sql(a, f"EXPLAIN {statement}"))
        assert "items_claims" in plan, (statement, plan)


def test_urls_are_checked_and_shown_without_their_password():
    assert shown("postgresql://u:s3cret@db:5432/q") == "postgresql://u:***@db:5432/q"
    assert shown("postgresql://u@db/q") == "postgresql://u@db/q"
    with pytest.raises(UserError, match="not a PostgreSQL URL") as caught:
        check_url("mysql://u:s3cret@db/q")
    assert "s3cret" not in str(caught.value)
    with pytest.raises(UserError, match="name the database"):
        check_url("postgresql://db")


def test_a_database_that_does_not_answer_is_a_fault_that_names_no_password(port):
    db = Database(f"postgresql://u:s3cret@127.0.0.1:{port}/q")
    with pytest.raises(StorageFault) as caught, db.cursor() as cur:
        cur.execute("SELECT 1")
    assert caught.value.kind == UNREACHABLE
    assert "s3cret" not in str(caught.value) and "does not answer" in str(caught.value)


def test_a_claim_that_finds_every_free_item_being_taken_by_a_rival_counts_refused(
    open_ledger, postgres
):
    a = open_ledger("a")
    a.see(["only"])
    import psycopg

    with psycopg.connect(postgres) as rival, rival.transaction():  # a rival mid-claim
        rival.execute("SELECT name FROM items WHERE name = 'only' FOR UPDATE")
        assert a.claim(1) == []
        assert a.claim_counters()["refused"] == 1
    assert a.claim(1) == ["only"]
    assert a.claim(1) == []  # nothing free: an empty claim, not a refused one
    assert a.claim_counters()["refused"] == 1


def test_a_new_item_is_for_a_moment_only_the_claim_of_the_manager_whose_turn_it_is(
    open_ledger,
):
    a, b = open_ledger("a"), open_ledger("b")
    for ledger in (a, b):
        ledger.note_manager({"parallelism": 1})
    a.keep_leases(), b.keep_leases()  # each learns who lives: two, a first
    assert a._peers == (0, 2) and b._peers == (1, 2)
    a.see(["first", "second", "third"])
    turns = dict(sql(a, "SELECT name, hashtext(name) & 2147483647 FROM items ORDER BY seq"))
    assert a.claim(5) == [n for n in turns if turns[n] % 2 == 0]  # its turns only
    assert b.claim(5) == [n for n in turns if turns[n] % 2 == 1]
    assert a.first_to_answer(str(turns["first"])) == (turns["first"] % 2 == 0)
    a.release_mine(), b.release_mine()
    sql(a, "UPDATE items SET listed_at = now() - interval '1 second'")  # the turns are over
    assert b.claim(5) == ["first", "second", "third"]  # anyone's now


def test_an_asked_parallelism_bounds_every_managers_claims_together(open_ledger):
    a, b = open_ledger("a"), open_ledger("b")
    a.see([f"n{i}" for i in range(6)])
    a.want_parallelism(2)
    for ledger in (a, b):
        ledger._settings = (0.0, ledger._settings[1])  # (read within half a second otherwise)
    assert len(a.claim(5)) == 2
    assert b.claim(5) == []  # the queue is full: not a refusal
    assert b.claim_counters()["refused"] == 0
    first = next(iter(a._claimed))
    a.start(first, "log")
    a.finish(first, True, 0, None)
    assert len(b.claim(5)) == 1  # one slot of the queue's two came free
