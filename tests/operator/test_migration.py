"""From a Helm release to a WorkQueue, as docs/cluster.md says to move: a queue run by its own
manager (the chart's per-queue mode: a manager owned through its Deployment) has its record
unowned, its release uninstalled (the garbage collector takes the WorkQueue and the Jobs), and
a v1beta1 WorkQueue of the same name applied for the operator: nothing that ran runs again, and
what came since runs once."""

from __future__ import annotations

from collections import Counter

import yaml

from tests.e2e.conftest import workqueue
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import wait_until

from .conftest import NS, marks


def test_a_release_becomes_a_workqueue_without_running_anything_twice(
    operated, tmp_path, ambassador_server
):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"v{i}.mp4").write_bytes(b"video")
    served = ambassador_server(folder)
    markers = tmp_path / "thumbs.marks"
    operated.server.store.create(
        "apps",
        "deployments",
        NS,
        {
            "metadata": {"name": "thumbs-workqueue"},
            "spec": {
                "selector": {"matchLabels": {"app": "wq"}},
                "template": {
                    "metadata": {"labels": {"app": "wq"}},
                    "spec": {"containers": [{"name": "m", "image": "wq"}]},
                },
            },
        },
    )  # fmt: skip  (the release's Deployment)
    release = workqueue(
        "manager", "--backend", "kubernetes", "--source", served.url, "--namespace", NS,
        "--queue", "thumbs", "--image", "w:1", "--command", str(operated.worker),
        "--env", f"MARKERS={markers}", "--kubeconfig", operated.kubeconfig,
        "--owner-deployment", "thumbs-workqueue", "--kube-api-qps", "0", "--once",
        timeout=180,
    )  # fmt: skip
    assert release.returncode == 0, release.stderr
    assert len(marks(markers)) == 3

    # the documented steps: take the owner off the record, uninstall the release
    names = operated.kubectl("get", "configmaps", "-n", NS, "-l",
                             "workqueue.dev/queue=thumbs,workqueue.dev/role=record",
                             "-o", "name").stdout.split()  # fmt: skip
    assert names
    for name in names:
        operated.kubectl("patch", name, "-n", NS, "--type", "json", "-p",
                         '[{"op": "remove", "path": "/metadata/ownerReferences"}]')  # fmt: skip
    operated.kubectl("delete", "deployment", "thumbs-workqueue", "-n", NS)
    wait_until(lambda: operated.queue("thumbs") is None and not any(
        r == "jobs" for (r, _, _) in list(operated.server.store.objects)), timeout=60)  # fmt: skip

    (folder / "v3.mp4").write_bytes(b"video")  # came while no manager ran
    queue = {"apiVersion": "workqueue.dev/v1beta1", "kind": "WorkQueue",
             "metadata": {"name": "thumbs"},
             "spec": {"source": {"url": served.url}, "pollInterval": "1s",
                      "worker": {"image": "w:1", "command": [str(operated.worker)],
                                 "env": [{"name": "MARKERS", "value": str(markers)}]}}}  # fmt: skip
    operated.start_operator()
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-", stdin=yaml.safe_dump(queue))
    wait_until(lambda: len(marks(markers)) >= 4, timeout=120)
    wait_until(lambda: operated.condition("thumbs", "Progressing").get("status") == "False"
               and operated.condition("thumbs", "Ready").get("status") == "True",
               timeout=60)  # fmt: skip
    seen = Counter(marks(markers))
    assert len(seen) == 4 and set(seen.values()) == {1}, seen
