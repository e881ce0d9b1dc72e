"""A ledger many managers share: one queue worked by many machines or clusters, in PostgreSQL.

    address.py    a ledger's URL checked, the schema it names, and the URL shown without its
                  password
    database.py   the connections: the ledger's own schema on each, every answer of the
                  database a fault (`StorageFault`) or a mistake
    statements.py every statement the ledger sends for an item, named and commented
    manager_statements.py  the managers' own: their rows, heartbeats, the dead's items let
                  go, drains
    placement_statements.py  placement's: needs interned, the unmet marked out of the line
    schema.py     the tables (in a schema of their own) and their numbered migrations
    ledger.py     `PostgresLedger`: the `Ledger` port over the items table, kept in memory
                  for the cheap reads, every write of an item conditional on its claim
    claims.py     its `ClaimsWork` half: claims in batches with `SKIP LOCKED`, turns at new
                  items, writes whose answer was lost settled
    group_claims.py  claims under the queue's group limits, rates and fair share, counted in
                  the database for every manager together
    placed.py     placement: this manager's offers with its row, each item's need recorded as
                  an interned id, the needs its offers meet in every claim
    queue_wide.py the queue as a whole: its settings row (read at most twice a second), its
                  rows read whole for `status`
    liveness.py   one heartbeat per manager, and when a silent one's claims may be taken
    notifier.py   LISTEN for the line's notifications, on a connection of its own
    migrate.py    a local queue's SQLite ledger moved into a shared one (`workqueue ledger
                  migrate`)
    options.py    `--ledger`, `--lease`, `--drain`, `--offers`, `--needs`, `--prefers`,
                  `--spill-after`, declared once for every backend
    joining.py    a manager joins the fleet: the ledger opened (riding out a database that does
                  not answer yet) around a backend's runner, what it held settled by the
                  backend's one start hook
    queue_commands.py  `status`, `retry`, `pause`, `resume`, `scale`, `drain` on a shared
                  ledger (the rules `manager.queue_ops`'s, the hooks the database's)

The assembly opens it in place of the backend's own ledger (`joining.py`); the manager feeds
its dispatcher from the claims (`manager.runtime.claims`), and the queue commands read and
write it directly (`queue_commands.py`).
"""
