"""Items are the messages of a NATS JetStream stream: every message an item, or keyed.

    workqueue ambassador --source 'nats://host:4222/RENDERS'                      every message
    workqueue ambassador --source 'nats://host:4222/RENDERS?subject=renders.>&name=subject'

The shapes, versions, tombstones and data are the log core's (`log_records.py`); this module is
the client part alone. A message's *fields* are its payload's - a JSON object's keys (a value
that is not a string is given as its JSON), else the payload as `body` (UTF-8) or
`body.base64` - with each header as `header.<Name>` and the message's `subject`. Its position
is its stream sequence; without `name`, an item is named by it, zero-padded to 12 digits so
names sort in log order (`000000000042`). `name=` chooses the key of the keyed shape:

    name=subject        the subject less the filter's literal leading tokens (`renders.>`:
                        `renders.a.mp4` is `a.mp4`; a KV bucket's `$KV.files.>` works the same)
    name=subject.last   the subject's last token
    name=FIELD          a field (`header.Nats-Msg-Id`, or a key of the JSON payload)

A key-value bucket's delete and purge markers (header `KV-Operation: DEL`/`PURGE`) are
tombstones, as is a `deleted: true` field.

Reading: a listing is an *ordered consumer* (ephemeral, server-side flow control, no acks)
from the stream's first retained message to the one the consumer reports nothing pending
after; the change feed is another from the sequence after the last one read, for as long as
the ambassador runs. Nothing is acknowledged and no durable consumer is left behind: the
stream is read, never consumed (what ran is the manager's ledger's), so a restart reads the
retained stream again - the retained log is the durable position, and nothing the server
still holds is missed. Retention (max-msgs, max-age, a purge) takes the messages it drops out
of the listing at the next full listing (`--relist-interval`).

nats-py is asyncio; this module runs one event loop on a thread of its own per lister, and
the listing's threads hand it coroutines (`_Loop.run`).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from typing import Any

from ..naming import SkippedNames
from ..timed_queue import TimedQueue
from .listers import Change, SourceUnreachable
from .log_records import (
    TOMBSTONE_FIELD,
    Backlog,
    LogShape,
    describe,
    payload_fields,
    priority_of,
)
from .nats_client import (
    CONNECT_SECONDS,
    check,
    config_from_url,
    connect,
    describe_error,
    literal_prefix,
)

PAGE = 1000  # messages the change feed applies as one batch at most
IDLE_SECONDS = 30.0  # a listing that hears nothing this long has lost its server
KV_TOMBSTONES = frozenset({"DEL", "PURGE"})


class _Loop:
    """An asyncio loop on a daemon thread: `run(coro)` waits for the coroutine's result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="nats-loop", daemon=True).start()

    def run(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


def fields_of(msg) -> dict[str, str]:
    """A message's fields (see the module docstring)."""
    fields = payload_fields(msg.data or b"")
    for key, value in (msg.headers or {}).items():
        fields[f"header.{key}"] = value
    if (msg.headers or {}).get("KV-Operation", "").upper() in KV_TOMBSTONES:
        fields[TOMBSTONE_FIELD] = "true"
    fields["subject"] = msg.subject
    return fields


class JetStreamLister:
    """The `Lister` (listers.py) for one JetStream stream."""

    resumes = True  # the feed starts again after an outage (`changes` from `read_to`)

    def __init__(self, config: dict) -> None:
        self.config = config
        self.stream = config["NATS_STREAM"]
        self.subject_filter = config.get("NATS_SUBJECT") or ""
        self.where = f"nats stream {self.stream!r}"
        self.skipped = SkippedNames(self.where)
        name = config.get("NATS_NAME") or None
        self.shape = LogShape(name, self.skipped.check, self._key_finder(name))
        self.backlog = Backlog()
        self.read_to = 0  # the newest sequence a listing or the feed read: the feed's start
        self._loop = _Loop()
        self._client = None

    def _key_finder(self, name: str | None):
        if name == "subject":
            drop = literal_prefix(self.subject_filter)
            return lambda fields: ".".join(fields["subject"].split(".")[drop:])
        if name == "subject.last":
            return lambda fields: fields["subject"].rsplit(".", 1)[-1]
        return None

    # -- the connection (on the loop) ------------------------------------------------------

    async def _connected(self):
        """The lister's client, connected (again, after an outage: a listing that finds it
        closed makes a new one); raises SourceUnreachable."""
        if self._client is not None and self._client.is_connected:
            return self._client
        if self._client is not None:
            await self._close_quietly()
        self._client = await connect(self.config)
        return self._client

    async def _close_quietly(self) -> None:
        client, self._client = self._client, None
        try:
            await client.close()
        except Exception:  # (closing a broken connection: nothing to say)
            pass

    async def _subscribe(self, start: int, deliver: TimedQueue | None = None):
        from nats.js.api import ConsumerConfig, DeliverPolicy

        client = await self._connected()
        options: dict[str, Any] = {"deliver_policy": DeliverPolicy.ALL}
        if start > 1:
            options = {"config": ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                                opt_start_seq=start)}  # fmt: skip
        if deliver is not None:
            options["cb"] = self._deliver_to(deliver)
        return await client.jetstream().subscribe(
            self.subject_filter, stream=self.stream, ordered_consumer=True, **options
        )

    @staticmethod
    def _deliver_to(deliver: TimedQueue):
        async def delivered(msg) -> None:
            deliver.put(msg)

        return delivered

    # -- the listing -----------------------------------------------------------------------

    def list_all(self) -> dict[str, str]:
        """Every item of the retained stream, folded as the messages come (a million messages
        are never all held: only the items they leave)."""
        try:
            return self._loop.run(self._list_all())
        except SourceUnreachable:
            raise
        except Exception as exc:  # nats-py's errors, a lost connection, a timeout
            raise SourceUnreachable(f"{self.where}: {describe_error(exc)}") from None

    async def _list_all(self) -> dict[str, str]:
        sub = await self._subscribe(1)
        found: dict[str, str] = {}
        last = 0
        try:
            info = await sub.consumer_info()
            if info.num_pending == 0 and not info.delivered.consumer_seq:
                return found  # an empty stream, or a filter nothing matches yet
            while True:
                msg = await sub.next_msg(timeout=IDLE_SECONDS)
                meta = msg.metadata
                last = meta.sequence.stream
                self.shape.fold(found, position_of(last), fields_of(msg))
                if meta.num_pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        self.read_to = max(self.read_to, last)
        return found

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        return describe(name, meta, self.stream)

    def ranks(self, config: dict) -> bool:
        return True  # a message may carry an integer `priority` field

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    # -- the change feed -------------------------------------------------------------------

    def changes(self, stop: threading.Event) -> Iterator[list[Change] | object]:
        """The messages after the newest one read, as the server delivers them."""
        delivered: TimedQueue = TimedQueue()
        try:
            sub = self._loop.run(self._subscribe(self.read_to + 1, delivered), CONNECT_SECONDS * 3)
        except Exception as exc:
            raise SourceUnreachable(f"{self.where}: following: {describe_error(exc)}") from None
        return self._follow(sub, delivered, stop)

    def _follow(self, sub, delivered: TimedQueue, stop: threading.Event):
        try:
            while not stop.is_set():
                try:
                    messages = [delivered.get(timeout=1.0)]
                except queue.Empty:
                    if self._client is None or not self._client.is_connected:
                        raise SourceUnreachable(f"{self.where}: the server is gone") from None
                    continue
                while len(messages) < PAGE:
                    try:
                        messages.append(delivered.get_nowait())
                    except queue.Empty:
                        break
                batch = []
                self.backlog.read(
                    [m.metadata.timestamp.timestamp() for m in messages],
                    messages[-1].metadata.num_pending,
                )
                for msg in messages:
                    sequence = msg.metadata.sequence.stream
                    change = self.shape.change(position_of(sequence), fields_of(msg))
                    if change is not None:
                        batch.append(change)
                    self.read_to = max(self.read_to, sequence)
                if batch:
                    yield batch
                self.backlog.served(len(messages))
        finally:
            try:
                self._loop.run(sub.unsubscribe(), CONNECT_SECONDS)
            except Exception:  # the connection is gone already: so is the consumer
                pass

    def stop(self) -> None:
        if self._client is not None:
            try:
                self._loop.run(self._close_quietly(), CONNECT_SECONDS)
            except Exception:
                pass


