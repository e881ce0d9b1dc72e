"""The flags that point a backend at a shared ledger, declared once for every backend:

--ledger URL     postgresql://user@host/db[?schema=NAME] - the password from PGPASSWORD or a
                 PGPASSFILE; a URL with a password only from the environment (WORKQUEUE_LEDGER)
--lease D        how long a manager's claims outlive its last heartbeat, as the other managers
                 count it over a working database (default 30s): what a manager that dies
                 costs its items, and the longest stop or cut-off of its own it rides out
--drain B        true: this manager starts drained (`workqueue drain`), false: it takes work
                 again; a WorkQueue's `drain` field, for the operator's manager of that queue
--offers K=V     what this manager offers; --needs GLOB=NEED what matching items need of the
                 manager that runs them (`manager.placement`)
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..declared import option
from ..durations import parse_duration
from ..errors import InputError, UserError
from ..placement import label_key, need_rules, offers, parse_need

DEFAULT_LEASE = 30.0


@runtime_checkable
class NamesALedger(Protocol):
    """A backend's options that may point at a shared ledger (`ledger_option`): every
    backend's here. The assembly opens the fleet's ledger when `ledger` is set."""

    ledger: str | None
    drain: bool | None  # `--drain true|false`, written at the manager's join
    offers: list  # `--offers`: (key, value) pairs
    needs: list  # `--needs`: (glob, Need) rules
    prefers: object  # `--prefers`: a Need, or None
    spill_after: float  # `--spill-after` seconds


def ledger_url(text: str) -> str:
    from .address import check_url

    return check_url(text)


def no_password_typed(text: str) -> None:
    """A password typed in `--ledger` is refused: every user of the machine sees a process's
    arguments (`ps`) for its whole life, and a shell keeps them in its history. (Rewriting
    the process's own arguments after start would still show them until then.)"""
    from .address import has_password

    if has_password(text):
        raise UserError(
            "--ledger: a password on the command line is visible to every user of this machine "
            "(ps) and kept in shell history: give it in PGPASSWORD or a PGPASSFILE (~/.pgpass), "
            "or the whole URL in WORKQUEUE_LEDGER"
        )


def ledger_option():
    return option(
        "--ledger",
        "a shared ledger: many managers (machines, clusters) work one queue through "
        "PostgreSQL (postgresql://user@host/db[?schema=NAME]; the password from PGPASSWORD or "
        "a PGPASSFILE, or the URL in WORKQUEUE_LEDGER - never typed here)",
        parse=ledger_url,
        metavar="URL",
        typed=no_password_typed,
    )


MOST_LEASE = 86_400.0  # a day: a dead manager's items wait this long at most


def lease_seconds(text: str) -> float:
    seconds = parse_duration(text)
    if seconds < 1:
        raise InputError(f"a lease shorter than a second would run out between heartbeats: {text}")
    if seconds > MOST_LEASE:
        raise InputError(f"a lease longer than a day would leave a dead manager's items waiting "
                         f"that long: {text}")  # fmt: skip
    return seconds


def lease_option():
    return option(
        "--lease",
        "with --ledger: how long this manager's claims outlive its last heartbeat - a manager "
        f"that dies has its items run by the others after this (default {DEFAULT_LEASE:g}s)",
        default=DEFAULT_LEASE,
        parse=lease_seconds,
        requires="ledger",
    )


def drain_word(text: str) -> bool:
    word = str(text).strip().lower()
    if word in ("true", "yes", "on"):
        return True
    if word in ("false", "no", "off"):
        return False
    raise InputError(f"true or false, not {text!r}")


def drain_option():
    return option(
        "--drain",
        "with --ledger: true starts this manager drained (it takes nothing new, the other "
        "managers take the queue), false gives it work again; unset, it is as `workqueue "
        "drain` left it",
        parse=drain_word,
        metavar="true|false",
        requires="ledger",
        crd="drain",
        crd_schema={"type": "boolean"},
    )


def offers_option():
    return option(
        "--offers",
        "with --ledger: what this manager offers, KEY=VALUE (repeatable: gpu=a100, region=eu): "
        "it claims only items whose need these meet",
        parse=offers,
        repeat=True,
        metavar="KEY=VALUE",
        requires="ledger",
    )


def node_labels_option():
    return option(
        "--offers-node-label",
        "with --ledger: offer KEY=VALUE when every node the worker pods may use has that "
        "label with that one value, read at start (repeatable: topology.kubernetes.io/region, "
        "nvidia.com/gpu.product); the pods are pinned to it",
        parse=lambda words: [label_key(word) for word in words],
        repeat=True,
        metavar="KEY",
        requires="ledger",
    )


def needs_option():
    return option(
        "--needs",
        "with --ledger: items whose name matches GLOB run only on managers whose --offers meet "
        "NEED, a label selector (repeatable, first match wins: 'render/*=gpu', "
        "'eu-*=region==eu', '*=spot!=true')",
        parse=need_rules,
        repeat=True,
        metavar="GLOB=NEED",
        requires="ledger",
    )


def needs_from_data_option():
    return option(
        "--needs-from-data",
        "with --ledger: an item no --needs rule matches needs what its data's 'needs' says "
        "(a label selector, as NEED); give it every manager of the queue",
        switch=True,
        requires="ledger",
    )


def prefers_option():
    return option(
        "--prefers",
        "with --ledger: the managers whose --offers meet NEED have every item first (e.g. "
        "'spot!=true'); the others take an item once it waited --spill-after",
        parse=parse_need,
        metavar="NEED",
        requires="ledger",
        once=True,
    )


def spill_after_option():
    return option(
        "--spill-after",
        "with --prefers: how long an item waits for a preferred manager before any other that "
        "may run it takes it (default 30s)",
        default=30.0,
        parse=parse_duration,
        requires="prefers",
    )
