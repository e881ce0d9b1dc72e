"""A log's lives: what identifies the log a log source reads, and what it says when the log
starts over (see `log_records`' module docstring for why names are made within it).

    LogIdentity   the server's word for the log (a Kafka topic id, a JetStream stream's
                  created time) and the short tag every-record names carry
    Lives         the identities a lister has read its log under: a start over said once,
                  and the facts a listing's `metadata.log` carries
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import NamedTuple

log = logging.getLogger(__name__)


class LogIdentity(NamedTuple):
    """What identifies the log a lister reads: `token`, the server's own word for it (a Kafka
    topic id, a JetStream stream's created time); `since`, when the log was made, where the
    server says (RFC 3339, else ""). `tag` names items within it."""

    token: str
    since: str = ""

    @property
    def tag(self) -> str:
        """A short digest of the token: 8 hex digits (one log made again a million times has
        one chance in 8,600 that two of its lives share one)."""
        return hashlib.sha256(self.token.encode()).hexdigest()[:8]


class Lives:
    """The identities a lister has read its log under, and what it says when the log starts
    over (see the module docstring). `current` is None until the first listing (and for a log
    without an identity); `started_over` is what `metadata.log.startedOver` carries: when,
    the identity before, and the newest position read of it. The listing's thread writes
    (`seen`), any thread reads `facts()` (a dict replaced whole, never changed in place)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.current: LogIdentity | None = None
        self.started_over: dict | None = None

    def seen(self, identity: LogIdentity | None, read_to: str) -> bool:
        """The identity a listing found; whether the log started over since the last one
        (then said once, with `read_to`, the newest position read of the old log)."""
        before, self.current = self.current, identity
        if before is None or identity is None or before.token == identity.token:
            return False
        self.started_over = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "was": before.token,
            "wasTag": before.tag,
            "readTo": read_to,
        }
        log.warning("%s started over: it was made again (%s, was %s; read up to %s of the old "
                    "one) - its records are new items, what ran of the old one stays done",
                    self.where, _said(identity), _said(before), read_to or "nothing")  # fmt: skip
        return True

    def made_again(self, why: str, read_to: str) -> None:
        """A log without an identity found made again some other way (a Redis stream's count of
        records ever added went back): said once, and in `facts`, as `seen` would."""
        self.started_over = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "was": "", "wasTag": "", "readTo": read_to}  # fmt: skip
        log.warning("%s started over: %s (read up to %s of the old one)", self.where, why,
                    read_to or "nothing")  # fmt: skip

    def facts(self) -> dict | None:
        """The log's identity as a listing's `metadata.log` says it (None before the first
        listing of a log with one, and for a log without one that never started over)."""
        identity = self.current
        if identity is None and self.started_over is None:
            return None
        found: dict = {}
        if identity is not None:
            found.update(identity=identity.token, tag=identity.tag)
            if identity.since:
                found["since"] = identity.since
        if self.started_over is not None:
            found["startedOver"] = dict(self.started_over)
        return found


def _said(identity: LogIdentity) -> str:
    return f"made {identity.since}" if identity.since else f"id {identity.token}"