def position_of(sequence: int) -> str:
    """A message's position, and in the every-message shape its item's name: zero-padded so
    names sort as the log does."""
    return f"{sequence:012d}"


class NatsType:
    """The NATS JetStream source type of the registry (`registry.py`)."""

    kind = "nats"
    extra = "nats"
    secret_variables = "NATS_USER and NATS_PASSWORD, or NATS_TOKEN"
    events = True  # the change feed: an ordered consumer's pushes
    content_versions = True  # a new message is a new version
    data_groups = True  # a JSON payload's fields may say its group
    settles = False

    def shown(self, config: dict) -> str:
        return f"nats stream {config['NATS_STREAM']!r}"  # (never the URL: it may hold a secret)

    def ranks(self, config: dict) -> bool:
        return True

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    def config_from_url(self, url: str, options: dict) -> dict:
        from .registry import FOLDER_ONLY, not_for

        not_for("nats", options, FOLDER_ONLY)
        return config_from_url(url, options)

    def check(self, config: dict) -> None:
        check(config)

    def open(self, config: dict):
        from .listed import ListedSource

        return ListedSource.configured(JetStreamLister(config), config, 2.0)

    def describe(self, config: dict, name: str, meta: str | None) -> dict | None:
        return describe(name, meta, config["NATS_STREAM"]) if meta else None


SOURCE_TYPE = NatsType()
