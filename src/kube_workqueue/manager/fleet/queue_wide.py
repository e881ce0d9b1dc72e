"""The queue as a whole, mixed into `PostgresLedger`: its settings, and its rows read whole.

The settings are the one `queue` row every manager of the queue shares (`schema.py`): paused
since when, the parallelism asked of the fleet, a mass removal accepted or held, the group
rules - and how many needs the queue has, which placement asks at every claim
(`placed._may_condition`). They are read at most every `claims.SETTINGS_SECONDS` (a claim and
a finish ask for them several times an item): `_settings` is (when read, what was read), and
a write of this manager's marks it stale, so its own next read is fresh. The row that says
a mass removal is held is read each time it is asked for (once, at a manager's start).

The whole-queue reads (`row`, `rows`, `counts`) go to the database every time: `status` and
the commands ask for them, never the dispatch.
"""

from __future__ import annotations

import time

from ..ports import Row, State
from . import statements as sql
from .claims import SETTINGS_SECONDS


class QueueWide:
    """See the module docstring. The ledger provides `db` and `_settings`."""

    # -- every row -------------------------------------------------------------------------

    def row(self, name: str) -> Row | None:
        found = self.db.run(sql.ROW, name=name)
        return Row(*found[0]) if found else None

    def rows(self, state: str | None = None) -> list[Row]:
        if state is None:
            return [Row(*found) for found in self.db.run(sql.ROWS)]
        return [Row(*found) for found in self.db.run(sql.ROWS_IN, state=state)]

    def counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in State}
        counts.update(dict(self.db.run(sql.COUNTS)))
        return counts

    # -- the queue's settings --------------------------------------------------------------

    def _read_settings(self, *, fresh: bool = False) -> tuple:
        at, settings = self._settings
        if time.monotonic() - at < SETTINGS_SECONDS and not fresh:
            return settings
        settings = self.db.run(sql.SETTINGS)[0]
        self._settings = (time.monotonic(), settings)
        return settings

    def paused_since(self) -> float | None:
        return self._read_settings()[0]

    def wanted_parallelism(self) -> int | None:
        return self._read_settings()[1]

    def removals_accepted(self) -> float | None:
        return self._read_settings()[2]

    def removals_held_since(self) -> float | None:
        return self.db.run(sql.HELD_SINCE)[0][0]

    def hold_removals(self, since: float | None) -> None:
        self.set_setting("removals_held_since", since)

    def set_setting(self, column: str, value) -> None:
        """Write one of the queue's settings (`paused_since`, `parallelism`,
        `removals_accepted`, `removals_held_since`, `group_rules`): every manager reads all
        but the fourth within `SETTINGS_SECONDS`."""
        self.db.count(sql.SETTING[column], value=value)
        self._settings = (-1e18, self._settings[1])

    def want_parallelism(self, parallelism: int) -> None:
        self.set_setting("parallelism", parallelism)

    def set_paused(self, since: float | None) -> None:
        self.set_setting("paused_since", since)

    def accept_removals(self) -> None:
        self.set_setting("removals_accepted", time.time())

    def wanted_group_rules(self) -> dict | None:
        return self._read_settings()[3]

    def want_group_rules(self, rules: dict) -> None:
        from psycopg.types.json import Jsonb

        self.set_setting("group_rules", Jsonb({**(self._read_settings(fresh=True)[3] or {}),
                                               **rules}))  # fmt: skip
