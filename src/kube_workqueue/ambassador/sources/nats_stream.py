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

Reading: a listing is pulled (`nats_listing.py`: an ephemeral consumer, no acks, nothing a
client can drop) from the stream's first retained message to the one the consumer reports
nothing pending after, held to the consumer's own count - a listing short of it is read again,
then held (`listers.ListedShort`) rather than served short. The change feed is an *ordered
consumer* (pushed, server-side flow control) from the sequence after the last one read, for as
long as the ambassador runs; a message nats-py drops for it (`SlowConsumerError`) is counted
(`dropped`) and answered by a full re-listing. Nothing is acknowledged and no durable consumer
is left behind: the stream is read, never consumed (what ran is the manager's ledger's), so a
restart reads the retained stream again - the retained log is the durable position, and nothing
the server still holds is missed. Retention (max-msgs, max-age, a purge) takes the messages it
drops out of the listing at the next full listing (`--relist-interval`).

Identity (`log_lives.LogIdentity`): the stream's `created` time. A stream deleted and added
again starts its sequences at 1: each listing reads the stream's info first, and the feed
looks every IDENTITY_LOOK_SECONDS, and at once when nats-py made its ordered consumer anew (a
consumer sequence that starts over: the stream went away) - a new created time is a new life
of the log, whose messages are new items (`<tag>-<sequence>` in the every-message shape) read
from its start by a new listing, never applied by the old feed; a last sequence below the
newest one read in the same life is held (`PositionWentBack`).

nats-py is asyncio; this module runs one event loop on a thread of its own per lister, and
the listing's threads hand it coroutines (`_Loop.run`).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..naming import SkippedNames
from ..timed_queue import TimedQueue
from .listers import RELIST, RESTART, Change, ListedShort, PositionWentBack, SourceUnreachable
from .log_lives import Lives, LogIdentity
from .log_records import Backlog, LogShape, describe, priority_of
from .nats_client import (
    CONNECT_SECONDS,
    check,
    config_from_url,
    connect,
    describe_error,
    literal_prefix,
)
from .nats_listing import (  # noqa: F401 - (identity_of: what tests name records by)
    IDLE_SECONDS,
    PulledListing,
    fields_of,
    identity_of,
    position_of,
)

PAGE = 1000  # messages the change feed applies as one batch at most
IDENTITY_LOOK_SECONDS = 2.0  # the feed looks at the stream's created time this often
READS = 3  # a listing short of the stream's count is read this many times before it is held

log = logging.getLogger(__name__)


