"""`--cancel-removed` on Kubernetes, with a real ambassador, the manager as a real process and
the API-server stand-in: an item removed while it waits never gets a Job; one removed while its
Job runs has the Job deleted (read afresh, uid precondition) and its pod's container stopped;
both are recorded `cancelled` in the queue's durable record, so no manager runs them again."""

from __future__ import annotations

import json
import sys

from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from kube_workqueue.manager.backends.kubernetes.records.record import Entry
from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.support.folders import make_items
from tests.support.servers import wait_until

WORKER = """#!{python}
import json, os, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
with open({started!r}, "a") as f:
    f.write(name + "\\n")
if "long" in name:
    time.sleep(120)
"""


def record_entries(cluster) -> dict[str, tuple[str, int]]:
    """item hash -> (state, attempts), as the durable record has it."""
    out = {}
    for cm in cluster.objects("configmaps"):
        if "-record-" in cm["metadata"]["name"]:
            for key, value in (cm.get("data") or {}).items():
                out[key] = Entry.parse(value)[:2]
    return out


def test_removed_items_are_cancelled_never_started_or_their_job_deleted(
    tmp_path, ambassador_server, cluster
):
    videos = tmp_path / "videos"
    make_items(videos, ["a-long.mp4", "b.mp4"])
    started = tmp_path / "started.txt"
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(python=sys.executable, started=str(started)))
    script.chmod(0o755)

    class Worker:
        path = script

    server = ambassador_server(videos)
    args = cluster.args(
        server.url, Worker, "--once", "--parallelism", "1", "--poll-interval", "0.5",
        "--cancel-removed", "--accept-removals",  # (the last item leaving empties the source)
    )  # fmt: skip
    run = spawn_workqueue(*args)
    try:
        wait_until(lambda: started.exists() and started.read_text().split() == ["a-long.mp4"], 30)
        (videos / "b.mp4").unlink()  # waiting for the one slot: never gets a Job
        b_hash = ko.item_hash("thumbs", "b.mp4")
        wait_until(lambda: record_entries(cluster).get(b_hash) == ("cancelled", 0), timeout=30)
        jobs = cluster.objects("jobs")
        assert [j["metadata"]["annotations"][ko.ITEM_ANNOTATION] for j in jobs] == ["a-long.mp4"]
        (videos / "a-long.mp4").unlink()  # running: its Job goes, and its pod with it
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert "2 cancelled (left the source)" in out
    assert cluster.objects("jobs") == []
    deletes = [a for a in cluster.server.answers if a[0] == "delete" and a[1] == "jobs"]
    assert deletes and all(code == 200 for _, _, code, _ in deletes)
    assert record_entries(cluster)[ko.item_hash("thumbs", "a-long.mp4")] == ("cancelled", 1)
    assert started.read_text().split() == ["a-long.mp4"]
    wait_until(lambda: not cluster.kubelet._containers, timeout=10)  # the container stopped
    status = workqueue("status", *cluster.queue_args(), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["counts"]["cancelled"] == 2
