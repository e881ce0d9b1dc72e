"""The statements of the managers themselves, not of an item: a manager's row and its lease
(`REGISTER`, `LEAVE`, the facts `status` shows), its heartbeat (`BEAT`, one write a third of a
lease whatever it holds), an observer's sweep and a silent rival declared dead and its items
let go (`liveness.py`), the drains `workqueue drain` asks for, and the write a fault hold probes
with. The conventions of `statements.py` hold here too: time is the database's own
(`clock_timestamp()`), and no lease is judged by a clock - a manager is dead only when its
counter (`beat`) has not moved for a whole lease of a database that takes writes, as observed;
an item let go with it has `changed` set, as every write of an item does.
"""

from __future__ import annotations

from .statements import Statement

# -- the managers: liveness ----------------------------------------------------------------

# A manager says it is here (at start, and again after rivals declared it dead): its row, its
# lease, its counter. An existing row (a restart on the same id) keeps its counter going.
REGISTER = Statement(
    "register",
    "INSERT INTO managers (id, facts, lease, said, beat, offers) "
    "VALUES (%(owner)s, NULL, %(lease)s, clock_timestamp(), 1, %(offers)s) "
    "ON CONFLICT (id) DO UPDATE SET lease = excluded.lease, said = clock_timestamp(), "
    "beat = managers.beat + 1, offers = excluded.offers RETURNING beat",
)

# The heartbeat: one row write per manager per third of its lease, whatever it holds. No row
# comes back when rivals declared this manager dead (its claims are gone).
BEAT = Statement(
    "beat",
    "UPDATE managers SET beat = beat + 1, said = clock_timestamp() WHERE id = %(owner)s "
    "RETURNING beat",
    hot=True,
)

# What an observer reads each sweep: every manager's counter and lease, and whether the
# database takes writes now (a read-only spell is no time in which a rival could renew).
OBSERVE = Statement(
    "observe",
    "SELECT current_setting('transaction_read_only') = 'on', "
    "coalesce((SELECT json_agg(json_build_array(id, beat, lease)) FROM managers), '[]')",
)

# A rival that did not beat for a whole lease of a working database (as this observer saw it)
# is declared dead - only if its counter is still the one observed: a beat that lands first
# keeps it alive. Its row is deleted, then (a statement of its own: a new snapshot that sees
# every claim it committed before the delete got its lock) its items are let go.
DECLARE_DEAD = Statement(
    "declare_dead",
    "DELETE FROM managers WHERE id = %(rival)s AND beat = %(beat)s RETURNING id",
)

# The items of a dead manager (or of an owner no managers row names: `ORPHANS`): a claimed
# item goes back to the line as it was; a running one is failed, its attempt counted, and
# claimable again while attempts remain.
RELEASE_DEAD = Statement(
    "release_dead",
    "UPDATE items SET "
    "state = CASE WHEN state = 'running' THEN 'failed' ELSE state END, "
    "last_error = CASE WHEN state = 'running' THEN 'its manager ' || owner || "
    "' went silent for its whole lease (no heartbeat)' ELSE last_error END, "
    "finished = CASE WHEN state = 'running' THEN %(now)s ELSE finished END, "
    "claimable = (state <> 'running' OR attempts < %(max_attempts)s), "
    "ready_at = '-infinity', owner = NULL, changed = pg_current_xact_id() "
    "WHERE owner = %(rival)s AND NOT EXISTS (SELECT 1 FROM managers WHERE id = %(rival)s) "
    "RETURNING name",
)

# Owners of claims that no managers row names (a row deleted by hand, a ledger upgraded from
# the lease-per-row schema): observed like silent managers, let go after a lease.
ORPHANS = Statement(
    "orphans",
    "SELECT DISTINCT owner FROM items WHERE owner IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM managers WHERE managers.id = items.owner)",
)

# A manager leaves (it stopped cleanly): its row goes, nothing it holds goes with it.
LEAVE = Statement("leave", "DELETE FROM managers WHERE id = %(owner)s")

# The facts `workqueue status` shows of a manager (parallelism, policy, why it holds).
NOTE_FACTS = Statement(
    "note_facts",
    "UPDATE managers SET facts = %(facts)s, lease = %(lease)s WHERE id = %(owner)s",
)

# `status`: every manager with its facts and how long ago it beat (database time), and
# whether that is more than its lease.
MANAGERS = Statement(
    "managers",
    "SELECT id, facts, lease, extract(epoch FROM clock_timestamp() - said) FROM managers "
    "ORDER BY said DESC",
)

# `workqueue drain`: a manager asked to take nothing new, and asked again to take work.
DRAIN = Statement(
    "drain",
    "INSERT INTO drains (manager) VALUES (%(manager)s) ON CONFLICT (manager) DO NOTHING",
)
UNDRAIN = Statement("undrain", "DELETE FROM drains WHERE manager = %(manager)s")
IS_DRAINED = Statement(
    "is_drained", "SELECT EXISTS (SELECT 1 FROM drains WHERE manager = %(owner)s)"
)
# `status`: each drain, for how long, and how many items its manager still holds.
DRAINS = Statement(
    "drains",
    "SELECT manager, extract(epoch FROM clock_timestamp() - since), "
    "(SELECT count(*) FROM items WHERE owner = drains.manager) FROM drains ORDER BY manager",
)

# `status`: the items the silent managers hold.
CLAIMS_OF = Statement(
    "claims_of", "SELECT name, owner, state FROM items WHERE owner = ANY(%(owners)s)"
)

# The write the fault hold probes with: a read-only or full database refuses it.
PROBE = Statement("probe", "UPDATE managers SET said = clock_timestamp() WHERE id = %(owner)s")
