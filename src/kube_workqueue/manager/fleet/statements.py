"""Every statement the shared ledger sends on an item's behalf, named and commented, in one place;
the managers' own (their rows, heartbeats and drains) are `manager_statements.py`, placement's
`placement_statements.py`, the group limits' claims `group_claims.py`.

A `Statement` is its name (what logs, the fault-injection tests and the EXPLAIN regression test
call it by) and its SQL; `hot` marks the ones on a claim's, a renewal's or a change-reader's
path, whose plans `tests/fleet/test_statements.py` checks use their index. The SQL names
tables without a schema: every connection's `search_path` is the ledger's own schema
(`database.Database`), so the same statements serve whichever schema a queue lives in.

Conventions the statements keep (the invariants of `schema.py`'s tables):
  * every write of an item sets `changed = pg_current_xact_id()`: the change readers read by
    transaction, in commit order (`CHANGES_SINCE`);
  * every write of a started item is fenced on its claim AND its attempt: `owner = me AND
    state = 'running' AND attempts = the attempt` - a manager whose claim ran out (or an old
    run of an item it claimed again) writes nothing;
  * time is the database's own (`clock_timestamp()`): backoffs (`ready_at`), turns
    (`listed_at`), heartbeats (`said`). No lease is ever judged by a clock: liveness is the
    heartbeat's counter (`beat`), judged by observers (`liveness.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lifecycle import (
    GIVEN_BACK_SQL,
    RERUNNABLE,
    RETRYABLE,
    STARTABLE,
    WAITING_CANCELLABLE,
    sql_in,
)


@dataclass(frozen=True)
class Statement:
    name: str
    sql: str
    hot: bool = False  # on the claim/renewal/change path: its plan is checked (see above)


# -- claims --------------------------------------------------------------------------------

# A line item free to claim now: claimable, unowned, not waiting for a manager no live one is
# (`unmet`), its backoff over, (for its first moment) this manager's turn ({turn}:
# `claims._turn`), and a need this manager meets or none ({may}: `placed._may_condition` - one
# constant bit string of the needs it judged, a bit looked up per row), and - for a manager
# the queue does not prefer - an item that waited its spill-over time ({spill}:
# `placed._spill`).
FREE = (
    "claimable AND owner IS NULL AND NOT unmet AND ready_at <= clock_timestamp() AND {turn} "
    "AND (need IS NULL OR {may}) AND {spill}"
)
# ... and this manager takes new items at all: it was not asked to drain (`workqueue drain`).
# In the claim statement itself, so that once a drain is written no claim of the manager's
# that begins after it takes anything - not "within the next settings read".
UNDRAINED = "NOT EXISTS (SELECT 1 FROM drains WHERE manager = %(owner)s)"

# The claim: up to {limit} items from the head of the line (priority, then arrival), taken
# with SKIP LOCKED (rows a rival is taking are passed over, never waited for, never given
# twice), only while this manager's row exists - locked FOR SHARE, so a rival declaring it dead
# waits for this claim and then lets its items go too. Rows come back as 'taken'; when none
# was taken: one 'refused' row if the snapshot saw free items (a rival took every one of them
# at that instant), one 'unknown' row if this manager is not registered (declared dead).
# The limit is written into the text (`claim_format`), not sent as a parameter: a plan made
# for "LIMIT $n" - any n - assumes a tenth of the line is read, and sorts it, so PostgreSQL
# planned the claim again at every call (its custom plan walks the index and stops), which
# cost more than the claim itself (pg_stat_statements over a drain of 5,000: 270-300 us of
# planning a claim, 100-120 us of execution). With the number written in, the statement of
# each limit is planned once a connection and its plan kept.
CLAIM_TAKES = (
    "me AS (SELECT id FROM managers WHERE id = %(owner)s FOR SHARE), "
    "head AS (SELECT name FROM items WHERE " + FREE + " AND EXISTS (SELECT 1 FROM me) "
    "AND " + UNDRAINED + " "
    "ORDER BY priority DESC, seq LIMIT {limit} FOR UPDATE SKIP LOCKED), "
    "taken AS (UPDATE items SET owner = %(owner)s, changed = pg_current_xact_id() FROM head "
    "WHERE items.name = head.name RETURNING items.name, state, attempts, version, priority)"
)


def claim_format(free: dict[str, str], limit: int) -> dict[str, str]:
    """The `sql_format` of `CLAIM` and `FINISH_AND_CLAIM`: this manager's `{turn}`, `{may}`
    and `{spill}` (`free`), and the number of items to take written in (see `CLAIM_TAKES`)."""
    return {**free, "limit": str(int(limit))}


CLAIM = Statement(
    "claim",
    "WITH " + CLAIM_TAKES + " "
    "SELECT 'taken', name, state, attempts, version, priority FROM taken "
    "UNION ALL SELECT 'unknown', NULL, NULL, NULL, NULL, NULL "
    "WHERE NOT EXISTS (SELECT 1 FROM me) "
    "UNION ALL SELECT 'refused', NULL, NULL, NULL, NULL, NULL "
    "WHERE EXISTS (SELECT 1 FROM me) AND NOT EXISTS (SELECT 1 FROM taken) AND " + UNDRAINED + " "
    "AND EXISTS (SELECT 1 FROM items WHERE " + FREE + ")",
    hot=True,
)

# Under an asked parallelism every manager's claims together are bounded: a claim takes this
# transaction-scoped lock, counts what is claimed, and takes only what is left.
BOUND_LOCK = Statement("bound_lock", "SELECT pg_advisory_xact_lock(%(key)s)")
CLAIMED_COUNT = Statement(
    "claimed_count", "SELECT count(*) FROM items WHERE owner IS NOT NULL", hot=True
)

# Whether anything is free to claim now (the dispatcher waits on it).
WAITING = Statement(
    "waiting",
    "SELECT " + UNDRAINED + " AND EXISTS (SELECT 1 FROM items WHERE " + FREE + ")",
    hot=True,
)

# A claim that did not start goes back: claimable after its backoff, or parked (out of the
# line) until a listing brings it again.
RELEASE = Statement(
    "release",
    "UPDATE items SET owner = NULL, changed = pg_current_xact_id(), "
    "claimable = claimable AND NOT %(park)s, "
    "ready_at = greatest(ready_at, clock_timestamp() + make_interval(secs => %(ready_in)s)) "
    "WHERE name = %(name)s AND owner = %(owner)s AND state <> 'running'",
)

# Listed again: parked items back in the line.
UNPARK = Statement(
    "unpark",
    "UPDATE items SET claimable = true, changed = pg_current_xact_id() "
    "WHERE name = ANY(%(names)s) AND NOT claimable AND owner IS NULL "
    f"AND state IN {sql_in(STARTABLE)} AND attempts < %(max_attempts)s",
)

# Everything this manager holds (its restart takes it back).
OWNED = Statement(
    "owned",
    "SELECT name, state, attempts FROM items WHERE owner = %(owner)s ORDER BY seq",
    hot=True,
)

# After a write whose answer was lost (the connection died mid-statement): what this manager
# holds but does not know it holds is let go - a claim it never heard of back in line, a
# start it never heard of undone (pending again, the attempt not counted).
LET_GO_UNKNOWN = Statement(
    "let_go_unknown",
    "UPDATE items SET state = CASE WHEN state = 'running' THEN 'pending' ELSE state END, "
    f"attempts = CASE WHEN state = 'running' THEN {GIVEN_BACK_SQL} ELSE attempts END, "
    "started = CASE WHEN state = 'running' THEN NULL ELSE started END, "
    "owner = NULL, changed = pg_current_xact_id() "
    "WHERE owner = %(owner)s AND NOT (name = ANY(%(known)s)) RETURNING name",
)

# Items other managers run now (an asked parallelism counts them against this one's slots).
OTHERS_RUNNING = Statement(
    "others_running",
    "SELECT count(*) FROM items WHERE owner IS NOT NULL AND owner <> %(owner)s "
    "AND state = 'running'",
    hot=True,
)

NOTIFY_LINE = Statement("notify_line", "NOTIFY workqueue_line")
# new items: the payload names whose turn the first one is (`claims.first_to_answer`)
NOTIFY_NEW = Statement("notify_new", "SELECT pg_notify('workqueue_line', %(payload)s)")

# -- an item's life ------------------------------------------------------------------------

# New names, pending, in the order given (their arrival order); a rival's insert wins quietly.
SEE = Statement(
    "see",
    "INSERT INTO items (name, first_seen, listed_at, grp, need) "
    "SELECT n, %(now)s, clock_timestamp(), g, d FROM unnest(%(names)s::text[], "
    "%(groups)s::text[], %(needs)s::integer[]) "
    "WITH ORDINALITY AS t(n, g, d, i) ORDER BY i ON CONFLICT (name) DO NOTHING "
    "RETURNING name, (hashtext(name) & 2147483647)",
)

# After a listing that added many names: the line's statistics brought up to date. The claim's
# plan follows them - statistics that last saw the line nearly empty (a new queue, or one
# whose autovacuum has not come round yet: it waits a minute, then for 10% more rows) make
# PostgreSQL read every waiting row and sort them for each claim of one item (measured: 5,000
# waiting, 1.3 ms a claim against 0.06 ms through the line's index, which four managers paid
# 3,300 times in a drain). A role that may not ANALYZE gets a warning, not an error.
ANALYZE_LINE = Statement("analyze_line", "ANALYZE items")

PRIORITIZE = Statement(
    "prioritize",
    "UPDATE items SET priority = c.p, changed = pg_current_xact_id() FROM "
    "unnest(%(names)s::text[], %(priorities)s::int[]) AS c(n, p) WHERE items.name = c.n",
)

# claimed -> running, an attempt counted: only while the claim is this manager's.
START = Statement(
    "start",
    "UPDATE items SET state = 'running', attempts = attempts + 1, started = %(now)s, "
    "finished = NULL, exit_code = NULL, log_path = %(log_path)s, version = %(version)s, "
    "changed = pg_current_xact_id() WHERE name = %(name)s AND owner = %(owner)s "
    f"AND state IN {sql_in(STARTABLE)} RETURNING attempts",
)

# running -> succeeded | failed, the claim let go - fenced on the claim and the attempt. A
# failure with attempts left is claimable again when its backoff ends.
FINISH = Statement(
    "finish",
    "UPDATE items SET state = %(state)s, finished = %(at)s, exit_code = %(exit_code)s, "
    "last_error = %(error)s, claimable = (%(failed)s AND attempts < %(max_attempts)s), "
    "ready_at = clock_timestamp() + make_interval(secs => %(backoff)s), "
    "owner = NULL, changed = pg_current_xact_id() "
    "WHERE name = %(name)s AND owner = %(owner)s AND state = 'running' "
    "AND attempts = coalesce(%(attempt)s::int, attempts) "
    "RETURNING state, attempts, version, priority",
)

# A finish and the next claim in ONE statement (one round trip, one transaction), for a slot
# about to be taken again: FINISH's write, then CLAIM's from a snapshot in which the finishing
# row is still this manager's (so never claimed by it). Rows: ('finished', NULL, its row as
# FINISH returns it) - none when the claim on it was taken - and ('taken', name, ...) for each
# item claimed. With no 'refused' or 'unknown' row: a claim that took nothing here is asked
# again the usual way when it matters. Only where CLAIM alone would claim (no asked
# parallelism, no groups): a bounded claim counts under its lock first.
FINISH_AND_CLAIM = Statement(
    "finish_and_claim",
    "WITH done AS (" + FINISH.sql + "), " + CLAIM_TAKES + " "
    "SELECT 'finished', NULL, state, attempts, version, priority FROM done "
    "UNION ALL SELECT 'taken', name, state, attempts, version, priority FROM taken",
    hot=True,
)

# A finish whose answer was lost may have been written: it was when the row shows exactly this
# outcome (state, attempt and the time it ended) - then writing it again is not a lost claim.
FINISHED_ALREADY = Statement(
    "finished_already",
    "SELECT state, attempts, version, priority FROM items WHERE name = %(name)s "
    "AND owner IS NULL AND state = %(state)s "
    "AND attempts = coalesce(%(attempt)s::int, attempts) AND finished = %(at)s",
)

# running -> pending (interrupted: the manager stops), the attempt not counted.
REQUEUE = Statement(
    "requeue",
    f"UPDATE items SET state = 'pending', attempts = {GIVEN_BACK_SQL}, "
    "started = NULL, claimable = true, ready_at = '-infinity', owner = NULL, "
    "changed = pg_current_xact_id() WHERE name = %(name)s AND owner = %(owner)s "
    "AND state = 'running' AND attempts = coalesce(%(attempt)s::int, attempts) "
    "RETURNING state, attempts, version, priority",
)

# A run of this manager cancelled (its item left the source).
CANCEL_RUNNING = Statement(
    "cancel_running",
    "UPDATE items SET state = 'cancelled', finished = %(now)s, claimable = false, "
    "owner = NULL, changed = pg_current_xact_id() WHERE name = %(name)s "
    "AND owner = %(owner)s AND state = 'running' "
    "AND attempts = coalesce(%(attempt)s::int, attempts) "
    "RETURNING state, attempts, version, priority",
)

# A waiting item cancelled: pending or failed, unowned or claimed by this manager (an item
# another manager holds is that manager's to cancel).
CANCEL_WAITING = Statement(
    "cancel_waiting",
    "UPDATE items SET state = 'cancelled', finished = %(now)s, claimable = false, "
    "owner = NULL, changed = pg_current_xact_id() WHERE name = %(name)s "
    f"AND state IN {sql_in(WAITING_CANCELLABLE)} AND (owner IS NULL OR owner = %(owner)s) "
    "RETURNING state, attempts, version, priority",
)

# A finished item runs again (a new version, or back in the source): its outcome kept in
# `runs`, then a new attempt series at the back of the line (a new arrival number).
KEEP_RUN = Statement(
    "keep_run",
    "INSERT INTO runs (name, version, state, attempts, started, finished, exit_code, "
    "last_error) SELECT name, version, state, attempts, started, finished, exit_code, "
    "last_error FROM items WHERE name = %(name)s "
    f"AND state IN {sql_in(RERUNNABLE)} AND owner IS NULL",
)
RERUN = Statement(
    "rerun",
    "UPDATE items SET state = 'pending', attempts = 0, first_seen = %(now)s, "
    "seq = nextval(pg_get_serial_sequence('items', 'seq')), listed_at = clock_timestamp(), "
    "started = NULL, finished = NULL, exit_code = NULL, last_error = NULL, claimable = true, "
    "ready_at = '-infinity', changed = pg_current_xact_id() WHERE name = %(name)s",
)

# `workqueue retry`: a failed or cancelled item pending again, its attempts reset.
RETRY = Statement(
    "retry",
    "UPDATE items SET state = 'pending', attempts = 0, last_error = NULL, claimable = true, "
    "ready_at = '-infinity', changed = pg_current_xact_id() "
    f"WHERE name = %(name)s AND state IN {sql_in(RETRYABLE)} AND owner IS NULL",
)

# -- reading -------------------------------------------------------------------------------

# What changed since the reader's last snapshot, in commit order: the rows written by
# transactions its last snapshot did not see (in progress then, or begun since) - so a
# transaction that took its id early and committed late is read as soon as it commits. The
# first row carries the snapshot of this read (the next read's `since`).
CHANGES_SINCE = Statement(
    "changes_since",
    "SELECT pg_current_snapshot()::text, NULL, NULL, NULL, NULL, NULL, NULL "
    "UNION ALL SELECT NULL, name, state, attempts, version, priority, "
    "(claimable OR owner IS NOT NULL) FROM items "
    "WHERE changed >= pg_snapshot_xmin(%(since)s::pg_snapshot) "
    "AND NOT pg_visible_in_snapshot(changed, %(since)s::pg_snapshot)",
    hot=True,
)
# The same, every row (a reader's first read, and its rare safety-net reload).
EVERYTHING = Statement(
    "everything",
    "SELECT pg_current_snapshot()::text, NULL, NULL, NULL, NULL, NULL, NULL "
    "UNION ALL SELECT NULL, name, state, attempts, version, priority, "
    "(claimable OR owner IS NOT NULL) FROM items",
)

ROW_COLUMNS = (
    "name, state, attempts, first_seen, started, finished, exit_code, log_path, last_error, "
    "version, priority"
)
ROW = Statement("row", f"SELECT {ROW_COLUMNS} FROM items WHERE name = %(name)s")
ROWS = Statement("rows", f"SELECT {ROW_COLUMNS} FROM items ORDER BY name")
ROWS_IN = Statement(
    "rows_in", f"SELECT {ROW_COLUMNS} FROM items WHERE state = %(state)s ORDER BY name"
)
COUNTS = Statement("counts", "SELECT state, count(*) FROM items GROUP BY state")
HISTORY = Statement(
    "history",
    "SELECT version, state, attempts, finished FROM runs WHERE name = %(name)s ORDER BY id",
)

# -- the queue's settings ------------------------------------------------------------------

SETTINGS = Statement(
    "settings",
    "SELECT paused_since, parallelism, removals_accepted, group_rules, "
    "(SELECT count(*) FROM needs) FROM queue",
    hot=True,
)
SETTING = {
    column: Statement(f"set_{column}", f"UPDATE queue SET {column} = %(value)s")
    for column in (
        "paused_since", "parallelism", "removals_accepted", "removals_held_since", "group_rules"
    )
}  # fmt: skip
# a mass removal's hold, read once at a manager's start
HELD_SINCE = Statement("held_since", "SELECT removals_held_since FROM queue")

# -- a local ledger moved in (`workqueue ledger migrate`, `migrate.py`) ---------------------

# One batch of items in arrival order (their order is their `seq`), in one statement; a name the
# shared ledger knows already keeps what it has. Waiting ones (pending, or failed with attempts
# left: the claim checks those) are claimable.
COPY_IN_ITEMS = Statement(
    "copy_in_items",
    "INSERT INTO items (name, state, attempts, priority, first_seen, started, "
    "finished, exit_code, log_path, last_error, version, claimable) "
    "SELECT n, s, a, p, fs, st, fi, ec, lp, le, v, c FROM unnest("
    "%(names)s::text[], %(states)s::text[], %(attempts)s::int[], %(priorities)s::int[], "
    "%(first_seen)s::float8[], %(started)s::float8[], %(finished)s::float8[], "
    "%(exit_codes)s::int[], %(log_paths)s::text[], %(errors)s::text[], %(versions)s::text[], "
    "%(claimable)s::bool[]) "
    "WITH ORDINALITY AS t(n, s, a, p, fs, st, fi, ec, lp, le, v, c, i) "
    "ORDER BY i ON CONFLICT (name) DO NOTHING RETURNING name",
)
# An earlier run of an item moved in (its history).
COPY_IN_RUN = Statement(
    "copy_in_run",
    "INSERT INTO runs (name, version, state, attempts, started, finished, exit_code, "
    "last_error) VALUES (%(name)s, %(version)s, %(state)s, %(attempts)s, %(started)s, "
    "%(finished)s, %(exit_code)s, %(last_error)s)",
)
