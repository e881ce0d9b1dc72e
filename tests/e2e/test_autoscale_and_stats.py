"""A real manager with --autoscale and --metrics-port: it scales itself up under a backlog,
exports the autoscaler's gauges and the queue's metrics, and the stability calculator reads
its /stats."""

from __future__ import annotations

import json
import os
import signal

import requests

from tests.support.folders import make_items
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)

from ..conftest import free_port, wait_until
from .conftest import spawn_workqueue, workqueue


def test_autoscaler_scales_up_under_a_backlog_and_reports(
    tmp_path, ambassador_server, marker_worker
):
    make_items(tmp_path / "videos", [f"clip-{i:02d}.mp4" for i in range(24)])
    server = ambassador_server(tmp_path / "videos")
    port = free_port()
    proc = spawn_workqueue(
        "manager",
        "--source",
        server.url,
        "--worker-cmd",
        marker_worker.path,
        "--state-dir",
        tmp_path / "state",
        "--poll-interval",
        "1",
        "--parallelism",
        "1",
        "--autoscale",
        "--min-parallelism",
        "1",
        "--max-parallelism",
        "4",
        "--scale-interval",
        "500ms",
        "--metrics-port",
        str(port),
        env=dict(os.environ, SLEEP="0.4"),
    )
    base = f"http://127.0.0.1:{port}"

    def metric(name):
        try:
            text = requests.get(base + "/metrics", timeout=2).text
        except requests.RequestException:
            return None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.split()[-1])
        return None

    try:
        wait_until(lambda: metric("workqueue_parallelism") == 4, timeout=30)
        assert metric("workqueue_utilization_ratio") is None  # a burst: no rate, no ratio
        assert metric("workqueue_build_info") == 1
        assert metric("workqueue_service_seconds") > 0.3
        wait_until(lambda: len(set(marker_worker.ended())) == 24, timeout=60)
        assert metric("workqueue_adds_total") is not None
        assert metric("workqueue_oldest_waiting_seconds") is None  # nothing waits: no figure
        assert metric("workqueue_item_duration_seconds_count") == 24
        stats = requests.get(base + "/stats", timeout=2).json()
        assert len(stats["arrival_times"]) == 24 and len(stats["service_seconds"]) == 24
        r = workqueue("stability", "--from-url", base, "--json")
        body = json.loads(r.stdout)
        assert body["parallelism"] == 4 and body["measured"]["arrivals"] == 24
        assert body["service_seconds"] > 0.3
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert "autoscale: utilization" in err and "-> P=4" in err
