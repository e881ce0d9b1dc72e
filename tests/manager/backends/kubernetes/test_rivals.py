"""Two managers on one queue, as real processes against the API-server stand-in: without
leader election each Job is still created once (the deterministic name: a rival's create is
answered 409 and counted as a conflict), and with it the standby takes over within a lease
duration when the leader dies. Either way each item runs exactly once."""

from __future__ import annotations

import os
from collections import Counter

from tests.e2e.conftest import spawn_workqueue
from tests.support.folders import make_items

NS = "media"


def created_jobs(cluster) -> Counter:
    """How many times the API server answered 201 to a Job create, by nothing but count."""
    return Counter(
        code
        for verb, resource, code, _ in cluster.server.answers
        if verb == "create" and resource == "jobs"
    )


def test_two_managers_without_leader_election_create_each_job_once(
    tmp_path, ambassador_server, marker_worker, cluster
):
    names = [f"clip-{i:02d}.mp4" for i in range(12)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    env = dict(os.environ, SLEEP="0.2")
    procs = [
        spawn_workqueue(
            *cluster.args(server.url, marker_worker, "--once", "--parallelism", "4"), env=env
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    answers = created_jobs(cluster)
    assert answers[201] == len(names)  # each Job created exactly once
    conflicts = sum(err.count("already dispatched (409 AlreadyExists)") for _, err in outputs)
    assert answers[409] == conflicts  # every losing create was counted as a conflict
    assert Counter(marker_worker.started()) == Counter(names)  # and each item ran once


def test_leader_election_hands_over_when_the_leader_dies(
    tmp_path, ambassador_server, marker_worker, cluster
):
    import signal

    from tests.support.servers import wait_until

    names = [f"clip-{i:02d}.mp4" for i in range(10)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    fast = [
        "--leader-elect",
        "--lease-duration",
        "2",
        "--renew-deadline",
        "1.5",
        "--retry-period",
        "0.2",
        "--poll-interval",
        "0.5",
        "--parallelism",
        "1",
    ]
    env = dict(os.environ, SLEEP="0.3")
    first = spawn_workqueue(*cluster.args(server.url, marker_worker, *fast), env=env)
    wait_until(lambda: len(marker_worker.started()) >= 2, timeout=30)
    second = spawn_workqueue(*cluster.args(server.url, marker_worker, *fast), env=env)

    def lease():
        return cluster.server.store.get("leases", NS, "thumbs-leader")["spec"]

    def lease_reads():
        return sum(
            1
            for verb, resource, *_ in cluster.server.answers
            if verb == "get" and resource == "leases"
        )

    reads = lease_reads()
    wait_until(lambda: lease_reads() >= reads + 20)  # both candidates campaigning
    old = lease()
    first.kill()
    first.communicate()
    try:
        wait_until(lambda: lease()["holderIdentity"] != old["holderIdentity"], timeout=30)
        from kube_workqueue.manager.backends.kubernetes.steering.leader import parse_time

        new = lease()
        last_renewal = parse_time(
            cluster.server.store.get("leases", NS, "thumbs-leader")["spec"]["acquireTime"]
        ) - parse_time(old["renewTime"])
        # measured on the Lease's own clocks: taken over within lease duration + retry period
        # after the old leader's last renewal (with a little room for the kill itself)
        assert new["leaseTransitions"] == old.get("leaseTransitions", 0) + 1
        assert last_renewal <= 2 + 0.2 + 1.0, last_renewal
        wait_until(lambda: set(marker_worker.ended()) == set(names), timeout=60)
    finally:
        second.send_signal(signal.SIGTERM)
        _, err = second.communicate(timeout=30)
    assert "now leads thumbs-leader" in err
    assert created_jobs(cluster)[201] == len(names)  # nothing dispatched twice
    assert Counter(marker_worker.started()) == Counter(names)


def test_two_rival_once_managers_in_batch_mode_both_exit_when_every_batch_is_recorded(
    tmp_path, ambassador_server, marker_worker, cluster
):
    """Each claims batches the other may finish and record: a `--once` manager must end when
    every item is recorded, whoever recorded it, never wait for a batch a rival holds."""
    names = [f"clip-{i:02d}.mp4" for i in range(14)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    env = dict(os.environ, SLEEP="0.2")
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "2",
                        "--batch-size", "3")  # fmt: skip
    procs = [spawn_workqueue(*args, env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert Counter(marker_worker.started()) == Counter(names), outputs  # each item once
    assert Counter(marker_worker.ended()) == Counter(names)
    for out, _ in outputs:  # each reports every item, whoever ran it (done before it listed)
        assert "14 items: " in out and "0 failed" in out, out
