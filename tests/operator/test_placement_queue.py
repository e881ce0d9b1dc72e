"""Placement through the operator: a WorkQueue whose `spec.placement` offers a GPU (its one
node's label, `nodeLabels`) shares its queue, through `ledgerSecret` and a real PostgreSQL,
with a local manager that offers none - every render runs on the cluster (the operator's
queue), each item once, by the workers' own marks."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections import Counter

import yaml

from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import wait_until

from .conftest import NS, marks
from .test_isolation import items_queue

NEEDS = ["render-*=gpu"]


def test_a_workqueues_placement_holds_beside_a_local_manager(
    operated, tmp_path, ambassador_server, postgres
):
    folder = tmp_path / "in"
    folder.mkdir()
    renders = [f"render-{i}.mp4" for i in range(4)]
    names = renders + [f"plain-{i}.mp4" for i in range(4)]
    served = ambassador_server(folder)
    secret = base64.b64encode(postgres.encode()).decode()
    operated.server.store.create("", "secrets", NS, {"metadata": {"name": "ledger"},
                                                      "data": {"url": secret}})  # fmt: skip
    node = {"name": "gpu-node", "labels": {"gpu": "a100"}}
    operated.server.store.create("", "nodes", None, {"kind": "Node", "metadata": node})
    placement = {"offers": ["zone=x"], "nodeLabels": ["gpu"], "needs": NEEDS}
    queue = items_queue("thumbs", served.url, operated, tmp_path, ledgerSecret={"name": "ledger"},
                        placement=placement)  # fmt: skip
    operated.start_operator()
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-", stdin=yaml.safe_dump(queue))
    local = subprocess.Popen(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "manager", "--source", served.url,
         "--ledger", postgres, "--state-dir", str(tmp_path / "state"),
         "--worker-cmd", str(operated.worker), "--parallelism", "2", "--poll-interval", "0.2",
         "--offers", "arch=amd64", "--needs", NEEDS[0]],
        env={**os.environ, "MARKERS": str(tmp_path / "local.marks")},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for name in names:
            (folder / name).write_bytes(b"video")

        def ran() -> list[str]:
            both = marks(tmp_path / "thumbs.marks") + marks(tmp_path / "local.marks")
            return [json.loads(line)["name"] for line in both]

        wait_until(lambda: len(ran()) >= len(names), timeout=180)
        assert Counter(ran()) == Counter(names)  # each once, on one side or the other
        on_local = {json.loads(line)["name"] for line in marks(tmp_path / "local.marks")}
        assert not on_local & set(renders), on_local  # every render on the cluster's manager
        said = subprocess.run(
            [sys.executable, "-m", "kube_workqueue.manager.cli", "status", "--ledger", postgres,
             "--json"], capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        offered = json.loads(said.stdout)["manager_offers"].values()
        assert {"gpu": "a100", "zone": "x"} in offered  # its node's label beside its offers
        jobs = [j for (r, _, _), j in operated.server.store.objects.items() if r == "jobs"]
        assert jobs and all(
            j["spec"]["template"]["spec"].get("nodeSelector", {}).get("gpu") == "a100" for j in jobs
        )  # pinned to the node's label
    finally:
        local.terminate()
        local.wait(60)
