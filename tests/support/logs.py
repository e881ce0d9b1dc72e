"""The log sources' servers behind one face, for the contract suite every log source passes
(tests/ambassador/test_log_sources.py): append a record for a key, a tombstone, trim, make the
log again (`remake`), and the source's URL in either shape; `name(position)` and
`version(position)` are what the source calls a record at a position in the log's life now
(its identity's tag, where the server gives one). `trims` says whether the server can trim a
log at all."""

from __future__ import annotations

from kube_workqueue.ambassador.sources.log_lives import LogIdentity

from .stores import KafkaServer, NatsServer, RedisServer, unique


class Named:
    """`name` and `version` of a position, from `tag()` (the log's identity's, "" for none)."""

    def tag(self) -> str:
        return ""

    def name(self, position: str) -> str:
        tag = self.tag()
        return f"{tag}-{position}" if tag else position

    def version(self, position: str) -> str:
        return f"o-{self.name(position)}"


class RedisLog(Named):
    """A Redis stream: a record is `XADD key * file NAME ...`, a tombstone `deleted true`;
    made again: DEL, and its next record makes it (Redis gives no identity: ids go on)."""

    kind = "redis"
    trims = True

    def __init__(self, server: RedisServer) -> None:
        self.server, self.key = server, unique("stream")
        self.client = server.client()

    def url(self, keyed: bool) -> str:
        return f"{self.server.url}?stream={self.key}" + ("&name=file" if keyed else "")

    def append(self, key: str, **fields: str) -> str:
        """A record for `key`; its position."""
        return self.client.xadd(self.key, {"file": key, **fields})

    def append_many(self, keys: list[str]) -> None:
        """A record for each of `keys`, in order, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.xadd(self.key, {"file": key})
        pipe.execute()

    def tombstone(self, name: str) -> str:
        return self.client.xadd(self.key, {"file": name, "deleted": "true"})

    def trim(self, keep: int) -> None:
        self.client.xtrim(self.key, maxlen=keep, approximate=False)

    def remake(self) -> None:
        self.client.delete(self.key)


class NatsLog(Named):
    """A JetStream stream on subjects `<prefix>.>`: a record is a JSON message on
    `<prefix>.NAME`, a tombstone a key-value delete marker (`KV-Operation: DEL`); made again:
    deleted and added (its sequences start over at 1, under a new created time)."""

    kind = "nats"
    trims = True

    def __init__(self, server: NatsServer) -> None:
        self.server = server
        self.stream = unique("S").replace("-", "_").upper()
        self.prefix = self.stream.lower()
        server.add_stream(self.stream, [f"{self.prefix}.>"])

    def url(self, keyed: bool) -> str:
        if keyed:
            return f"{self.server.url}/{self.stream}?subject={self.prefix}.>&name=subject"
        return f"{self.server.url}/{self.stream}"

    def append(self, key: str, **fields: str) -> str:
        sequence = self.server.publish(f"{self.prefix}.{key}", dict(fields))
        return f"{sequence:012d}"

    def append_many(self, keys: list[str]) -> None:
        """A record for each of `keys`, in order, on one connection."""
        self.server.publish_many([(f"{self.prefix}.{key}", {}, None) for key in keys])

    def tombstone(self, name: str) -> str:
        sequence = self.server.publish(f"{self.prefix}.{name}", b"", {"KV-Operation": "DEL"})
        return f"{sequence:012d}"

    def trim(self, keep: int) -> None:
        self.server.run(lambda js: js.purge_stream(self.stream, keep=keep))

    def tag(self) -> str:
        from kube_workqueue.ambassador.sources.nats_stream import identity_of

        return identity_of(self.server.run(lambda js: js.stream_info(self.stream))).tag

    def remake(self) -> None:
        self.server.run(lambda js: js.delete_stream(self.stream))
        self.server.add_stream(self.stream, [f"{self.prefix}.>"])


class KafkaLog(Named):
    """A Kafka topic of one partition (so that positions are in append order, as the other
    logs' are): a record is keyed by NAME with a JSON value of the fields, a tombstone a
    null value; made again: its broker's log lost and the topic created (its offsets start
    over, under a new id: `remake`). Tansu refuses DeleteRecords (it closes the connection)
    and has no retention to wait for: it cannot trim."""

    kind = "kafka"
    trims = False

    def __init__(self, server: KafkaServer, partitions: int = 1) -> None:
        self.server = server
        self.topic = unique("t")
        server.create_topic(self.topic, partitions)

    @classmethod
    def of(cls, server: KafkaServer, topic: str) -> KafkaLog:
        """The face of a topic made already."""
        found = cls.__new__(cls)
        found.server, found.topic = server, topic
        return found

    def url(self, keyed: bool) -> str:
        return f"{self.server.url}/{self.topic}" + ("?name=key" if keyed else "")

    def append(self, key: str, **fields: str) -> str:
        return self.server.produce(self.topic, [(key, dict(fields), None)])[0]

    def append_many(self, keys: list[str]) -> None:
        self.server.produce(self.topic, [(key, {}, None) for key in keys])

    def tombstone(self, name: str) -> str:
        return self.server.produce(self.topic, [(name, None, None)])[0]

    def trim(self, keep: int) -> None:
        raise NotImplementedError("the broker under test cannot trim a topic (see trims)")

    def tag(self) -> str:
        from confluent_kafka.admin import AdminClient

        from kube_workqueue.ambassador.sources.kafka_client import topic_identity

        admin = AdminClient({"bootstrap.servers": self.server.brokers})
        return LogIdentity(topic_identity(admin, self.topic)).tag

    def remake(self) -> None:
        """The broker loses its log (restarted without its storage: Tansu's memory), and the
        topic is made again - not a DeleteTopics under a live consumer, which Tansu answers in
        a way that crashes librdkafka 2.16 (a metadata reply with no topic name: a NULL
        strcmp in its metadata cache). Only for a broker of the test's own."""
        self.server.stop()
        self.server.start()
        self.server._producer = None  # (its connection and metadata were the old broker's)
        self.server.create_topic(self.topic)


def on_a_server_of_its_own(kind: str, *, redis_keeps_in=None, kafka_keeps_in=None):
    """A log of `kind` ("redis", "nats", "kafka") on a server started for it alone, for a
    fixture: yields the log, then stops the server. Where its records go across a restart: a
    Redis server keeps them in the folder `redis_keeps_in`, Tansu in the object store
    `kafka_keeps_in` (its memory storage otherwise), a NATS server always keeps them; lost
    otherwise."""
    if kind == "redis":
        server = RedisServer(persist_in=str(redis_keeps_in) if redis_keeps_in else None)
        yield RedisLog(server)
        server.stop()
    elif kind == "kafka":
        server = KafkaServer(keep_in=kafka_keeps_in)
        yield KafkaLog(server)
        server.close()
    else:
        server = NatsServer()
        yield NatsLog(server)
        server.close()
