"""The statements of placement (`manager.placement`, `placed.py`): each need interned once to an
id every manager shares, the needs a manager has judged against its offers, the waiting items
no live manager meets marked out of the line (and back when one comes) by one manager at a
time under an advisory lock, and what `status` and the metric read of them. An item's need is
an id in the items table's `need` column, indexed (`items_needs`): marking walks that index,
never the line.
"""

from __future__ import annotations

from .statements import Statement

# -- placement (`manager.placement`) ---------------------------------------------------------

# A need's id, made the first time any manager records an item with it.
INTERN_NEED = Statement(
    "intern_need",
    "INSERT INTO needs (expr) VALUES (%(expr)s) "
    "ON CONFLICT (expr) DO UPDATE SET expr = excluded.expr RETURNING id",
)
# The needs this manager has not judged yet. Not "ids above the highest it read": ids are
# handed out when a need is interned, not when it commits - a need with a lower id than one
# already read may become visible after it.
NEEDS_UNJUDGED = Statement(
    "needs_unjudged", "SELECT id, expr FROM needs WHERE NOT (id = ANY(%(judged)s)) ORDER BY id"
)
# `status`: the waiting items whose need no live manager meets (ids given), and their needs.
UNMET = Statement(
    "unmet",
    "SELECT items.name, needs.expr FROM items JOIN needs ON needs.id = items.need "
    "WHERE items.claimable AND items.owner IS NULL AND items.need = ANY(%(needs)s) "
    "ORDER BY items.name",
)
NEEDS = Statement("needs", "SELECT id, expr FROM needs ORDER BY id")
# A `--once` run's look at its items left (`runtime.cannot_finish`): of the names given, the
# ones that wait with a need (the need) and the ones another manager holds (its id). By the
# primary key: as many rows as the run has items left, at most.
NEEDS_LEFT = Statement(
    "needs_left",
    "SELECT items.name, needs.expr, items.owner FROM items "
    "LEFT JOIN needs ON needs.id = items.need "
    "WHERE items.name = ANY(%(names)s) AND items.claimable "
    "AND (items.owner IS NOT NULL OR items.need IS NOT NULL)",
)
# Out of the line and back (`placed.PlacedClaims.settle_unmet`): waiting items of the needs
# given - the ones no live manager meets, then the ones one does - marked, by the `items_needs`
# index. Only one manager at a time settles (the lock, tried: a busy one skips its turn).
UNMET_LOCK = Statement("unmet_lock", "SELECT pg_try_advisory_xact_lock(%(key)s)")
UNMET_WAIT = Statement("unmet_wait", "SELECT pg_advisory_xact_lock(%(key)s)")
MARK_UNMET = Statement(
    "mark_unmet",
    "UPDATE items SET unmet = true WHERE claimable AND owner IS NULL "
    "AND need = ANY(%(needs)s) AND NOT unmet",
)
MARK_MET = Statement(
    "mark_met",
    "UPDATE items SET unmet = false WHERE claimable AND owner IS NULL "
    "AND need = ANY(%(needs)s) AND unmet",
)
# The metric's count: waiting items of each need given (the ones no live manager meets).
UNMET_COUNTS = Statement(
    "unmet_counts",
    "SELECT needs.expr, count(*) FROM items JOIN needs ON needs.id = items.need "
    "WHERE items.claimable AND items.owner IS NULL AND items.need = ANY(%(needs)s) "
    "GROUP BY needs.expr",
)
# The live managers' offers (heard from within their lease, by the database's clock), and
# whether each was asked to drain (`workqueue drain`: it takes nothing new).
LIVE_OFFERS = Statement(
    "live_offers",
    "SELECT id, offers, EXISTS (SELECT 1 FROM drains WHERE drains.manager = managers.id) "
    "FROM managers WHERE clock_timestamp() - said <= make_interval(secs => lease) ORDER BY id",
)
