"""The queue as a whole, mixed into `ClusterLedger`: its settings, and its rows read whole.

The settings - paused since when, the parallelism asked, removals accepted or held, the group
rules, the status reported - are the control's (`steering.control`: the WorkQueue, or the
queue's ConfigMap without the CRD); without a control (a manager given none) there are none,
and a write of one is dropped.

The rows are built from what the ledger knows of each item it has seen (`ClusterLedger.state`,
and the rows kept of the items run here), never listed from the cluster: `counts` looks each
item up without building its row, so a million are counted in no memory to speak of, and
`live_rows` builds only those the forecast stands on.
"""

from __future__ import annotations

from ....ports import Row, State


class ClusterQueueWide:
    """See the module docstring. The ledger provides `control`, `_lock`, `_seen`, `_rows`,
    `_recent`, `_failures`, `_priorities`, `batches`, `state`, `_hash` and `_ended_row`."""

    # -- the queue's settings, the control's -----------------------------------------------

    def paused_since(self) -> float | None:
        return self.control.paused_since() if self.control is not None else None

    def wanted_parallelism(self) -> int | None:
        return self.control.wanted_parallelism() if self.control is not None else None

    def removals_accepted(self) -> float | None:
        return self.control.removals_accepted() if self.control is not None else None

    def removals_held_since(self) -> float | None:
        return self.control.removals_held_since() if self.control is not None else None

    def hold_removals(self, since: float | None) -> None:
        if self.control is not None:
            self.control.hold_removals(since)

    def want_parallelism(self, parallelism: int) -> None:
        if self.control is not None:
            self.control.want_parallelism(parallelism)

    def set_paused(self, since: float | None) -> None:
        if self.control is not None:
            self.control.set_paused(since)

    def accept_removals(self) -> None:
        if self.control is not None:
            self.control.accept_removals()

    def wanted_group_rules(self) -> dict | None:
        return self.control.wanted_group_rules() if self.control is not None else None

    def want_group_rules(self, rules: dict) -> None:
        if self.control is not None:
            self.control.want_group_rules(rules)

    @property
    def keeps_status(self) -> bool:
        """Only a WorkQueue keeps the status (without the CRD `status` reads the record)."""
        return self.control is not None and self.control.keeps_status

    def report(self, status: dict) -> None:
        if self.control is not None:
            self.control.report(status)

    # -- every row ----------------------------------------------------------------------------

    def row(self, name: str) -> Row | None:
        current = self.state(name)
        with self._lock:
            data = self._rows.get(name) or self._ended_row(name)
            if data is None and name in self._seen:
                data = {"first_seen": self._seen[name]}
        if current is None and data is None:
            return None
        data = data or {"first_seen": 0.0}
        state, attempts = current or (State.PENDING.value, 0)
        return Row(
            name,
            state,
            attempts,
            data.get("first_seen", 0.0),
            data.get("started"),
            data.get("finished"),
            data.get("exit_code"),
            data.get("log_path"),
            data.get("last_error"),
            priority=self._priorities.get(name, 0),
        )

    def rows(self, state: str | None = None) -> list[Row]:
        """The items this manager has seen, or those in `state`, by name."""
        with self._lock:
            names = sorted(self._seen)  # (every row's name is in it)
        rows = [r for r in (self.row(n) for n in names) if r is not None]
        return rows if state is None else [r for r in rows if r.state == state]

    def counts(self) -> dict[str, int]:
        """Items by state: a lookup per item seen, no row built (a million are counted in
        seconds, in no memory to speak of)."""
        out = {s.value: 0 for s in State}
        with self._lock:
            names = list(self._seen)  # (every row's name is in it)
        for name in names:
            current = self.state(name)
            out[current[0] if current else State.PENDING.value] += 1
        if self.batches is not None:  # and what batches hold that was never seen here
            seen = {int(self._hash(name), 16) for name in names}
            for state, n in self.batches.count(seen).items():
                out[state] = out.get(state, 0) + n
        return out

    def live_rows(self) -> list[Row]:
        """The rows the queue's forecast stands on: items run by this manager (their service
        times) and those still pending or running (the line). With a million finished items
        known, the status report builds these and counts the rest (`counts`)."""
        with self._lock:
            names = list(self._seen)  # (every row's name is in it)
            ran_here = set(self._rows) | set(self._recent) | set(self._failures)
        out = []
        for name in names:
            current = self.state(name)
            if name in ran_here or current is None or current[0] in (
                State.PENDING.value, State.RUNNING.value
            ):  # fmt: skip
                row = self.row(name)
                if row is not None:
                    out.append(row)
        return out
