"""Priorities on the Kubernetes backend (the API-server stand-in), `--parallelism 1`: the
paused queue's `status` positions (from the cluster and the source, another process) follow
the `--priority` rules the manager left in its facts, and the Jobs' workers then start in
exactly that order."""

from __future__ import annotations

import signal

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.e2e.test_priorities import line
from tests.support.servers import wait_until


def test_rules_order_the_kubernetes_line_and_jobs_start_in_status_order(
    tmp_path, ambassador_server, marker_worker, cluster
):
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in ("a.mp4", "b.mp4", "urgent-c.mp4", "d-low.mp4"):
        (videos / name).write_bytes(b"x")
    server = ambassador_server(videos)
    assert workqueue("pause", *cluster.queue_args()).returncode == 0
    args = cluster.args(
        server.url, marker_worker, "--parallelism", "1", "--poll-interval", "0.2",
        "--priority", "urgent-*=3", "--priority", "*-low*=-1",
    )  # fmt: skip
    manager = spawn_workqueue(*args)
    try:
        expected = [("urgent-c.mp4", 3), ("a.mp4", 0), ("b.mp4", 0), ("d-low.mp4", -1)]
        # the pending items are the source's (`--source`); their priorities the manager's rules
        status = (*cluster.queue_args(), "--source", server.url)
        try:
            wait_until(lambda: line(*status) == expected, timeout=60)
        except AssertionError:
            import sys

            print(workqueue("status", *status, "--json").stdout, file=sys.stderr)
            print(manager.poll(), file=sys.stderr)
            raise
        assert workqueue("resume", *cluster.queue_args()).returncode == 0

        wait_until(lambda: len(marker_worker.ended()) == 4, timeout=120)
        assert marker_worker.started() == [name for name, _ in expected]
    finally:
        manager.send_signal(signal.SIGTERM)
        manager.wait(timeout=60)
