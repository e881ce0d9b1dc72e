"""What the commands that act on a queue's record do, in one shape for every backend:
`workqueue status [NAME]`, `retry NAME | --failed | --matching GLOB`, `pause`, `resume`,
`scale --parallelism N`.

`QueueOps` holds the rules every backend shares - what may be retried and what is said when
it may not, which failed items `--matching` takes, what pause and resume say - and leaves to
the backend only the hooks that read and change its own record (a SQLite ledger and a file
beside it; Jobs, record ConfigMaps and a control ConfigMap). A backend package hands one out
from `queue_ops(queue)`; use it as a context manager: what it opened is closed at the end.
"""

from __future__ import annotations

import fnmatch
import time
from abc import ABC, abstractmethod

from .durations import moment
from .errors import UserError
from .items import QueueRecord
from .lifecycle import RETRYABLE


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

    @abstractmethod
    def paused_since(self) -> float | None:
        """When the queue was paused (`workqueue pause`); None when it is not."""

    @abstractmethod
    def hold(self, since: float | None) -> None:
        """Pause the queue as of `since`, or resume it (None)."""

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

    def asked_parallelism(self) -> int | None:
        """The parallelism asked for the queue (the running manager follows it), or None."""
        return None

    def ask_parallelism(self, parallelism: int) -> None:
        raise UserError(f"{self.where}: this backend cannot be scaled while it runs")

    def autoscaled(self) -> bool:
        """True when the queue's running manager has the built-in autoscaler in charge."""
        return False

    def asked_group_rules(self) -> dict | None:
        """The group limits and rates asked of the queue (`scale --limit/--rate`), or None."""
        return None

    def ask_group_rules(self, rules: dict) -> None:
        raise UserError(f"{self.where}: this backend cannot change group limits while it runs")

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
        """Tell the queue's manager to act on the removals it holds (a hook)."""
        raise UserError(f"{self.where}: this backend holds no removals")

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
