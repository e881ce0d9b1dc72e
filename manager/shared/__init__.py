"""A ledger many managers share: one queue worked by many machines or clusters, in PostgreSQL.

    database.py   the connection: a checked URL shown without its password, outages as the
                  manager's one machine fault (`StorageFault(UNREACHABLE)`)
    schema.py     the tables and their numbered migrations
    ledger.py     `PostgresLedger`: the `Ledger` port over the items table, kept in memory
                  for the cheap reads, every write of an item conditional on its claim
    claims.py     its `ClaimsWork` half: claims with `SKIP LOCKED`, turns at new items,
                  leases renewed while the work runs, run-out claims let go
    notifier.py   LISTEN for the line's notifications, on a connection of its own
    migrate.py    a local queue's SQLite ledger moved into a shared one (`workqueue ledger
                  migrate`)
    options.py    `--ledger` and `--lease`, declared once for every backend

The manager feeds its dispatcher from the claims (`manager.runtime.claims`); a backend sets the
ledger up in place of its own (`manager.backends.local.shared`), and the queue commands read
and write it directly (`manager.backends.shared_queue`).
"""
