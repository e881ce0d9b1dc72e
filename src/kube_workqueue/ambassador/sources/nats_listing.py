"""A JetStream stream's messages, as its lister reads them (`nats_stream.py`): what a message
is to the log core (its fields, its position, the stream's identity), and a whole listing read
by a *pull* consumer and held to the server's own count.

A listing pulls BATCH messages at a time through an ephemeral consumer that acknowledges
nothing: the server sends only what was asked for, so nothing can be dropped on the client's
side - a pushed listing could lose what overflowed a slow consumer's queue (nats-py says so
only to its error callback, and its ordered consumer counts a message delivered as it arrives,
before it is queued): a million-message cold start listed 945,487. What was read is held
against the count the consumer gave at its start (`num_pending`): a listing that read fewer is
short by what retention took meanwhile (`gone_since`, from two more counts), or it is read
again by the caller.
"""

from __future__ import annotations

import time

from .listers import SourceUnreachable
from .log_lives import LogIdentity
from .log_records import TOMBSTONE_FIELD, payload_fields

BATCH = 1000  # messages a listing's pull asks for at once
FETCH_SECONDS = 2.0  # how long one pull waits for its first message
IDLE_SECONDS = 30.0  # a listing that hears nothing this long has lost its server
KV_TOMBSTONES = frozenset({"DEL", "PURGE"})


def fields_of(msg) -> dict[str, str]:
    """A message's fields (`nats_stream`'s module docstring)."""
    fields = payload_fields(msg.data or b"")
    for key, value in (msg.headers or {}).items():
        fields[f"header.{key}"] = value
    if (msg.headers or {}).get("KV-Operation", "").upper() in KV_TOMBSTONES:
        fields[TOMBSTONE_FIELD] = "true"
    fields["subject"] = msg.subject
    return fields


def identity_of(info) -> LogIdentity | None:
    """A stream's identity from its info (nats-py's `StreamInfo`): its created time, to the
    microsecond nats-py reads; None from a server that gives none."""
    created = info.created
    if created is None:
        return None
    stamp = created.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return LogIdentity(stamp, stamp)


def position_of(sequence: int) -> str:
    """A message's position, and in the every-message shape its item's name (within the
    stream's identity): zero-padded so names sort as the log does."""
    return f"{sequence:012d}"


class PulledListing:
    """Listings of one stream (its messages matching `subject_filter`) over a JetStream
    context `js` (see the module docstring); `where` names it in errors."""

    def __init__(self, js, stream: str, subject_filter: str, where: str) -> None:
        self.js = js
        self.stream = stream
        self.subject_filter = subject_filter
        self.where = where

    async def read(self, fold) -> tuple[dict[str, str], int, int, int]:
        """(name -> meta of what the stream holds, folded by `fold(found, position, fields)`,
        messages read, messages the consumer counted at its start, the newest sequence
        read). Raises SourceUnreachable for a server that went quiet."""
        import nats.errors
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE,
            inactive_threshold=IDLE_SECONDS, mem_storage=True,
        )  # fmt: skip
        pull = await self.js.pull_subscribe(self.subject_filter, stream=self.stream,
                                            config=config)  # fmt: skip
        found: dict[str, str] = {}
        read = newest = 0
        try:
            expected = (await pull.consumer_info()).num_pending
            heard = time.monotonic()
            while expected:  # (none: an empty stream, or a filter nothing matches yet)
                try:
                    messages = await pull.fetch(BATCH, timeout=FETCH_SECONDS)
                except nats.errors.TimeoutError:
                    if time.monotonic() - heard > IDLE_SECONDS:
                        raise SourceUnreachable(f"{self.where}: the server went quiet") from None
                    if not (await pull.consumer_info()).num_pending:
                        break  # nothing left to read: fewer than counted (retention)
                    continue
                heard = time.monotonic()
                for msg in messages:
                    newest = msg.metadata.sequence.stream
                    read += 1
                    fold(found, position_of(newest), fields_of(msg))
                if messages and messages[-1].metadata.num_pending == 0:
                    break
        finally:
            try:
                await pull.unsubscribe()
            except Exception:  # the connection is gone already: so is the consumer
                pass
        return found, read, expected, newest

    async def gone_since(self, newest: int, expected: int) -> int:
        """How many of the `expected` messages the stream no longer holds (retention took them
        while the listing ran): what it counted then, less what it holds now up to `newest`."""
        holds = await self.pending(1) - await self.pending(newest + 1)
        return max(0, expected - holds)

    async def pending(self, start: int) -> int:
        """How many messages the filter matches from sequence `start` on, now (an ephemeral
        consumer's count, made and deleted)."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(1, start),
            ack_policy=AckPolicy.NONE, filter_subject=self.subject_filter or None,
            inactive_threshold=IDLE_SECONDS, mem_storage=True,
        )  # fmt: skip
        info = await self.js.add_consumer(self.stream, config)
        try:
            return info.num_pending
        finally:
            try:
                await self.js.delete_consumer(self.stream, info.name)
            except Exception:  # (gone already: it was ephemeral)
                pass
