"""What the commands that act on a queue's record do, in one shape for every backend:
`workqueue status [NAME]`, `retry NAME | --failed | --matching GLOB`, `pause`, `resume`,
`scale --parallelism N`.

`QueueOps` holds the rules every backend shares - what may be retried and what is said when
it may not, which failed items `--matching` takes, what pause and resume say - and leaves to
the backend only the hooks that read and change its own record (a SQLite ledger and a file
beside it; Jobs, record ConfigMaps and a control ConfigMap). A pause, a parallelism, group
rules and accepted removals go through `controls()`: the store's one `QueueControls` object,
the same kind of object its manager obeys (`QueueFiles`, `PostgresLedger`, the cluster's
`Control`/`QueueResource`), so a command and a manager cannot disagree on where one lives.
A backend package hands one out from `queue_ops(queue)`; use it as a context manager: what it
opened is closed at the end.
"""

from __future__ import annotations

import fnmatch
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TypeVar

from .durations import moment
from .errors import UserError
from .items import QueueRecord
from .lifecycle import RETRYABLE
from .ports import QueueControls

T = TypeVar("T")


class QueueOps(ABC):
    where: str  # the queue for people: "/srv/.workqueue", "queue thumbs of media"
    running_work = "running work"  # what finishes when the queue is paused
    made: str | None = None  # said when a command made the queue's record (none was there)

    def __enter__(self) -> QueueOps:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:  # noqa: B027 - a hook with nothing to do by default
        """Close what the hooks opened (a ledger, an API client)."""

    # -- the hooks -------------------------------------------------------------------------

    @abstractmethod
    def status(self, listed: list[str] | None = None) -> QueueRecord:
        """What the queue's record says; `listed` (the source's names) lets a record keyed by
        hash (Kubernetes) name its items."""

    def item_detail(self, name: str, record: QueueRecord) -> dict:
        """What `workqueue status NAME` adds for one item (a log tail, a pod's state)."""
        return record.details.get(name) or {}

    @abstractmethod
    def state_of(self, name: str) -> str | None:
        """The item's state in the record now; None for an item it does not know."""

    @abstractmethod
    def failed_names(self, listed: list[str] | None) -> list[str]:
        """Every failed item the record can name (`listed` names more on Kubernetes)."""

    @abstractmethod
    def run_again(self, name: str) -> bool:
        """Make a failed or cancelled item run again (pending, or asked of the manager that
        runs the queue); False when it could not."""

    @abstractmethod
    def retried(self, name: str, state: str) -> str:
        """What `retry NAME` says once `run_again` did it (`state`: what it was)."""

    def controls(self, *, change: bool) -> QueueControls | None:
        """The queue's controls (`QueueControls`: one object per store, the one its manager
        obeys); None when there is no queue to read them from (a read then finds nothing
        asked). `change`: they are about to be written (a store may make its queue first)."""
        raise UserError(f"{self.where}: this backend has no controls to change while it runs")

    def paused_since(self) -> float | None:
        """When the queue was paused (`workqueue pause`); None when it is not."""
        return self._read("read", lambda controls: controls.paused_since())

    def hold(self, since: float | None) -> None:
        """Pause the queue as of `since`, or resume it (None)."""
        verb = "resume" if since is None else "pause"
        self._change(verb, lambda controls: controls.set_paused(since))

    def asking(self, verb: str, call: Callable[[], T]) -> T:
        """`call()`: a read or a change of the controls (`verb`: what it is, for a message);
        a backend turns its store's errors into one line here."""
        return call()

    def _read(self, verb: str, read: Callable[[QueueControls], T]) -> T | None:
        def call() -> T | None:
            controls = self.controls(change=False)
            return None if controls is None else read(controls)

        return self.asking(verb, call)

    def _change(self, verb: str, change: Callable[[QueueControls], None]) -> None:
        def call() -> None:
            controls = self.controls(change=True)
            assert controls is not None  # (a store makes its queue for a change)
            change(controls)

        self.asking(verb, call)

    # -- the rules every backend shares ----------------------------------------------------

    def retry(self, name: str) -> str:
        """Run one failed (or cancelled) item again; an unknown item, or one that did not
        fail, is a `UserError` on every backend."""
        state = self.state_of(name)
        if state is None:
            raise UserError(f"no item named {name!r} in {self.where}")
        if state not in RETRYABLE or not self.run_again(name):
            raise UserError(f"{name!r} is {state}, not failed: nothing to retry")
        return self.retried(name, state)

    def retry_many(
        self, *, matching: str | None = None, listed: list[str] | None = None
    ) -> list[str]:
        """Every failed item (whose name matches the glob `matching`) run again; their
        names, in order."""
        names = sorted(
            n
            for n in self.failed_names(listed)
            if matching is None or fnmatch.fnmatchcase(n, matching)
        )
        return [name for name in names if self.run_again(name)]

    def pause(self) -> str:
        """Hold the queue: running work finishes, nothing new starts, until `resume`."""
        since = self.paused_since()
        if since is not None:
            return f"{self.where}: already paused since {moment(since, date=True)}"
        self.hold(time.time())
        return f"{self.where}: paused; {self.running_work} finishes, nothing new starts " \
            "(workqueue resume)"  # fmt: skip

    def drain(self, manager: str, *, undo: bool = False) -> str:
        """Ask one manager of several to take nothing new (`undo`: to take work again); a
        line for people. Only a shared ledger has several managers to choose among."""
        raise UserError(
            f"{self.where} has one manager, not several: drain names a manager of a shared "
            "--ledger (to hold this queue, workqueue pause)"
        )

    def asked_parallelism(self) -> int | None:
        """The parallelism asked for the queue (the running manager follows it), or None."""
        return self._read("read", lambda controls: controls.wanted_parallelism())

    def ask_parallelism(self, parallelism: int) -> None:
        self._change("scale", lambda controls: controls.want_parallelism(parallelism))

    def autoscaled(self) -> bool:
        """True when the queue's running manager has the built-in autoscaler in charge."""
        return False

    def asked_group_rules(self) -> dict | None:
        """The group limits and rates asked of the queue (`scale --limit/--rate`), or None."""
        return self._read("read", lambda controls: controls.wanted_group_rules())

    def ask_group_rules(self, rules: dict) -> None:
        self._change("scale", lambda controls: controls.want_group_rules(rules))

    def scale_groups(self, *, limits: list | None = None, rates: list | None = None) -> str:
        """Ask for group `limits` and `rates` (parsed rules; None: that kind unchanged, []:
        none): the running managers - and any that start later - follow them at once, in
        place of their --limit and --rate flags."""
        from .tenancy.rules import asked_rules, rule_texts

        before = asked_rules(self.asked_group_rules())
        self.ask_group_rules(rule_texts(limits, rates))
        said = []
        for kind, given, was in (("limits", limits, before[0]), ("rates", rates, before[1])):
            if given is None:
                continue
            now_text = ", ".join(rule_texts(**{kind: given})[kind]) or "none"
            was_text = "none asked before" if was is None else \
                "was " + (", ".join(rule_texts(**{kind: was})[kind]) or "none")  # fmt: skip
            said.append(f"group {kind} {now_text} ({was_text})")
        return f"{self.where}: " + "; ".join(said)

    def scale(self, parallelism: int) -> str:
        """Ask for `parallelism` (0: nothing new starts): the running manager - and any that
        starts later - follows it. Refused while the built-in autoscaler is in charge: one
        decider at a time."""
        if self.autoscaled():
            raise UserError(
                f"{self.where}: its manager runs with --autoscale, which sets the parallelism; "
                "restart it without --autoscale to set it by hand"
            )
        before = self.asked_parallelism()
        self.ask_parallelism(parallelism)
        was = f"was {before}" if before is not None else "none asked before"
        then = "nothing new starts" if parallelism == 0 else f"up to {parallelism} at once"
        return f"{self.where}: parallelism {parallelism} ({was}): {then}"

    def accept_removals(self) -> None:
        """Tell the queue's manager to act on the removals it holds."""
        self._change("accept removals of", lambda controls: controls.accept_removals())

    def resume(self, *, accept_removals: bool = False) -> str:
        """Let a paused queue dispatch again; with `accept_removals`, also let its manager act
        at once on removals it holds (`--cancel-removed` after a sudden emptiness)."""
        said = []
        if accept_removals:
            self.accept_removals()
            said.append(f"{self.where}: removals held by its manager are accepted: the items "
                        "that left the source are cancelled now")  # fmt: skip
        since = self.paused_since()
        if since is None:
            if not said:
                said.append(f"{self.where}: not paused")
        else:
            self.hold(None)
            said.append(f"{self.where}: resumed (paused since {moment(since, date=True)})")
        return "\n".join(said)
