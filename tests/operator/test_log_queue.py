"""A WorkQueue over a Kafka topic, through the operator: `spec.source.url: kafka://…` gets the
queue its own ambassador (a Deployment the stand-in runs as a real process) reading the real
broker, and each record's item runs once - those there at the start, and one produced later;
and the same over a Cloud Storage bucket and an Azure container, on their emulators."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from tests.support.logs import KafkaLog
from tests.support.servers import wait_until

from .conftest import NS, marks
from .test_isolation import items_queue


def test_a_kafka_workqueue_runs_each_record_once(operated, tmp_path, kafka_store):
    log = KafkaLog(kafka_store)
    for i in range(3):
        log.append(f"clip-{i}.mp4", n=str(i))
    log.append("clip-0.mp4", n="again")  # the same key again: one item, its newest record
    operated.start_operator()
    queue = items_queue("renders", log.url(keyed=True), operated, tmp_path)
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-",
                     stdin=yaml.safe_dump(queue))  # fmt: skip
    ran = lambda: marks(tmp_path / "renders.marks")  # noqa: E731
    wait_until(lambda: len(ran()) >= 3, timeout=120)
    wait_until(lambda: operated.condition("renders", "Ready").get("status") == "True", timeout=60)
    uid = operated.queue("renders")["metadata"]["uid"]
    assert ("deployments", "renders-ambassador") in set(operated.owned_by(uid))
    log.append("clip-3.mp4")
    wait_until(lambda: len(ran()) >= 4, timeout=120)
    items = [json.loads(mark) for mark in ran()]  # (each mark: the item's data as it ran)
    assert Counter(i["name"] for i in items) == Counter(f"clip-{i}.mp4" for i in range(4))
    assert {i["name"]: i.get("n") for i in items}["clip-0.mp4"] == "again"


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_a_cloud_bucket_workqueue_runs_each_object_once(operated, tmp_path, kind, request,
                                                        monkeypatch):  # fmt: skip
    """`spec.source.url: gs://…` or `azblob://…`: the queue's own ambassador lists the bucket on
    its emulator (the client pointed there by its standard setting, as on a real cluster by a
    Secret), and each object runs once - those there at the start, and one uploaded later."""
    store = request.getfixturevalue("gcs_emulator" if kind == "gcs" else "azurite")
    for key, value in store.env.items():
        monkeypatch.setenv(key, value)
    bucket = store.bucket("in/a.mp4", "in/b c.mp4", "in/notes.txt")
    operated.start_operator()
    queue = items_queue("objects", store.url(bucket, "in/"), operated, tmp_path)
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-",
                     stdin=yaml.safe_dump(queue))  # fmt: skip
    ran = lambda: marks(tmp_path / "objects.marks")  # noqa: E731
    wait_until(lambda: len(ran()) >= 2, timeout=120)
    store.put(bucket, "in/late.mp4", b"x")
    wait_until(lambda: len(ran()) >= 3, timeout=120)
    items = [json.loads(mark) for mark in ran()]
    assert Counter(i["name"] for i in items) == Counter(["a.mp4", "b c.mp4", "late.mp4"])
    assert {i["url"] for i in items} >= {store.url(bucket, "in/b c.mp4")}
