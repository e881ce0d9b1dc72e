"""Batches (`--batch-size`) end to end: a real ambassador, the manager as a real process, the
stand-in's Indexed Jobs run by the test kubelet as real processes. Each item's outcome is its
own; each item is in exactly one batch, whatever crashes and rivals do."""

from __future__ import annotations

from collections import Counter

from kube_workqueue.manager.backends.kubernetes.manifests import batch_objects as bo
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.manager.backends.kubernetes.test_backend import validate_all
from tests.support.folders import make_items
from tests.support.servers import wait_until

NS = "media"


def batch_jobs(cluster):
    return sorted(
        (j for j in cluster.objects("jobs") if bo.batch_of(j) is not None),
        key=lambda j: j["metadata"]["name"],
    )


def batch_maps(cluster):
    return sorted(
        (c for c in cluster.objects("configmaps") if bo.batch_of(c) is not None),
        key=lambda c: c["metadata"]["name"],
    )


def recorded(cluster) -> dict[str, tuple[str, str]]:
    """item hash -> (state code, attempts) over every recorded batch."""
    out = {}
    for cm in batch_maps(cluster):
        released = set((cm["data"].get("released") or "").split())
        for i, line in enumerate((cm["data"].get("record") or "").splitlines()):
            h, code, attempts, _ = line.split("\t")
            if str(i) not in released:
                out[h] = (code, attempts)
    return out


def test_a_batch_of_mixed_outcomes_is_recorded_per_item(
    tmp_path, ambassador_server, marker_worker, cluster
):
    names = [f"clip-{i}.mp4" for i in range(5)] + ["will-fail.mp4", "it's ünï.mp4"]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "8",
                        "--batch-size", "4", "--max-attempts", "2")  # fmt: skip
    r = workqueue(*args)
    assert r.returncode == 1, r.stderr
    assert "7 items: 6 succeeded, 1 failed" in r.stdout, r.stdout
    assert Counter(marker_worker.started())["will-fail.mp4"] == 2  # its own retries only
    assert Counter(marker_worker.ended()) == Counter(n for n in names if "fail" not in n)
    jobs = batch_jobs(cluster)
    assert [j["metadata"]["name"] for j in jobs] == ["thumbs-batch-000001", "thumbs-batch-000002"]
    assert not [j for j in cluster.objects("jobs") if bo.batch_of(j) is None]  # no Job per item
    for job in jobs:
        assert ko.RECORD_FINALIZER not in (job["metadata"].get("finalizers") or [])
    record = recorded(cluster)
    assert len(record) == len(names)
    assert record[ko.item_hash("thumbs", "will-fail.mp4")] == ("f", "2")
    assert record[ko.item_hash("thumbs", "clip-0.mp4")] == ("s", "1")
    for cm in batch_maps(cluster):
        assert set(cm["data"]) == {"record"}  # the item data gone once recorded
    events = cluster.objects("events")
    assert len(events) == 1 and "1 of " in events[0]["message"]
    validate_all(cluster)
    # status is per item
    r = workqueue("status", *cluster.queue_args())
    assert r.returncode == 0, r.stderr
    assert "1 failed" in r.stdout.splitlines()[0] and "6 succeeded" in r.stdout.splitlines()[0]
    # a second pass creates nothing
    r = workqueue(*args)
    assert "0 succeeded, 6 already done, 1 failed" in r.stdout, r.stdout
    assert len(batch_jobs(cluster)) == 2


def test_retry_of_a_member_runs_that_item_alone(
    tmp_path, ambassador_server, marker_worker, cluster
):
    names = ["a.mp4", "b.mp4", "will-fail.mp4"]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "4",
                        "--batch-size", "10", "--max-attempts", "1")  # fmt: skip
    assert workqueue(*args).returncode == 1
    r = workqueue("retry", "will-fail.mp4", *cluster.queue_args())
    assert r.returncode == 0 and "was failed" in r.stdout, r.stderr
    r = workqueue("retry", "a.mp4", *cluster.queue_args())
    assert r.returncode == 2 and "is succeeded, not failed" in r.stderr
    r = workqueue(*args)
    assert r.returncode == 1
    assert "2 already done" in r.stdout, r.stdout
    assert Counter(marker_worker.started()) == {"a.mp4": 1, "b.mp4": 1, "will-fail.mp4": 2}
    second = batch_maps(cluster)[-1]
    assert second["metadata"]["name"] == "thumbs-batch-000002"
    assert len(second["data"]["record"].splitlines()) == 1  # the retried item alone
    first = batch_maps(cluster)[0]
    assert first["data"]["released"] == "2"  # its batch let go of it, and of nothing else


