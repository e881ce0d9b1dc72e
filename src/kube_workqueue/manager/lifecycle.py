"""The item's life: the rules every ledger applies, written once.

    pending ──start──► running ──finish──► succeeded | failed
       ▲                  │                               │
       └─────requeue──────┘ (the attempt given back)      └──start──► running (attempts left)

    pending | running | failed ───cancel──► cancelled     (the item left the source)
    succeeded | failed | cancelled ─rerun──► pending      (a new version: a new attempt series,
                                                           the old outcome kept as history)
    failed | cancelled ───retry──► pending                 (`workqueue retry`: attempts reset)

Three ledgers keep an item's life - the SQLite ledger of a state directory, the PostgreSQL
ledger a fleet shares, the cluster's record - and each once restated these rules in its own
form (the requeue's floor, cancel's refusal, rerun and retry's guards, the version's
set-or-pop), held equal by nothing. Now the Python ledgers ask the functions below for
requeue, cancel, rerun, retry and (but the cluster's `start`, whose map of versions sits in
front of its Jobs' and record's) the version, and the shared ledger's statements write their
guards from the same tuples (`sql_in`), so a rule changed here changes in all three;
`tests/ledger_contract/` holds all three to the result.

`start` is guarded where the item is claimed. On a shared ledger the claim takes only a
`STARTABLE` item with attempts left, and the start statement repeats the guard, fenced on the
claim's owner; alone, the SQLite and cluster ledgers are written by one manager whose line
hands a name to one slot at a time, and their `start` records what that slot began - it
refuses nothing.

A ledger's caller decides *whether* to act (the retry policy, a removal's proof); these rules
say what a ledger refuses whatever it is asked. They are pure: no I/O, no lock - a ledger
applies them under its own lock, to the state it holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from .items import FINISHED, State

STARTABLE = (State.PENDING, State.FAILED)  # (a failed one only while it has attempts left)
CANCELLABLE = (State.PENDING, State.RUNNING, State.FAILED)
WAITING_CANCELLABLE = (State.PENDING, State.FAILED)  # cancellable without a run to end
RERUNNABLE = FINISHED
RETRYABLE = (State.FAILED, State.CANCELLED)


def may_cancel(current: tuple[str, int] | None) -> bool:
    """Whether an item in `current` may be cancelled: not one that finished, nor unknown."""
    return current is not None and current[0] in CANCELLABLE


def may_rerun(current: tuple[str, int] | None) -> bool:
    """Whether an item in `current` may run again as new: only one whose work has ended."""
    return current is not None and current[0] in RERUNNABLE


def may_retry(current: tuple[str, int] | None) -> bool:
    """Whether `workqueue retry` may put an item in `current` back: a failed or cancelled one."""
    return current is not None and current[0] in RETRYABLE


def given_back(attempts: int) -> int:
    """The attempts of an item put back in line (`requeue`): its attempt did not count."""
    return max(0, attempts - 1)


GIVEN_BACK_SQL = "greatest(attempts - 1, 0)"  # `given_back`, for the shared ledger's statements


def keep_version(kept: dict[str, str], name: str, version: str | None) -> None:
    """Note the version `name`'s latest attempt ran at in `kept`, a map that holds only the
    items that have one (None: it ran at none - an older version is not its version)."""
    if version is not None:
        kept[name] = version
    else:
        kept.pop(name, None)


def sql_in(states: Iterable[State]) -> str:
    """`states` as an SQL list for `state IN …` (the shared ledger's guards)."""
    return "(" + ", ".join(f"'{state.value}'" for state in states) + ")"
