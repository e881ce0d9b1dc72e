"""A client of a Kafka source's brokers, made one way for the lister and the start-up check:
the URL's form (`config_from_url`), the client's settings with credentials from the
environment only (`settings`), and the one look at start (`check`), its failures said in one
line.

    kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?name=key|FIELD|header.NAME]

The client is confluent-kafka (librdkafka), the one most Kafka users run. It reads and never
writes: a consumer with a group id (librdkafka will not make one without), but partitions are
*assigned*, never subscribed - no group is joined, no offset is ever committed, nothing is
consumed for another reader. Credentials come from the environment alone (out of process
listings and Helm values - a URL is printed): KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD,
with KAFKA_SASL_MECHANISM (PLAIN by default; SCRAM-SHA-256, SCRAM-SHA-512) and
KAFKA_SECURITY_PROTOCOL (SASL_SSL when a user is given, else PLAINTEXT; SSL for TLS alone).
A URL with a user or password in it is refused.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import time
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .listers import SourceUnreachable, intervals
from .log_records import TOMBSTONE_FIELD, name_field, payload_fields, removals

CONNECT_SECONDS = 5.0
PAGE = 1000  # records taken at once at most: the change feed's batch
GROUP_ID = "workqueue-ambassador"  # (never joined, never committed: see the module docstring)
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")  # Kafka's own rule for a topic's name
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
FORM = "kafka://HOST:PORT[,HOST:PORT]/TOPIC[?name=key|FIELD|header.NAME]"

log = logging.getLogger(__name__)


def describe_error(exc: BaseException) -> str:
    """A librdkafka error as one line: its own text (`Broker: Unknown topic or partition`)."""
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    text = error.str() if isinstance(error, KafkaError) else str(exc)
    return text.strip() or type(exc).__name__


def settings(config: dict, **more: Any) -> dict[str, Any]:
    """librdkafka's settings for a consumer of the source's brokers: never committing,
    credentials from the environment (the module docstring), librdkafka's own log lines
    (every failed connection, on stderr) sent to this module's logger at debug - what went
    wrong is said by the source, once, in its own words."""
    found: dict[str, Any] = {
        "bootstrap.servers": config["KAFKA_BROKERS"],
        "group.id": GROUP_ID,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "socket.connection.setup.timeout.ms": int(CONNECT_SECONDS * 1000),
        "logger": _QuietLog(),
    }
    user = os.environ.get("KAFKA_SASL_USERNAME")
    protocol = os.environ.get("KAFKA_SECURITY_PROTOCOL") or ("SASL_SSL" if user else "PLAINTEXT")
    found["security.protocol"] = protocol
    if user:
        found["sasl.username"] = user
        found["sasl.password"] = os.environ.get("KAFKA_SASL_PASSWORD", "")
        found["sasl.mechanism"] = os.environ.get("KAFKA_SASL_MECHANISM") or "PLAIN"
    found.update(more)
    return found


class _QuietLog:
    """librdkafka's `logger`: its lines at debug (see `settings`)."""

    def log(self, level: int, message: str, *args: Any) -> None:
        log.debug(message, *args)


def topic_identity(admin, topic: str) -> str | None:
    """The topic's id (KIP-516: a UUID the brokers give each topic when it is made, another for
    a topic made again under the same name), from an AdminClient; None where the brokers give
    none (before Kafka 2.8: an all-zero id). Raises SourceUnreachable (the brokers do not
    answer) or LookupError (no such topic)."""
    from confluent_kafka import KafkaError, KafkaException, TopicCollection

    try:
        found = admin.describe_topics(TopicCollection([topic]),
                                      request_timeout=CONNECT_SECONDS)[topic].result()  # fmt: skip
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in (
            KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID,
        ):  # fmt: skip
            raise LookupError("no such topic") from None
        raise SourceUnreachable(f"cannot reach the brokers: {describe_error(exc)}") from None
    token = str(found.topic_id) if found.topic_id is not None else ""
    return None if not token.strip("A=") else token


def admin_settings(config: dict) -> dict[str, Any]:
    """`settings` for an AdminClient: the brokers, credentials and logger, no consumer's."""
    found = settings(config)
    for key in ("group.id", "enable.auto.commit", "enable.auto.offset.store"):
        found.pop(key, None)
    return found


