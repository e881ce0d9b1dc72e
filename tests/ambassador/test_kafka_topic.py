"""What only the Kafka source does, beyond the log contract every log passes
(test_log_sources.py): several partitions, a record's key, headers and null value as fields and
tombstones, a URL's form and the one-line refusals at start, and a read that commits nothing -
on a real broker speaking Kafka's protocol (Tansu) through the real client."""

from __future__ import annotations

import pytest

from kube_workqueue.ambassador.sources.kafka_client import GROUP_ID, settings
from kube_workqueue.ambassador.sources.registry import SourceConfigError, resolve
from tests.ambassador.test_redis_source import opened
from tests.e2e.conftest import workqueue
from tests.support.logs import KafkaLog
from tests.support.servers import free_port, wait_until
from tests.support.stores import unique


@pytest.fixture
def topic(kafka_store) -> str:
    name = unique("t")
    kafka_store.create_topic(name, 3)
    return name


def test_every_partition_is_read_and_every_record_named_by_its_partition_and_offset(
    kafka_store, topic
):
    positions = kafka_store.produce(topic, [(f"k{i}", {"n": str(i)}, None) for i in range(12)])
    assert len({p.split("-")[0] for p in positions}) > 1  # the keys spread over partitions
    name = KafkaLog.of(kafka_store, topic).name  # a position, within the topic's id
    source = opened(f"{kafka_store.url}/{topic}")
    try:
        assert source.page(None, None)[0] == sorted(map(name, positions))  # each partition in
        first = source.get(name(positions[0]))  # its log order
        assert (first["n"], first["key"], first["log"]) == ("0", "k0", topic)
        later = name(kafka_store.produce(topic, [(None, "plain text", None)])[0])
        wait_until(lambda: later in source.page(None, None)[0])
        assert source.get(later)["body"] == "plain text"  # not JSON: the value as `body`
    finally:
        source.stop()


def test_keys_headers_and_null_values_make_the_keyed_items(kafka_store, topic):
    kafka_store.produce(topic, [
        ("a.mp4", {"width": 320, "key": "from-the-value"}, [("origin", b"cam-1")]),
        ("b.mp4", {"width": 640}, None),
        ("a.mp4", {"width": 1280}, [("origin", b"\xff\xfe")]),
        (b"\xff.mp4", {"width": 1}, None),  # a key that is not UTF-8 names nothing
        ("b.mp4", None, None),  # a null value: the key's tombstone
    ])  # fmt: skip
    source = opened(f"{kafka_store.url}/{topic}?name=key")
    try:
        assert source.page(None, None)[0] == ["a.mp4"]
        a = source.get("a.mp4")
        assert (a["width"], a["key"]) == ("1280", "a.mp4")  # the record's own key wins
        assert a["header.origin.base64"] == "//4="  # a header that is not text, kept whole
        kafka_store.produce(topic, [("c.mp4", {"width": 7}, None)])
        wait_until(lambda: source.page(None, None)[0] == ["a.mp4", "c.mp4"])
    finally:
        source.stop()
    by_header = opened(f"{kafka_store.url}/{topic}?name=header.origin")
    try:
        assert by_header.page(None, None)[0] == ["cam-1"]  # only the first a.mp4 had it as text
    finally:
        by_header.stop()


