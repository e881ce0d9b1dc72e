"""Every statement the SQLite ledger sends, named and commented, in one place - as the shared
ledger's are (`manager.fleet.statements`).

A `Statement` is its name (what a reader, a log or a test calls it by) and its SQL; `hot`
marks the ones an item's every run or every listing sends, whose plans
`tests/manager/backends/local/test_statements.py` checks find the row by its key (a SEARCH
through the primary key, never a SCAN of the table). Parameters are positional (`?`), in the
order each comment gives. `{columns}` in a statement is the row's columns as this ledger's
file has them (`ledger.COLUMNS`, with the priority or a 0 in its place: a ledger of an earlier
version is read without adding a column).

Conventions the statements keep (the invariants of `ledger_file.SCHEMA`'s tables): one row per
item name (its primary key); a transition writes the row in the same statement the in-memory
mirror changes after, under the ledger's lock; an item's history (`runs`) is written only by a
re-run, in the transaction that resets the row.
"""

from __future__ import annotations

from typing import NamedTuple


class Statement(NamedTuple):
    name: str
    sql: str
    hot: bool = False  # sent for every item's run or listing: its plan is checked (see above)


# -- reading the file at open --------------------------------------------------------------

# The columns the file's items table has (a ledger of an earlier version may lack `priority`).
COLUMNS_OF_ITEMS = Statement("columns_of_items", "PRAGMA table_info(items)")

# The mirror: every item's state, attempts and version, and the priorities not 0.
MIRROR_STATES = Statement("mirror_states", "SELECT name, state, attempts, version FROM items")
MIRROR_PRIORITIES = Statement(
    "mirror_priorities", "SELECT name, priority FROM items WHERE priority"
)

# -- reading rows --------------------------------------------------------------------------

# One item's row (name).
ROW = Statement("row", "SELECT {columns} FROM items WHERE name=?", hot=True)

# Rows for `workqueue status`: a condition, an order and a limit are added by `query`.
ROWS = Statement("rows", "SELECT {columns} FROM items")

# The items marked running: what a manager that died left (`recovery.take_back`).
RUNNING_ROWS = Statement(
    "running_rows", "SELECT name, attempts, pgid, pgid_start FROM items WHERE state='running'"
)

# An item's earlier runs, oldest first (name).
HISTORY = Statement(
    "history", "SELECT version, state, attempts, finished FROM runs WHERE name=? ORDER BY rowid"
)

# -- an item's life ------------------------------------------------------------------------

# New names, pending with no attempts (name, first seen); a known one is left as it is.
SEE = Statement(
    "see",
    "INSERT OR IGNORE INTO items(name, state, attempts, first_seen) VALUES (?, 'pending', 0, ?)",
    hot=True,
)

# A priority recorded for `status` to order the line by (priority, name).
PRIORITIZE = Statement("prioritize", "UPDATE items SET priority=? WHERE name=?", hot=True)

# pending | failed -> running: the attempt counted, the version noted, the last run's end and
# process group cleared (attempts, started, log path, version, name).
START = Statement(
    "start",
    "UPDATE items SET state='running', attempts=?, started=?, finished=NULL, exit_code=NULL, "
    "log_path=?, pgid=NULL, pgid_start=NULL, version=? WHERE name=?",
    hot=True,
)

# running -> succeeded | failed (state, finished, exit code, last error, name).
FINISH = Statement(
    "finish",
    "UPDATE items SET state=?, finished=?, exit_code=?, last_error=?, pgid=NULL, "
    "pgid_start=NULL WHERE name=?",
    hot=True,
)

# running -> pending, the attempt given back (attempts, name).
REQUEUE = Statement(
    "requeue",
    "UPDATE items SET state='pending', attempts=?, started=NULL, pgid=NULL, pgid_start=NULL "
    "WHERE name=?",
    hot=True,
)

# -> cancelled: it left the source; attempts and the last outcome stay (finished, name).
CANCEL = Statement(
    "cancel",
    "UPDATE items SET state='cancelled', finished=?, pgid=NULL, pgid_start=NULL WHERE name=?",
    hot=True,
)

# A re-run, in one transaction: the finished run to the history (name), then the row pending
# with a new attempt series (first seen, name).
KEEP_RUN = Statement(
    "keep_run",
    "INSERT INTO runs(name, version, state, attempts, started, finished, exit_code, "
    "last_error) SELECT name, version, state, attempts, started, finished, exit_code, "
    "last_error FROM items WHERE name=?",
    hot=True,
)
RERUN = Statement(
    "rerun",
    "UPDATE items SET state='pending', attempts=0, first_seen=?, started=NULL, finished=NULL, "
    "exit_code=NULL, last_error=NULL WHERE name=?",
    hot=True,
)

# `workqueue retry`: failed | cancelled -> pending, attempts reset (name).
RETRY = Statement(
    "retry", "UPDATE items SET state='pending', attempts=0, last_error=NULL WHERE name=?"
)

# -- asked from outside while a manager runs -----------------------------------------------

# `workqueue retry` leaves a request the running manager takes (name).
REQUEST_RETRY = Statement("request_retry", "INSERT OR IGNORE INTO retry_requests(name) VALUES (?)")
RETRY_REQUESTS = Statement("retry_requests", "SELECT name FROM retry_requests")
CLEAR_RETRY_REQUESTS = Statement("clear_retry_requests", "DELETE FROM retry_requests")

# -- health --------------------------------------------------------------------------------

# After a StorageFault: a committed write says the file takes writes again (at).
PROBE = Statement("probe", "INSERT OR REPLACE INTO health(what, at) VALUES ('probe', ?)")

ALL = tuple(value for value in list(globals().values()) if isinstance(value, Statement))
