"""The shared ledger's schema and its migrations: numbered steps of SQL, each applied once, in
order, in one transaction with the row that says it was.

The tables live in a PostgreSQL schema of their own (`workqueue`, or the URL's `?schema=`), so
a queue shares a database with other applications safely: an application's own `items` table
is never ours, and two queues in one database are two schemas. Every connection's search_path
is that schema (`database.Database`), so statements name tables without it.

No migration tool: the schema is a handful of tables owned by this module, Alembic would bring
SQLAlchemy for it, and what a tool would add - "which steps ran" and "one migrator at a time" -
is the `schema_version` table and a transaction-scoped advisory lock. A manager, and every
command that writes the queue, calls `migrate()`: a database at an older version is brought up
to this one; one at a newer version is refused with one line. Commands that only read call
`check()`, which creates nothing: a database without the ledger is "no queue here".

Tables:
    items      one row per item: its state, attempts, priority, arrival order (`seq`), and
               its claim - `owner` (a manager's id) while a manager holds it; `claimable`
               says it waits for work, `ready_at` when a retry's backoff ends and `listed_at`
               when it was recorded (both the database's clock: whose turn a new item is,
               `claims.TURN_SECONDS`); `changed` is the id of the transaction that last wrote
               it, so a reader reads what committed since its last snapshot, in commit order
               `grp` is its group (a tenant: `manager.fleet.group_claims`)
    runs       earlier outcomes of items that ran again (`--on-change rerun`, a comeback)
    queue      one row: pause, the parallelism asked for, removals accepted, when a hold
               of a mass removal began, and the group limits and rates asked for
    group_starts  each rated group's recent starts (`group_claims`: the rate across managers)
    managers   one row per live manager: its lease, its heartbeat counter (`beat`: liveness
               is per manager, a claim lives while its owner's row beats), when it last beat
               (the database's clock, for `status`), its facts (what `status` shows)
    drains     the managers asked to take nothing new (`workqueue drain`), by id, and since
               when: a row here and the manager's claims stop, whether it runs now or not
    needs      each distinct need (`manager.placement`, its one text) once, by a small id:
               an item's `need` is that id (NULL: any manager may run it), and a claim takes
               only items whose need is NULL or one its manager's `offers` meet; `unmet`
               marks a waiting item whose need no live manager meets (out of the line)

Indexes keep the hot statements O(log n) at a million rows: the line (`claimable`, unowned
and not `unmet`, by priority then arrival: a claim reads its head), the claims (by owner),
the changes (by transaction id), the waiting items by need.

Version 1 (workqueue before the ledger had a schema of its own) kept its tables in `public`:
when the ledger's schema is the default one and does not exist yet, a version-1 ledger found
in `public` (all five of its tables, with the columns only it has) is moved in first.
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
    (
        # liveness per manager (a heartbeat counter, no lease per row), changes by
        # transaction id (read in commit order), the database's clock for backoffs
        2,
        """
        ALTER TABLE managers ADD COLUMN beat bigint NOT NULL DEFAULT 0;
        ALTER TABLE managers ALTER COLUMN said SET DEFAULT clock_timestamp();
        DROP INDEX items_claims;
        ALTER TABLE items DROP COLUMN lease_until;
        CREATE INDEX items_claims ON items (owner) WHERE owner IS NOT NULL;
        DROP INDEX items_changed;
        ALTER TABLE items ALTER COLUMN changed DROP DEFAULT;
        ALTER TABLE items ALTER COLUMN changed TYPE xid8 USING pg_current_xact_id();
        ALTER TABLE items ALTER COLUMN changed SET DEFAULT pg_current_xact_id();
        DROP SEQUENCE changes;
        CREATE INDEX items_changed ON items (changed);
        ALTER TABLE items ALTER COLUMN ready_at DROP DEFAULT;
        ALTER TABLE items ALTER COLUMN ready_at TYPE timestamptz USING
            CASE WHEN ready_at = 0 THEN '-infinity'::timestamptz ELSE to_timestamp(ready_at) END;
        ALTER TABLE items ALTER COLUMN ready_at SET DEFAULT '-infinity';
        ALTER TABLE items ALTER COLUMN listed_at SET DEFAULT clock_timestamp();
        """,
    ),
    (
        # a mass removal held outlives the manager that held it
        3,
        "ALTER TABLE queue ADD COLUMN removals_held_since double precision;",
    ),
    (
        # tenants: each item's group, what each group holds counted through the claims'
        # index, each rated group's recent starts, and the group rules asked of the queue
        4,
        """
        ALTER TABLE items ADD COLUMN grp text;
        CREATE TABLE group_starts (
            grp text NOT NULL,
            at  timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX group_starts_at ON group_starts (at);
        ALTER TABLE queue ADD COLUMN group_rules jsonb;
        """,
    ),
    (
        # placement: drains - a manager asked to take nothing new (`workqueue drain`), by its
        # id, which outlives its managers row (a restart of a drained manager stays drained);
        # what each manager offers; each distinct need once, and each item's need by its id
        5,
        """
        CREATE TABLE drains (
            manager text PRIMARY KEY,
            since   timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        ALTER TABLE managers ADD COLUMN offers jsonb;
        CREATE TABLE needs (
            id   serial PRIMARY KEY,
            expr text NOT NULL UNIQUE
        );
        ALTER TABLE items ADD COLUMN need integer;
        """,
    ),
    (
        # placement: an item whose need no live manager meets leaves the line (`unmet`, set
        # and cleared by `placed.PlacedClaims.settle_unmet`), so that claims do not walk past
        # a backlog only an absent cluster may run; its need, to find such items by
        6,
        """
        ALTER TABLE items ADD COLUMN unmet boolean NOT NULL DEFAULT false;
        DROP INDEX items_line;
        CREATE INDEX items_line ON items (priority DESC, seq)
            WHERE claimable AND owner IS NULL AND NOT unmet;
        CREATE INDEX items_needs ON items (need, unmet)
            WHERE claimable AND owner IS NULL AND need IS NOT NULL;
        """,
    ),
]
VERSION = MIGRATIONS[-1][0]
_LOCK_KEY = 0x776F726B71  # the advisory lock migrators take ("workq")
_V1_TABLES = ("items", "runs", "queue", "managers", "schema_version")


def migrate(db) -> int:
    """Bring the ledger's schema to `VERSION` (see the module docstring); the version it was
    at. A `UserError` when it is newer than this workqueue knows."""
    with db.transaction() as session:
        cur = session.cursor
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        if not _schema_exists(cur, db.schema):
            cur.execute(f'CREATE SCHEMA "{db.schema}"')
            if db.schema == "workqueue":
                _adopt_public_v1(cur, db.schema)
        _may(cur, db, "USAGE")
        cur.execute("SELECT to_regclass('schema_version') IS NOT NULL")
        if not cur.fetchone()[0]:
            _may(cur, db, "CREATE")
        cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        cur.execute("SELECT max(version) FROM schema_version")
        found = cur.fetchone()[0] or 0
        _refuse_newer(found, db.where)
        for version, sql in MIGRATIONS:
            if version > found:
                cur.execute(sql)
                cur.execute("INSERT INTO schema_version VALUES (%s)", (version,))
    return found


def check(db) -> None:
    """For a command that only reads: the ledger is there and this workqueue reads it; a
    `UserError` otherwise ("no queue here", an older or a newer ledger). Creates nothing."""
    found = version_of(db)
    if found == 0:
        if _public_v1(db):
            raise UserError(
                f"the shared ledger {db.where} is of an older workqueue (its tables in "
                "schema public): start a manager on it once, which moves it into schema "
                f"{db.schema}"
            )
        raise UserError(
            f"no queue here: {db.where} has no workqueue ledger in schema {db.schema} (a "
            "manager makes it at its first start; ?schema=NAME names another)"
        )
    _refuse_newer(found, db.where)
    if found < VERSION:
        raise UserError(
            f"the shared ledger {db.where} is at schema version {found}, older than this "
            f"workqueue's ({VERSION}): start a manager of this version once to bring it up"
        )


def version_of(db) -> int:
    """The schema version the ledger is at (0: none yet, or no schema)."""
    with db.session() as session:
        cur = session.cursor
        if not _schema_exists(cur, db.schema):
            return 0
        _may(cur, db, "USAGE")
        cur.execute("SELECT to_regclass('schema_version') IS NOT NULL")
        if not cur.fetchone()[0]:
            return 0
        cur.execute("SELECT coalesce(max(version), 0) FROM schema_version")
        return cur.fetchone()[0]


def _may(cur, db, privilege: str) -> None:
    """A `UserError` naming what to grant unless this role has `privilege` on the ledger's
    schema (without USAGE PostgreSQL skips the schema as if it were not there, and says
    "no schema has been selected" - a cause no user would guess)."""
    cur.execute("SELECT has_schema_privilege(%s, %s), current_user", (db.schema, privilege))
    allowed, role = cur.fetchone()
    if not allowed:
        raise UserError(
            f"the shared ledger {db.where}: role {role} may not use schema {db.schema} "
            f"({privilege} is not granted): GRANT USAGE, CREATE ON SCHEMA {db.schema} TO {role}, "
            "or name a schema it may use with ?schema=NAME"
        )


def _refuse_newer(found: int, where: str) -> None:
    if found > VERSION:
        raise UserError(
            f"the shared ledger {where} is at schema version {found}, newer than this "
            f"workqueue knows ({VERSION}): upgrade workqueue"
        )


def _schema_exists(cur, name: str) -> bool:
    cur.execute("SELECT to_regnamespace(%s) IS NOT NULL", (f'"{name}"',))
    return cur.fetchone()[0]


def _public_v1(db) -> bool:
    with db.session() as session:
        return _is_public_v1(session.cursor)


def _is_public_v1(cur) -> bool:
    """Whether `public` holds a version-1 ledger: its five tables, `items` with the columns
    only ours has, and `schema_version` at 1."""
    cur.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' "
        "AND table_name = ANY(%s)",
        (list(_V1_TABLES),),
    )
    if cur.fetchone()[0] != len(_V1_TABLES):
        return False
    cur.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name = 'items' AND column_name IN ('claimable', 'lease_until', 'owner', "
        "'listed_at', 'ready_at')"
    )
    if cur.fetchone()[0] != 5:
        return False
    cur.execute("SELECT max(version) FROM public.schema_version")
    return cur.fetchone()[0] == 1


def _adopt_public_v1(cur, schema: str) -> None:
    """Move a version-1 ledger from `public` into the ledger's schema (module docstring)."""
    if not _is_public_v1(cur):
        return
    for table in _V1_TABLES:
        cur.execute(f'ALTER TABLE public.{table} SET SCHEMA "{schema}"')
    cur.execute(f'ALTER SEQUENCE public.changes SET SCHEMA "{schema}"')
