"""The shared ledger's schema and its migrations: numbered steps of SQL, each applied once, in
order, in one transaction with the row that says it was.

No migration tool: the schema is a handful of tables owned by this module, Alembic would bring
SQLAlchemy for it, and what a tool would add - "which steps ran" and "one migrator at a time" -
is the `schema_version` table and a transaction-scoped advisory lock. A manager and every
command that opens the ledger call `migrate()`: a database at an older version is brought up to
this one; one at a newer version (a newer workqueue migrated it) is refused with one line.

Tables (one queue per database; a schema of its own per queue through libpq's
`options=-csearch_path=NAME` if a database must hold several):

    items      one row per item: its state, attempts, priority, arrival order (`seq`), and
               the claim - `owner` (a manager's id) and `lease_until` (the database's clock)
               while a manager holds it; `claimable` says it waits for work, `ready_at` when a
               retry's backoff ends, `listed_at` when it was recorded (the database's clock:
               whose turn a new item is, `ledger.TURN_SECONDS`); `changed` is taken from the
               `changes` sequence by every write, so a manager reads only what changed since
               it last looked
    runs       earlier outcomes of items that ran again (`--on-change rerun`, a comeback)
    queue      one row: pause, the parallelism asked for, removals accepted
    managers   each manager's facts (`workqueue status` reads them), its lease, and when it
               last said it lives (every round of its lease keeper)

Indexes keep the hot statements O(log n) at a million rows: the line (`claimable` and
unowned, by priority then arrival: a claim reads its head), the claims (by lease end: the
expiry sweep), and the change sequence.
"""

from __future__ import annotations

from ..errors import UserError

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE SEQUENCE changes;
        CREATE TABLE items (
            name        text PRIMARY KEY,
            seq         bigserial NOT NULL,
            state       text NOT NULL DEFAULT 'pending',
            attempts    integer NOT NULL DEFAULT 0,
            priority    integer NOT NULL DEFAULT 0,
            first_seen  double precision NOT NULL,
            started     double precision,
            finished    double precision,
            exit_code   integer,
            log_path    text,
            last_error  text,
            version     text,
            claimable   boolean NOT NULL DEFAULT true,
            ready_at    double precision NOT NULL DEFAULT 0,
            listed_at   timestamptz NOT NULL DEFAULT now(),
            owner       text,
            lease_until timestamptz,
            changed     bigint NOT NULL DEFAULT nextval('changes')
        );
        CREATE INDEX items_line ON items (priority DESC, seq)
            WHERE claimable AND owner IS NULL;
        CREATE INDEX items_claims ON items (lease_until) WHERE owner IS NOT NULL;
        CREATE INDEX items_changed ON items (changed);
        CREATE TABLE runs (
            id bigserial PRIMARY KEY, name text NOT NULL, version text, state text NOT NULL,
            attempts integer NOT NULL, started double precision, finished double precision,
            exit_code integer, last_error text
        );
        CREATE INDEX runs_name ON runs (name, id);
        CREATE TABLE queue (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            paused_since double precision,
            parallelism integer,
            removals_accepted double precision
        );
        INSERT INTO queue DEFAULT VALUES;
        CREATE TABLE managers (
            id text PRIMARY KEY,
            facts jsonb,
            lease double precision NOT NULL,
            said timestamptz NOT NULL DEFAULT now()
        );
        """,
    ),
]
VERSION = MIGRATIONS[-1][0]
_LOCK_KEY = 0x776F726B71  # the advisory lock migrators take ("workq")


def migrate(db) -> int:
    """Bring the database's schema to `VERSION` (see the module docstring); the version it
    was at. A `UserError` when it is newer than this workqueue knows."""
    with db.transaction() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        cur.execute("SELECT max(version) FROM schema_version")
        found = cur.fetchone()[0] or 0
        if found > VERSION:
            raise UserError(
                f"the shared ledger {db.where} is at schema version {found}, newer than this "
                f"workqueue knows ({VERSION}): upgrade workqueue"
            )
        for version, sql in MIGRATIONS:
            if version > found:
                cur.execute(sql)
                cur.execute("INSERT INTO schema_version VALUES (%s)", (version,))
    return found


def version_of(db) -> int:
    """The schema version the database is at (0: none yet)."""
    with db.cursor() as cur:
        cur.execute("SELECT to_regclass('schema_version') IS NOT NULL")
        if not cur.fetchone()[0]:
            return 0
        cur.execute("SELECT coalesce(max(version), 0) FROM schema_version")
        return cur.fetchone()[0]
