"""Items are the records of a Kafka topic: every record an item, or keyed.

    workqueue ambassador --source 'kafka://broker:9092/renders'                every record
    workqueue ambassador --source 'kafka://broker:9092/renders?name=key'       keyed

The shapes, versions, tombstones and data are the log core's (`log_records.py`); this module is
the client part alone (`kafka_client.py` makes the client). A record's *fields* are its value's
(a JSON object's keys, else `body` or `body.base64`: `log_records.payload_fields`), each header
as `header.<name>`, and its key as `key` (`key.base64` when it is not UTF-8) - the record's own
key and headers win over a value's field of the same name. Its *position* is
`PARTITION-OFFSET`, zero-padded (`0002-000000000017`) so that, without `name`, the names of a
partition's records sort in its log order. `name=` chooses the key of the keyed shape:

    name=key            the record's key - the compacted-topic convention: the newest record
                        of a key is the item, and a record whose value is null is its
                        tombstone (the item is gone)
    name=FIELD          a field of a JSON value; `name=header.NAME`, a header
                        (a `deleted: true` field is a tombstone in every keyed shape)

Kafka orders records within a partition only. A producer that keys a record by its item's name
(as compaction needs anyway) puts every record of one item on one partition, so "the newest
record of a key" is well defined; records of one key spread over several partitions (keyed by
a field the producer did not key by) are folded in the order they are read.

Reading: partitions are *assigned* to a consumer, never subscribed - no consumer group is
joined and no offset is committed, so the ambassador takes nothing from another reader and a
record is never "consumed". A listing reads every partition from its first retained offset to
its end (the fetch's end-of-partition event); the change feed is another consumer from each
partition's next offset after the ones read, for as long as the ambassador runs, and looks at
the topic's partitions every PARTITIONS_LOOK_SECONDS: a partition added while it runs is read
from its start. Like the other logs, the retained topic is the durable position: a restart
reads it again, and the manager's ledger says what ran - nothing the brokers still hold is
missed. Retention (`retention.ms`, `retention.bytes`, DeleteRecords) takes the records it drops
out of the listing at the next full listing (`--relist-interval`): in the every-record shape,
never a cancellation (`log_records.removals`). librdkafka drops no record on the client's
side; each listing is held to the ends the brokers gave at its start all the same (a
partition read short of its end is read again, then held: `listers.ListedShort`).

Identity (`log_lives.LogIdentity`): the topic's id (KIP-516; brokers before Kafka 2.8 give
none, and then names carry no tag). A topic made again - deleted and created, or lost with a
broker's storage - starts its offsets at 0 under a new id: each listing reads the id first,
and the feed looks every IDENTITY_LOOK_SECONDS and at once when an offset goes back or the
topic is unknown; a new id is a new life of the log, read from its start by a new listing
(`<tag>-PARTITION-OFFSET` in the every-record shape), never applied by the old feed. A
partition that ends below an offset already read in the same life (truncated by an unclean
leader election) is held (`PositionWentBack`). What is left: a topic deleted, made again and
written past the offset read, between two looks of the feed (two seconds), has those records
named under the old id once before the new listing names them anew.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from ..naming import SkippedNames
from .kafka_client import (
    CONNECT_SECONDS,
    admin_settings,
    batch_of,
    check,
    config_from_url,
    describe_error,
    fields_of,
    partitions,
    position_of,
    seconds_of,
    settings,
    topic_identity,
)
from .listers import RESTART, Change, ListedShort, PositionWentBack, SourceUnreachable
from .log_lives import Lives, LogIdentity
from .log_records import Backlog, LogShape, describe, priority_of

IDLE_SECONDS = 30.0  # a listing that hears nothing this long has lost its brokers
PARTITIONS_LOOK_SECONDS = 10.0  # the feed looks for partitions added this often
IDENTITY_LOOK_SECONDS = 2.0  # the feed looks at the topic's id this often
READS = 3  # a listing short of the brokers' ends is read this many times before it is held
WAIT_MS = 100  # how long a broker holds a fetch that finds nothing new (librdkafka: 500)


class KafkaLister:
    """The `Lister` (listers.py) for one Kafka topic.

    Invariant: `next_offsets[p]` is the offset after the newest record of partition `p` that
    a listing or the feed read (a listing's end: the offset its end-of-partition event gave)
    in the topic's current life (`lives.current`) - only ever grows within it, and starts
    empty again when the topic is made again; the feed starts there after an outage. Written
    by the listing and the feed threads, each partition's value under `_lock`."""

    resumes = True  # the feed starts again after an outage, from `next_offsets`

    def __init__(self, config: dict) -> None:
        self.config = config
        self.topic = config["KAFKA_TOPIC"]
        self.where = f"kafka topic {self.topic!r}"
        self.skipped = SkippedNames(self.where)
        self.shape = LogShape(config.get("KAFKA_NAME") or None, self.skipped.check)
        self.backlog = Backlog()
        self.lives = Lives(self.where)
        self.next_offsets: dict[int, int] = {}
        self._lock = threading.Lock()
        self._admin = None

    def _identity(self) -> LogIdentity | None:
        """The topic's id now (None where the brokers give none); raises SourceUnreachable -
        also for a topic that is gone: an outage until it is there again, never "all gone"."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(admin_settings(self.config))
        try:
            token = topic_identity(self._admin, self.topic)
        except LookupError as exc:
            raise SourceUnreachable(f"{self.where}: {exc} now") from None
        return None if token is None else LogIdentity(token)

    def _read_to(self) -> str:
        """The newest position read in each partition (what `Lives` says of an old life)."""
        with self._lock:
            reached = sorted(self.next_offsets.items())
        return ", ".join(position_of(p, o - 1) for p, o in reached if o > 0)

    def _advance(self, reached: dict[int, int]) -> None:
        with self._lock:
            for partition, offset in reached.items():
                if offset > self.next_offsets.get(partition, 0):
                    self.next_offsets[partition] = offset

    def _consumer(self, **more: Any):
        """A consumer, and the list its error callback appends librdkafka's errors to."""
        from confluent_kafka import Consumer

        errors: list = []
        consumer = Consumer(settings(self.config, **{
            "fetch.wait.max.ms": WAIT_MS, "auto.offset.reset": "earliest",
            "error_cb": errors.append, **more}))  # fmt: skip
        return consumer, errors

    def _partitions(self, consumer) -> list[int]:
        try:
            return partitions(consumer, self.topic)
        except (LookupError, SourceUnreachable) as exc:  # a topic deleted while served is an
            raise SourceUnreachable(f"{self.where}: {exc}") from None  # outage, never "all gone"

    def _broken(self, errors: list) -> str | None:
        """Why the consumer has lost its brokers (librdkafka retries anything less), or None."""
        from confluent_kafka import KafkaError

        for error in errors:
            if error.fatal() or error.code() in (KafkaError._ALL_BROKERS_DOWN,
                                                 KafkaError._AUTHENTICATION):  # fmt: skip
                return error.str()
        errors.clear()
        return None

    # -- the listing -----------------------------------------------------------------------

    def list_all(self) -> dict[str, str]:
        """Every item of the retained topic, folded as the records come (a million records are
        never all held: only the items they leave) - in the topic's current life, each
        partition read up to at least the end the brokers gave at its start."""
        identity = self._identity()
        if self.lives.seen(identity, self._read_to()):
            with self._lock:
                self.next_offsets = {}  # a new life: its offsets start over
        self.shape.tag = identity.tag if identity is not None else ""
        for _ in range(READS):
            consumer, errors = self._consumer(**{"enable.partition.eof": True})
            reached: dict[int, int] = {}
            ends: dict[int, int] = {}
            try:
                found = self.shape.items(self._retained(consumer, errors, reached, ends))
            finally:
                consumer.close()
            short = {p: (reached.get(p, 0), end) for p, end in ends.items()
                     if reached.get(p, 0) < end}  # fmt: skip
            if not short:
                break
        else:
            said = ", ".join(f"partition {p} to {got} of {end}" for p, (got, end) in short.items())
            raise ListedShort(f"{self.where}: read {said}, {READS} times: held, not served "
                              "short")  # fmt: skip
        with self._lock:
            back = {p: (o, self.next_offsets[p]) for p, o in reached.items()
                    if o < self.next_offsets.get(p, 0)}  # fmt: skip
        if back:
            said = ", ".join(f"partition {p} ends at {o}, below {n}" for p, (o, n) in back.items())
            raise PositionWentBack(
                f"{self.where}: {said} already read in this life of the topic (truncated?) - "
                "held, so that no new record is taken for one that ran (restart the ambassador "
                "to serve it as it is)"
            )
        self._advance(reached)
        self.shape.unnamed(self.where, found)
        return found

    def log_facts(self) -> dict | None:
        return self.lives.facts()

    def _retained(self, consumer, errors: list, reached: dict[int, int], ends: dict[int, int]):
        """Every retained record, (position, fields), each partition's in its order, until
        every partition's end-of-partition event; `reached[p]` is told the offset after the
        last one read of partition `p` (its end, where it has none), `ends[p]` the end the
        brokers gave before the read began (what it must reach). Raises SourceUnreachable."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

        ids = self._partitions(consumer)
        for p in ids:
            try:
                _, ends[p] = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=CONNECT_SECONDS
                )
            except KafkaException as exc:
                raise SourceUnreachable(f"{self.where}: {describe_error(exc)}") from None
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in ids])
        unfinished, heard = set(ids), time.monotonic()
        while unfinished:
            records = batch_of(consumer, 1.0)
            broken = self._broken(errors)
            if broken or time.monotonic() - heard > IDLE_SECONDS:
                raise SourceUnreachable(f"{self.where}: {broken or 'the brokers went quiet'}")
            if records:
                heard = time.monotonic()
            for msg in records:
                error, partition = msg.error(), msg.partition()
                if error is None:
                    offset = msg.offset()
                    reached[partition] = offset + 1
                    yield position_of(partition, offset), fields_of(msg)
                elif error.code() == KafkaError._PARTITION_EOF:
                    unfinished.discard(partition)
                    reached[partition] = max(reached.get(partition, 0), msg.offset())
                elif error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise SourceUnreachable(f"{self.where}: {error.str()}")

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        return describe(name, meta, self.topic)

    def ranks(self, config: dict) -> bool:
        return True  # a record may carry an integer `priority` field

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    # -- the change feed -------------------------------------------------------------------

    def changes(self, stop: threading.Event) -> Iterator[list[Change] | object]:
        """The records after the newest ones read, as the brokers deliver them."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        try:
            consumer, errors = self._consumer()
        except Exception as exc:
            raise SourceUnreachable(f"{self.where}: following: {describe_error(exc)}") from None
        try:
            ids = self._partitions(consumer)
            with self._lock:
                starts = {p: self.next_offsets.get(p, OFFSET_BEGINNING) for p in ids}
            consumer.assign([TopicPartition(self.topic, p, o) for p, o in starts.items()])
        except BaseException:
            consumer.close()
            raise
        return self._follow(consumer, errors, set(ids), stop)

    def _follow(self, consumer, errors: list, ids: set[int], stop: threading.Event):
        """The feed's batches; RESTART, without applying them, when the topic is a new one
        (made again: the listing reads it from its start, and a new feed follows it) - looked
        at every IDENTITY_LOOK_SECONDS, and at once when a record's offset goes back or the
        brokers say the topic is unknown."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

        looked = identified = time.monotonic()
        try:
            while not stop.is_set():
                taken = batch_of(consumer, 1.0)
                records = [m for m in taken if m.error() is None]
                broken = self._broken(errors)
                if broken:
                    raise SourceUnreachable(f"{self.where}: {broken}")
                lost = any(m.error() is not None and m.error().code() in (
                    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID)
                    for m in taken)  # fmt: skip
                with self._lock:
                    back = any(m.offset() < self.next_offsets.get(m.partition(), 0)
                               for m in records)  # fmt: skip
                if lost or back or time.monotonic() - identified > IDENTITY_LOOK_SECONDS:
                    identified = time.monotonic()
                    if self._started_over():
                        yield RESTART
                        return
                if time.monotonic() - looked > PARTITIONS_LOOK_SECONDS:
                    added = set(self._partitions(consumer)) - ids
                    if added:
                        consumer.incremental_assign([TopicPartition(self.topic, p,
                                                     OFFSET_BEGINNING) for p in added])  # fmt: skip
                        ids |= added
                    looked = time.monotonic()
                if not records:
                    continue
                reached: dict[int, int] = {}
                batch = []
                for msg in records:
                    partition, offset = msg.partition(), msg.offset()
                    reached[partition] = offset + 1
                    change = self.shape.change(position_of(partition, offset), fields_of(msg))
                    if change is not None:
                        batch.append(change)
                self.backlog.read([seconds_of(m) for m in records], self._beyond(consumer, reached))
                self._advance(reached)
                if batch:
                    yield batch
                self.backlog.served(len(records))
        finally:
            consumer.close()

    def _started_over(self) -> bool:
        """Whether the topic is not the one the listing read (its id changed); a topic that is
        gone raises SourceUnreachable (an outage: the feed ends)."""
        identity, current = self._identity(), self.lives.current
        return identity is not None and current is not None and identity.token != current.token

    def _beyond(self, consumer, reached: dict[int, int]) -> int:
        """Records the brokers hold after the newest read, by the ends the last fetches
        reported (librdkafka's cached high watermarks: no request)."""
        from confluent_kafka import TopicPartition

        beyond = 0
        with self._lock:
            offsets = {**self.next_offsets, **reached}
        for partition, offset in offsets.items():
            _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, partition),
                                                     cached=True)  # fmt: skip
            if high is not None and high > offset:
                beyond += high - offset
        return beyond


class KafkaType:
    """The Kafka source type of the registry (`registry.py`)."""

    kind = "kafka"
    extra = "kafka"
    secret_variables = "KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD"
    events = True  # the change feed: a consumer's fetches
    content_versions = True  # a new record is a new version
    data_groups = True  # a JSON value's fields may say its group
    settles = False

    def shown(self, config: dict) -> str:
        return f"kafka topic {config['KAFKA_TOPIC']!r}"

    def ranks(self, config: dict) -> bool:
        return True

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    def config_from_url(self, url: str, options: dict) -> dict:
        from .registry import neither_folder_nor_s3

        neither_folder_nor_s3("kafka", options)
        return config_from_url(url, options)

    def check(self, config: dict) -> None:
        check(config)

    def open(self, config: dict):
        from .listed import ListedSource

        return ListedSource.configured(KafkaLister(config), config, 2.0)

    def describe(self, config: dict, name: str, meta: str | None) -> dict | None:
        return describe(name, meta, config["KAFKA_TOPIC"]) if meta else None


SOURCE_TYPE = KafkaType()
