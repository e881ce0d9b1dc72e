"""Exactly once when a Kubernetes manager dies, on the API-server stand-in with the manager as a
real process killed with -9: while its Jobs run (they finish with no manager, and the next one
records them from the Jobs), in per-item and in batch mode, and at random moments over a run -
no item lost, none started twice; and between a Job and its ConfigMap, where the next manager
adopts the Job and writes its data. (A crash between a batch's claim and its Job is
`test_batches.test_a_crash_between_the_claim_and_the_job_makes_no_second_batch`.)"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter

import pytest

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.support.folders import make_items
from tests.support.servers import wait_until


def kill(proc) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


@pytest.mark.parametrize("mode", [[], ["--batch-size", "3"]], ids=["per-item", "batch"])
def test_jobs_that_end_while_no_manager_runs_are_recorded_never_run_again(
    tmp_path, ambassador_server, marker_worker, cluster, monkeypatch, mode
):
    monkeypatch.setenv("SLEEP", "0.6")  # the stand-in's pods run in this process's env
    names = [f"clip-{i}.mp4" for i in range(6)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "3", *mode)
    first = spawn_workqueue(*args)
    wait_until(lambda: len(marker_worker.started()) >= 2, timeout=60)
    kill(first)  # between a Job's start and its record
    started = set(marker_worker.started())
    wait_until(lambda: set(marker_worker.ended()) >= started, timeout=60)  # ended, unrecorded
    second = workqueue(*args, timeout=180)
    assert second.returncode == 0, second.stderr
    assert "6 items: " in second.stdout and "0 failed" in second.stdout, second.stdout
    assert Counter(marker_worker.started()) == Counter(names)  # each once
    assert Counter(marker_worker.ended()) == Counter(names)


@pytest.mark.parametrize("mode", [[], ["--batch-size", "2"]], ids=["per-item", "batch"])
def test_kills_at_random_moments_lose_nothing_and_start_nothing_twice(
    tmp_path, ambassador_server, marker_worker, cluster, monkeypatch, mode
):
    monkeypatch.setenv("SLEEP", "0.3")
    names = [f"clip-{i:02d}.mp4" for i in range(12)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "3",
                        "--poll-interval", "0.5", *mode)  # fmt: skip
    rng = random.Random(3)
    for _ in range(3):
        proc = spawn_workqueue(*args)
        before = len(marker_worker.started())
        # at a random moment after it began working: a claim, a Job, a record
        wait_until(
            lambda b=before, p=proc: len(marker_worker.started()) > b or p.poll() is not None,
            timeout=60,
        )
        time.sleep(rng.uniform(0, 0.8))  # the drive's random moment (not a wait for anything)
        kill(proc)
    last = workqueue(*args, timeout=180)
    assert last.returncode == 0, last.stderr
    assert Counter(marker_worker.started()) == Counter(names), Counter(marker_worker.started())
    assert set(marker_worker.ended()) == set(names)


@pytest.mark.timeout(300)  # its second run has 180 s (below): pytest's 120 s must not cut it short
def test_a_crash_between_the_job_and_its_config_map_is_adopted_and_runs_once(
    tmp_path, ambassador_server, marker_worker, cluster
):
    """The Job exists, its pod cannot mount its data: the next manager must neither count the
    item done (it never ran) nor start a second Job - it writes the ConfigMap and waits."""
    names = ["a.mp4", "b.mp4"]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "1")
    cluster.server.faults.add(
        "hang", verb="create", resource="configmaps", delay=120,
        when=lambda body: bool(body.get("metadata", {}).get("ownerReferences")),  # an item's
    )  # fmt: skip
    first = spawn_workqueue(*args)
    wait_until(lambda: len(cluster.objects("jobs")) == 1, timeout=60)
    kill(first)  # its ConfigMap's create never happened
    assert [c for c in cluster.objects("configmaps") if c["metadata"].get("ownerReferences")] == []
    second = workqueue(*args, timeout=180)
    assert second.returncode == 0, second.stderr
    assert "2 items: 2 succeeded" in second.stdout, second.stdout
    assert "already done" not in second.stdout, second.stdout
    assert Counter(marker_worker.started()) == Counter(names)  # each once
    assert len(cluster.objects("jobs")) == 2  # no second Job for the adopted item
