"""The log sources through the chart and the Kubernetes backend: the chart's ambassador
command line, as rendered for `source.type: redis` (a stream), `nats` and `kafka`, run for
real against the real server, and the Kubernetes manager on the API-server stand-in running one
Job per record's item - each once, and after a restart of both, only what is new."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
import requests

from tests.charts.rendering import containers, render
from tests.e2e.conftest import workqueue
from tests.support.logs import KafkaLog, NatsLog, RedisLog
from tests.support.servers import free_port, wait_until


def chart_values(log) -> dict:
    if isinstance(log, RedisLog):
        redis = {"url": log.server.url, "stream": log.key, "nameField": "file"}
        return {"source": {"type": "redis", "redis": redis}}
    if isinstance(log, KafkaLog):
        kafka = {"brokers": log.server.brokers, "topic": log.topic, "name": "key"}
        return {"source": {"type": "kafka", "kafka": kafka}}
    nats = {"url": log.server.url, "stream": log.stream, "subject": f"{log.prefix}.>",
            "name": "subject"}  # fmt: skip
    return {"source": {"type": "nats", "nats": nats}}


def start_charted_ambassador(values: dict, port: int) -> subprocess.Popen:
    """The chart's ambassador container for `values`, its arguments as rendered (on loopback
    here), once it answers ready."""
    args = containers(render(values))[0]["ambassador"]["args"]
    args = [a for a in args if not a.startswith(("--host=", "--port="))]
    process = subprocess.Popen([sys.executable, "-m", "kube_workqueue.manager.cli", *args,
                                "--host=127.0.0.1", f"--port={port}"])  # fmt: skip

    def ready() -> bool:
        assert process.poll() is None, f"the ambassador exited with {process.returncode}"
        try:
            return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).ok
        except requests.RequestException:  # refused, or slow under load: not yet
            return False

    wait_until(ready, timeout=60)
    return process


@pytest.fixture(params=["redis", "nats", "kafka"])
def log(request):
    if request.param == "redis":
        return RedisLog(request.getfixturevalue("redis_store"))
    if request.param == "kafka":
        return KafkaLog(request.getfixturevalue("kafka_store"))
    return NatsLog(request.getfixturevalue("nats_store"))


def test_the_charted_log_source_runs_each_record_once_on_the_cluster(log, cluster,
                                                                      marker_worker):  # fmt: skip
    for i in range(3):
        log.append(f"clip-{i}.mp4")
    port = free_port()
    source = f"http://127.0.0.1:{port}"
    args = cluster.args(source, marker_worker, "--once", "--parallelism", "2")
    ambassador = start_charted_ambassador(chart_values(log), port)
    try:
        first = workqueue(*args, timeout=180)
        assert first.returncode == 0, first.stderr
        assert "3 items: 3 succeeded" in first.stdout, first.stdout
    finally:
        ambassador.terminate()
        ambassador.wait(30)
    log.append("clip-3.mp4")  # appended while no ambassador runs
    log.tombstone("clip-0.mp4")  # gone from the source: nothing to run
    ambassador = start_charted_ambassador(chart_values(log), port)
    try:
        again = workqueue(*args, timeout=180)
        assert again.returncode == 0, again.stderr
    finally:
        ambassador.terminate()
        ambassador.wait(30)
    assert Counter(marker_worker.started()) == Counter(f"clip-{i}.mp4" for i in range(4))