def test_reading_joins_no_group_and_commits_nothing(kafka_store, topic):
    from confluent_kafka import Consumer, TopicPartition

    kafka_store.produce(topic, [(f"k{i}", {}, None) for i in range(6)])
    source = opened(f"{kafka_store.url}/{topic}?name=key")
    try:
        assert len(source.page(None, None)[0]) == 6
    finally:
        source.stop()
    config = resolve(f"{kafka_store.url}/{topic}").config
    consumer = Consumer(settings(config))
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    finally:
        consumer.close()
    assert [c.offset for c in committed] == [-1001] * 3  # OFFSET_INVALID: none, for our group
    assert GROUP_ID == "workqueue-ambassador"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("kafka://user:secret@127.0.0.1:9092/t", "takes no user or password"),
        ("kafka://127.0.0.1:9092/bad topic", "cannot be a Kafka topic's name"),
        ("kafka://127.0.0.1:notaport/t", "is not HOST:PORT"),
        ("kafka://127.0.0.1:9092/", "a Kafka source is kafka://"),
        ("kafka://127.0.0.1:9092/t?group=mine", "a Kafka source is kafka://"),
        ("kafka://127.0.0.1:9092/t?name=", "name= is empty"),
        ("kafka://127.0.0.1:9092/t?name=header.", r"name=header\. names no field"),
        ("kafka://127.0.0.1:9092/t?name=key&name=file", "name= is given 2 times"),
    ],
)
def test_a_malformed_url_is_one_line(url, said):
    with pytest.raises(SourceConfigError, match=said) as caught:
        resolve(url)
    assert "secret" not in str(caught.value)


def test_what_only_s3_takes_is_refused_for_every_log():
    """`--endpoint-url` (or `--sqs-queue-url`) with a log source was taken without a word."""
    for url in ("kafka://127.0.0.1:9092/t", "nats://127.0.0.1:4222/S",
                "redis://127.0.0.1:6379/0?stream=s"):  # fmt: skip
        with pytest.raises(SourceConfigError, match="--endpoint-url applies to S3 sources only"):
            resolve(url, {"S3_ENDPOINT_URL": "http://minio:9000"})


def test_a_name_no_record_has_is_said_not_listed_as_nothing(kafka_store, topic, caplog):
    """`?name=nosuchfield`: every record read, none named - said once, with the fields the
    first record has, rather than "0 items" without a word."""
    import logging

    kafka_store.produce(topic, [("a", {"file": "a.mp4", "width": "1"}, None)])
    with caplog.at_level(logging.WARNING):
        source = opened(f"{kafka_store.url}/{topic}?name=nosuchfield")
        try:
            assert source.page(None, None)[0] == []
            source._relist()
        finally:
            source.stop()
    said = [r.getMessage() for r in caplog.records if "to name an item by" in r.getMessage()]
    assert said == [f"kafka topic {topic!r}: 1 record(s) have no 'nosuchfield' to name an item "
                    "by, so none is an item (the first has: file, key, width) - check name= in "
                    "the source's URL"]  # fmt: skip


def test_a_missing_topic_or_unreachable_brokers_are_one_line_at_start(kafka_store):
    missing = workqueue("ambassador", "--source", f"{kafka_store.url}/no-such-topic",
                        "--port", str(free_port()), timeout=60)  # fmt: skip
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "workqueue ambassador: error: kafka topic 'no-such-topic': no such topic "
        "(Broker: Unknown topic or partition)"
    ]
    gone = workqueue("ambassador", "--source", f"kafka://127.0.0.1:{free_port()}/t",
                     "--port", str(free_port()), timeout=60)  # fmt: skip
    assert gone.returncode == 2
    (line,) = gone.stderr.strip().splitlines()
    assert line.startswith("workqueue ambassador: error: kafka topic 't': cannot reach the brokers")


def test_credentials_come_from_the_environment_only(monkeypatch):
    config = resolve("kafka://k-0:9092,k-1:9092/renders").config
    for key in ("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SASL_MECHANISM",
                "KAFKA_SECURITY_PROTOCOL"):  # fmt: skip
        monkeypatch.delenv(key, raising=False)
    plain = settings(config)
    assert plain["bootstrap.servers"] == "k-0:9092,k-1:9092"
    assert plain["security.protocol"] == "PLAINTEXT" and "sasl.username" not in plain
    assert plain["enable.auto.commit"] is False
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "renders")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "s3cret")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    sasl = settings(config)
    assert (sasl["security.protocol"], sasl["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (sasl["sasl.username"], sasl["sasl.password"]) == ("renders", "s3cret")
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "TLS")
    with pytest.raises(SourceConfigError, match="KAFKA_SECURITY_PROTOCOL is one of"):
        resolve("kafka://k-0:9092/renders")