def partitions(consumer, topic: str) -> list[int]:
    """The topic's partition ids, from the brokers' metadata; raises SourceUnreachable (the
    brokers do not answer) or LookupError (no such topic, or one without partitions)."""
    from confluent_kafka import KafkaException

    try:
        metadata = consumer.list_topics(topic, timeout=CONNECT_SECONDS)
    except KafkaException as exc:
        raise SourceUnreachable(f"cannot reach the brokers: {describe_error(exc)}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise LookupError("no such topic" + (f" ({found.error.str()})" if found else ""))
    if not found.partitions:
        raise LookupError("the topic has no partitions")
    return sorted(found.partitions)


def check(config: dict) -> None:
    """The brokers answer and the topic is there with at least one partition: each a one-line
    SourceConfigError."""
    from confluent_kafka import Consumer, KafkaException

    from .registry import SourceConfigError

    where = f"kafka topic {config['KAFKA_TOPIC']!r}"
    try:
        consumer = Consumer(settings(config))
    except KafkaException as exc:  # a setting librdkafka refuses (a mechanism, a protocol)
        raise SourceConfigError(f"{where}: {describe_error(exc)}") from None
    try:
        partitions(consumer, config["KAFKA_TOPIC"])
    except SourceUnreachable as exc:
        raise SourceConfigError(f"{where}: {exc} ({config['KAFKA_BROKERS']})") from None
    except LookupError as exc:
        raise SourceConfigError(f"{where}: {exc}") from None
    finally:
        consumer.close()


def config_from_url(url: str, options: dict) -> dict:
    """The app configuration of a `kafka://` URL (the module docstring's form)."""
    from .registry import SourceConfigError

    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise SourceConfigError(
            "a Kafka source's URL takes no user or password: give them in KAFKA_SASL_USERNAME "
            "and KAFKA_SASL_PASSWORD"
        )
    query = parse_qs(parts.query, keep_blank_values=True)
    topic = unquote(parts.path.strip("/"))
    brokers = [b for b in parts.netloc.split(",") if b]
    unknown = sorted(set(query) - {"name"})
    if unknown or not brokers or not topic:
        raise SourceConfigError(f"a Kafka source is {FORM}, not {url!r}")
    for broker in brokers:
        host, _, port = broker.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SourceConfigError(f"{broker!r} is not HOST:PORT in {url!r}")
    if not TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise SourceConfigError(
            f"{topic!r} cannot be a Kafka topic's name (letters, digits, '.', '_', '-')"
        )
    try:
        keyed_by = name_field(query)
    except ValueError as exc:
        raise SourceConfigError(f"{exc}: {url!r}") from None
    protocol = os.environ.get("KAFKA_SECURITY_PROTOCOL")
    if protocol and protocol not in PROTOCOLS:
        raise SourceConfigError(f"KAFKA_SECURITY_PROTOCOL is one of {', '.join(PROTOCOLS)}")
    mechanism = os.environ.get("KAFKA_SASL_MECHANISM")
    if mechanism and mechanism not in MECHANISMS:
        raise SourceConfigError(f"KAFKA_SASL_MECHANISM is one of {', '.join(MECHANISMS)}")
    return {
        "KAFKA_BROKERS": ",".join(brokers),
        "KAFKA_TOPIC": topic,
        "KAFKA_NAME": keyed_by,
        "REMOVALS": removals(keyed_by),
        "SUFFIXES": [],  # (a record is an item whatever its name ends with)
        **intervals(options, 2.0),
    }


# -- a record, as the log core takes it (`kafka_topic.py`) ----------------------------------


def text_field(fields: dict[str, str], key: str, value: bytes | None) -> None:
    """`fields[key]` = `value` as UTF-8 text, or `fields[key + ".base64"]` when it is not."""
    if value is None:
        return
    try:
        fields[key] = value.decode("utf-8")
    except UnicodeDecodeError:
        fields[f"{key}.base64"] = base64.b64encode(value).decode("ascii")


def fields_of(msg) -> dict[str, str]:
    """A record's fields (`kafka_topic`'s module docstring); a null value adds the tombstone
    field."""
    value = msg.value()
    fields = payload_fields(value) if value is not None else {}
    headers = msg.headers()
    if headers:
        for name, header in headers:
            text_field(fields, f"header.{name}", header if header is not None else b"")
    key = msg.key()
    if key is not None:  # (`text_field`, inlined: a million records' hot path)
        try:
            fields["key"] = key.decode("utf-8")
        except UnicodeDecodeError:
            fields["key.base64"] = base64.b64encode(key).decode("ascii")
    if value is None:
        fields[TOMBSTONE_FIELD] = "true"
    return fields


def batch_of(consumer, wait: float) -> list:
    """What the consumer has, up to PAGE events: waits up to `wait` seconds for the first one
    only (`consume(n, timeout)` waits for all n, or the whole timeout: a trickle of records
    would each wait it out), then takes what is already there."""
    first = consumer.poll(wait)
    if first is None:
        return []
    return [first, *consumer.consume(PAGE - 1, 0)]


def position_of(partition: int, offset: int) -> str:
    """A record's position, and in the every-record shape its item's name."""
    return f"{partition:04d}-{offset:012d}"


def seconds_of(msg) -> float:
    kind, stamp = msg.timestamp()
    return stamp / 1000.0 if kind and stamp > 0 else time.time()