class _Loop:
    """An asyncio loop on a daemon thread: `run(coro)` waits for the coroutine's result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="nats-loop", daemon=True).start()

    def run(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


class JetStreamLister:
    """The `Lister` (listers.py) for one JetStream stream.

    Invariant: `read_to` is the newest stream sequence a listing or the feed read in the
    stream's current life (`lives.current`), 0 before any or after it started over - the
    feed's start; `dropped` counts the messages nats-py dropped for a slow consumer (its
    loop's thread adds, anyone reads)."""

    resumes = True  # the feed starts again after an outage (`changes` from `read_to`)
    # messages nats-py queues for the feed before it drops one (a slow consumer): its own
    # default; the contract suite makes it small to force drops
    feed_pending = 512 * 1024

    def __init__(self, config: dict) -> None:
        self.config = config
        self.stream = config["NATS_STREAM"]
        self.subject_filter = config.get("NATS_SUBJECT") or ""
        self.where = f"nats stream {self.stream!r}"
        self.skipped = SkippedNames(self.where)
        name = config.get("NATS_NAME") or None
        self.shape = LogShape(name, self.skipped.check, self._key_finder(name))
        self.backlog = Backlog()
        self.lives = Lives(self.where)
        self.read_to = 0
        self.dropped = 0
        self._loop = _Loop()
        self._client = None

    def _key_finder(self, name: str | None):
        if name == "subject":
            drop = literal_prefix(self.subject_filter)
            return lambda fields: ".".join(fields["subject"].split(".")[drop:])
        if name == "subject.last":
            return lambda fields: fields["subject"].rsplit(".", 1)[-1]
        return None

    def _drop(self) -> None:
        self.dropped += 1

    # -- the connection (on the loop) ------------------------------------------------------

    async def _connected(self):
        """The lister's client, connected (again, after an outage: a listing that finds it
        closed makes a new one); raises SourceUnreachable."""
        if self._client is not None and self._client.is_connected:
            return self._client
        if self._client is not None:
            await self._close_quietly()
        self._client = await connect(self.config, self._drop)
        return self._client

    async def _close_quietly(self) -> None:
        client, self._client = self._client, None
        try:
            await client.close()
        except Exception:  # (closing a broken connection: nothing to say)
            pass

    async def _identity(self) -> tuple[LogIdentity | None, int]:
        """(the stream's identity - its created time -, its last sequence now)."""
        from nats.js.errors import NotFoundError

        client = await self._connected()
        try:
            info = await client.jetstream().stream_info(self.stream)
        except NotFoundError:  # deleted: an outage until it is there again (never "all gone")
            raise SourceUnreachable(f"{self.where}: no such stream now") from None
        return identity_of(info), info.state.last_seq

    async def _subscribe(self, start: int, deliver: TimedQueue):
        from nats.js.api import ConsumerConfig, DeliverPolicy

        client = await self._connected()
        options: dict[str, Any] = {"deliver_policy": DeliverPolicy.ALL}
        if start > 1:
            options = {"config": ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                                opt_start_seq=start)}  # fmt: skip
        options["cb"] = self._deliver_to(deliver)
        return await client.jetstream().subscribe(
            self.subject_filter, stream=self.stream, ordered_consumer=True,
            pending_msgs_limit=self.feed_pending, **options,
        )  # fmt: skip

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
        identity, last = await self._identity()
        if self.lives.seen(identity, position_of(self.read_to) if self.read_to else ""):
            self.read_to = 0  # a new life: its sequences start over
        elif last < self.read_to:
            raise PositionWentBack(
                f"{self.where}: its last sequence is {last}, below {self.read_to} already read "
                "in this life of the stream - held, so that no new message is taken for one "
                "that ran (restart the ambassador to serve it as it is)"
            )
        self.shape.tag = identity.tag if identity is not None else ""
        js = (await self._connected()).jetstream()
        listing = PulledListing(js, self.stream, self.subject_filter, self.where)
        for _ in range(READS):
            found, read, expected, newest = await listing.read(self.shape.fold)
            if read >= expected or read >= expected - await listing.gone_since(newest, expected):
                self.read_to = max(self.read_to, newest)
                self.shape.unnamed(self.where, found)
                return found
        raise ListedShort(f"{self.where}: read {read:,} of the {expected:,} messages the "
                          f"stream held, {READS} times: held, not served short")  # fmt: skip

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        return describe(name, meta, self.stream)

    def ranks(self, config: dict) -> bool:
        return True  # a message may carry an integer `priority` field

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    def log_facts(self) -> dict | None:
        return self.lives.facts()

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
        """The feed's batches; RELIST after a message nats-py dropped (the listing reads it),
        RESTART when the stream is a new one (made again: the listing reads it from its
        start, and a new feed follows it)."""
        dropped, looked, delivered_to = self.dropped, time.monotonic(), 0
        try:
            while not stop.is_set():
                if self.dropped != dropped:
                    dropped = self.dropped
                    log.warning("%s: the client dropped messages of a slow consumer (%d so far): "
                                "listing it again", self.where, dropped)  # fmt: skip
                    yield RELIST
                if time.monotonic() - looked > IDENTITY_LOOK_SECONDS:
                    looked = time.monotonic()
                    if self._started_over():
                        yield RESTART
                        return
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
                first = messages[0].metadata.sequence.consumer
                if first <= delivered_to and self._started_over():
                    # nats-py made its ordered consumer anew (a gap, missed heartbeats: the
                    # stream gone): on a stream made again, these are the new one's - named
                    # by the listing of it, never under the old one's tag
                    yield RESTART
                    return
                delivered_to = messages[-1].metadata.sequence.consumer
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

    def _started_over(self) -> bool:
        """Whether the stream is not the one the listing read (its created time changed)."""
        identity, _ = self._loop.run(self._identity(), CONNECT_SECONDS * 3)
        current = self.lives.current
        return identity is not None and current is not None and identity.token != current.token

    def stop(self) -> None:
        if self._client is not None:
            try:
                self._loop.run(self._close_quietly(), CONNECT_SECONDS)
            except Exception:
                pass


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
        from .registry import neither_folder_nor_s3

        neither_folder_nor_s3("nats", options)
        return config_from_url(url, options)

    def check(self, config: dict) -> None:
        check(config)

    def open(self, config: dict):
        from .listed import ListedSource

        return ListedSource.configured(JetStreamLister(config), config, 2.0)

    def describe(self, config: dict, name: str, meta: str | None) -> dict | None:
        return describe(name, meta, config["NATS_STREAM"]) if meta else None


SOURCE_TYPE = NatsType()