def claim_left_without_its_job(tmp_path, ambassador_server, cluster, names):
    """The items served, and what a manager killed after its claim and before its Job
    leaves: batch 1's ConfigMap holding the first two. Returns the ambassador."""
    import requests

    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    data = {n: requests.get(f"{server.url}/api/v1/items/{n}", timeout=5).json()["data"]
            for n in names[:2]}  # fmt: skip
    claim = bo.config_map("thumbs", NS, 1, [bo.member(n, data[n], 1) for n in names[:2]])
    cluster.server.store.create("", "configmaps", NS, claim)
    return server


def test_a_crash_between_the_claim_and_the_job_makes_no_second_batch(
    tmp_path, ambassador_server, marker_worker, cluster
):
    names = ["a.mp4", "b.mp4", "c.mp4"]
    server = claim_left_without_its_job(tmp_path, ambassador_server, cluster, names)
    args = cluster.args(server.url, marker_worker, "--parallelism", "4", "--batch-size", "4")
    proc = spawn_workqueue(*args)
    try:
        wait_until(lambda: len(marker_worker.ended()) == 3, timeout=60)
        wait_until(lambda: len(recorded(cluster)) == 3, timeout=30)
    finally:
        proc.terminate()
        proc.wait(30)
    assert Counter(marker_worker.started()) == Counter(names)  # each once
    assert [j["metadata"]["name"] for j in batch_jobs(cluster)] == [
        "thumbs-batch-000001", "thumbs-batch-000002",
    ]  # fmt: skip
    assert len(batch_maps(cluster)[1]["data"]["record"].splitlines()) == 1  # c.mp4 alone
    validate_all(cluster)


