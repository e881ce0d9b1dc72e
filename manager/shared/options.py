"""The flags that point a backend at a shared ledger, declared once for every backend:

--ledger URL     postgresql://user@host/db - the password from PGPASSWORD or a PGPASSFILE
--lease D        how long a claim lasts unrenewed (default 30s): what a manager that dies
                 costs its items, and the longest outage of its own it rides out
"""

from __future__ import annotations

from ..declared import option
from ..durations import parse_duration
from ..errors import InputError

DEFAULT_LEASE = 30.0


def ledger_url(text: str) -> str:
    from .database import check_url

    return check_url(text)


def ledger_option():
    return option(
        "--ledger",
        "a shared ledger: many managers (machines, clusters) work one queue through "
        "PostgreSQL (postgresql://user@host/db; the password from PGPASSWORD or a PGPASSFILE)",
        parse=ledger_url,
        metavar="URL",
    )


def lease_seconds(text: str) -> float:
    seconds = parse_duration(text)
    if seconds < 1:
        raise InputError(f"a lease shorter than a second would run out between renewals: {text}")
    return seconds


def lease_option():
    return option(
        "--lease",
        "with --ledger: how long a claim lasts unrenewed - a manager that dies has its items "
        f"run by the others after this (default {DEFAULT_LEASE:g}s)",
        default=DEFAULT_LEASE,
        parse=lease_seconds,
    )