def test_a_once_run_waits_for_the_batches_it_finds_unrecorded(
    tmp_path, ambassador_server, marker_worker, cluster, monkeypatch
):
    """A claim a crash left without its Job: the `--once` run creates the Job, and reports
    its members only once they have ended - it once counted them "already done" and exited
    while they ran."""
    monkeypatch.setenv("SLEEP", "0.5")  # the stand-in's pods run in this process's env
    names = ["a.mp4", "b.mp4", "c.mp4"]
    server = claim_left_without_its_job(tmp_path, ambassador_server, cluster, names)
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "4",
                        "--batch-size", "4")  # fmt: skip
    done = workqueue(*args, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "3 items: 3 succeeded" in done.stdout, done.stdout
    assert Counter(marker_worker.ended()) == Counter(names)  # ended before the run did
    assert Counter(marker_worker.started()) == Counter(names)
    assert len(recorded(cluster)) == 3


def test_two_rival_managers_put_each_item_in_exactly_one_batch(
    tmp_path, ambassador_server, marker_worker, cluster, monkeypatch
):
    monkeypatch.setenv("SLEEP", "0.2")  # the stand-in's pods run in this process's env
    names = [f"clip-{i:02d}.mp4" for i in range(12)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--parallelism", "4", "--batch-size", "3",
                        "--poll-interval", "0.5", "--batch-wait", "0.2")  # fmt: skip
    rivals = [spawn_workqueue(*args), spawn_workqueue(*args)]
    try:
        wait_until(lambda: len(recorded(cluster)) == len(names), timeout=90)
    finally:
        for proc in rivals:
            proc.terminate()
        for proc in rivals:
            proc.wait(30)
    assert Counter(marker_worker.started()) == Counter(names)  # each item ran once
    held = Counter()
    for cm in batch_maps(cluster):
        for line in cm["data"]["record"].splitlines():
            held[line.split("\t")[0]] += 1
    assert held == Counter(ko.item_hash("thumbs", n) for n in names)  # in exactly one batch
    assert all(code == "s" for code, _ in recorded(cluster).values())
    claims = [a for a in cluster.server.answers if a[:2] == ("create", "configmaps")]
    assert len(claims) >= len(batch_maps(cluster))  # (a refused claim is read and skipped)
    validate_all(cluster)


LONG_WORKER = """#!{python}
import json, os, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
with open({started!r} + "." + os.environ["JOB_COMPLETION_INDEX"] + name, "w") as f:
    f.write(name)
if "long" in name:
    time.sleep(120)
"""


def test_cancel_removed_never_runs_a_waiting_member_and_ends_a_batch_left_to_nobody(
    tmp_path, ambassador_server, cluster
):
    import sys

    videos = tmp_path / "videos"
    make_items(videos, ["a-long.mp4", "b-long.mp4", "c.mp4"])
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(LONG_WORKER.format(python=sys.executable, started=str(marks / "s")))
    script.chmod(0o755)

    class Worker:
        path = script

    def started():
        return sorted(p.read_text() for p in marks.iterdir())

    server = ambassador_server(videos)
    # --accept-removals: the last item to leave empties the source, which would be held
    args = cluster.args(server.url, Worker, "--once", "--parallelism", "2", "--batch-size", "4",
                        "--poll-interval", "0.5", "--cancel-removed",
                        "--accept-removals")  # fmt: skip
    run = spawn_workqueue(*args)
    try:
        wait_until(lambda: started() == ["a-long.mp4", "b-long.mp4"], 30)
        (videos / "c.mp4").unlink()  # waiting for a slot: never in a batch, never run
        c_hash = ko.item_hash("thumbs", "c.mp4")
        from tests.manager.backends.kubernetes.test_cancel import record_entries

        wait_until(lambda: record_entries(cluster).get(c_hash) == ("cancelled", 0), timeout=30)
        (videos / "a-long.mp4").unlink()  # its index cannot be taken out: it runs on ...
        import time

        time.sleep(2)
        assert len(batch_jobs(cluster)) == 1 and not recorded(cluster)
        (videos / "b-long.mp4").unlink()  # ... until no member of the batch is wanted
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert "3 cancelled (left the source)" in out, out
    assert batch_jobs(cluster) == []  # the batch's Job ended, its pods with it
    record = recorded(cluster)
    assert record == {ko.item_hash("thumbs", "a-long.mp4"): ("c", "1"),
                      ko.item_hash("thumbs", "b-long.mp4"): ("c", "1")}  # fmt: skip
    assert started() == ["a-long.mp4", "b-long.mp4"]
    wait_until(lambda: not cluster.kubelet._containers, timeout=10)


def test_members_whose_pods_cannot_start_fail_and_free_their_slots(
    tmp_path, ambassador_server, marker_worker, cluster
):
    """One batch: two members run, two have pods that can never start (their image cannot be
    pulled). After --stuck-timeout the two are recorded failed as stuck, the two that ran keep
    their outcome, and the batch's Job is deleted: the --once run ends."""
    import json

    cluster.kubelet.stuck = {"pull-me": "ImagePullBackOff"}
    names = ["a-ok-1.mp4", "a-ok-2.mp4", "z-pull-me-1.mp4", "z-pull-me-2.mp4"]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--once", "--parallelism", "4",
                        "--batch-size", "4", "--stuck-timeout", "1s")  # fmt: skip
    r = workqueue(*args)
    assert r.returncode == 1, r.stderr
    assert "4 items: 2 succeeded, 2 failed" in r.stdout, r.stdout
    assert "z-pull-me-1.mp4 (stuck: ImagePullBackOff for" in r.stdout, r.stdout
    assert "z-pull-me-2.mp4 (stuck: ImagePullBackOff for" in r.stdout, r.stdout
    assert sorted(marker_worker.ended()) == ["a-ok-1.mp4", "a-ok-2.mp4"]
    assert batch_jobs(cluster) == []  # deleted: every slot it held is free
    assert len(batch_maps(cluster)) == 1  # its record stays
    events = [e for e in cluster.objects("events") if e.get("reason") == "Stuck"]
    assert len(events) == 1 and "thumbs-batch-000001: 2 items stuck" in events[0]["message"]
    status = json.loads(workqueue("status", *cluster.queue_args(), "--json").stdout)
    assert status["counts"]["failed"] == 2 and status["counts"]["succeeded"] == 2
    again = workqueue(*args)  # a second pass: recorded, so nothing runs again
    assert again.returncode == 1, again.stderr  # the two stay failed until `workqueue retry`
    assert "0 succeeded, 2 already done, 2 failed" in again.stdout, again.stdout
    assert len(batch_maps(cluster)) == 1 and batch_jobs(cluster) == []  # no new batch
    assert sorted(marker_worker.started()) == ["a-ok-1.mp4", "a-ok-2.mp4"]
    validate_all(cluster)
