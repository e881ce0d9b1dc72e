"""A Kubernetes manager (on the API-server stand-in) and a local one sharing one queue through
a real PostgreSQL: every item once, both work, and the installation's claims are renewed by
whichever of its managers runs - a restarted one adopts its Jobs under the same owner."""

from __future__ import annotations

import json
import signal
from collections import Counter

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.e2e.test_shared_ledger import rows
from tests.support.servers import wait_until


def managers_live(url: str) -> int:
    status = workqueue("status", "--ledger", url, "--json")
    if status.returncode != 0:
        return 0
    return len((json.loads(status.stdout).get("manager") or {}).get("managers") or [])


def test_a_kubernetes_and_a_local_manager_share_one_queue_exactly_once(
    tmp_path, ambassador_server, marker_worker, cluster, postgres
):
    videos = tmp_path / "videos"
    videos.mkdir()
    server = ambassador_server(videos)
    kube = spawn_workqueue(
        *cluster.args(server.url, marker_worker, "--parallelism", "2", "--poll-interval", "0.2",
                      "--ledger", postgres)
    )  # fmt: skip
    local = spawn_workqueue(
        "manager", "--source", server.url, "--backend", "local", "--ledger", postgres,
        "--state-dir", tmp_path / "state", "--worker-cmd", marker_worker.path,
        "--parallelism", "2", "--poll-interval", "0.2",
    )  # fmt: skip
    names = [f"item-{i:02}.mp4" for i in range(24)]
    try:
        wait_until(lambda: managers_live(postgres) == 2, timeout=60)
        for name in names:
            (videos / name).write_bytes(b"x")
        wait_until(lambda: sum(r[0] == "succeeded" for r in rows(postgres).values()) == 24,
                   timeout=120)  # fmt: skip
        assert Counter(marker_worker.ended()) == Counter(names)  # each once
        assert sorted(marker_worker.started()) == sorted(names)
        where = [r[2] for r in rows(postgres).values()]
        on_cluster = sum(1 for w in where if not w.startswith(str(tmp_path / "state")))
        assert 0 < on_cluster < 24, where  # both worked
        owners = json.loads(workqueue("status", "--ledger", postgres, "--json").stdout)
        ids = owners["manager"]["managers"]
        assert any(i.startswith("media-thumbs-") for i in ids)  # the installation's id
        assert owners["counts"]["succeeded"] == 24
    finally:
        for process in (kube, local):
            process.send_signal(signal.SIGTERM)
        for process in (kube, local):
            process.wait(timeout=60)
    # the installation keeps its id: a restarted manager renews what it left
    config_maps = cluster.objects("configmaps")
    kept = [c for c in config_maps if c["metadata"]["name"] == "thumbs-shared-ledger"]
    assert len(kept) == 1 and kept[0]["data"]["owner"].startswith("media-thumbs-")


def test_a_kubernetes_manager_killed_mid_run_and_restarted_takes_back_its_jobs(
    tmp_path, ambassador_server, marker_worker, cluster, postgres
):
    """Its Jobs ran on in the cluster; the restarted manager is the same installation: it
    renews their claims, adopts them and records their outcomes - nothing runs twice, and no
    claim runs out for another manager to take."""
    videos = tmp_path / "videos"
    videos.mkdir()
    names = [f"item-{i:02}.mp4" for i in range(6)]
    for name in names:
        (videos / name).write_bytes(b"x")
    server = ambassador_server(videos)
    args = cluster.args(
        server.url, marker_worker, "--parallelism", "2", "--poll-interval", "0.2",
        "--ledger", postgres, "--lease", "60s", "--env", "SLEEP=1",
    )  # fmt: skip
    first = spawn_workqueue(*args)
    try:
        wait_until(lambda: sum(r[0] == "running" for r in rows(postgres).values()) == 2,
                   timeout=60)  # fmt: skip
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    second = spawn_workqueue(*args)
    try:
        wait_until(lambda: sum(r[0] == "succeeded" for r in rows(postgres).values()) == 6,
                   timeout=120)  # fmt: skip
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert Counter(marker_worker.ended()) == Counter(names)
    assert sorted(marker_worker.started()) == sorted(names)  # none started again
    assert all(r[1] == 1 for r in rows(postgres).values())  # one attempt each: none expired


def test_placement_holds_between_a_kubernetes_and_a_local_manager(
    tmp_path, ambassador_server, marker_worker, cluster, postgres
):
    """Placement on both backends at once: the cluster's manager offers a GPU (as the chart's
    `placement.offers` would say), the local one does not; every render runs on the cluster,
    the rest on either, each once."""
    videos = tmp_path / "videos"
    videos.mkdir()
    server = ambassador_server(videos)
    needs = ["--needs", "render-*=gpu"]
    kube = spawn_workqueue(
        *cluster.args(server.url, marker_worker, "--parallelism", "2", "--poll-interval", "0.2",
                      "--ledger", postgres, "--offers", "gpu=a100", *needs)
    )  # fmt: skip
    local = spawn_workqueue(
        "manager", "--source", server.url, "--backend", "local", "--ledger", postgres,
        "--state-dir", tmp_path / "state", "--worker-cmd", marker_worker.path,
        "--parallelism", "2", "--poll-interval", "0.2", "--offers", "arch=amd64", *needs,
    )  # fmt: skip
    renders = [f"render-{i:02}.mp4" for i in range(6)]
    names = renders + [f"plain-{i:02}.mp4" for i in range(6)]
    try:
        wait_until(lambda: managers_live(postgres) == 2, timeout=60)
        for name in names:
            (videos / name).write_bytes(b"x")
        wait_until(lambda: sum(r[0] == "succeeded" for r in rows(postgres).values()) == 12,
                   timeout=120)  # fmt: skip
        assert Counter(marker_worker.ended()) == Counter(names)  # each once
        local_runs = {
            n for n, r in rows(postgres).items() if r[2].startswith(str(tmp_path / "state"))
        }
        assert not local_runs & set(renders), local_runs  # no render on the local manager
        offers = json.loads(workqueue("status", "--ledger", postgres, "--json").stdout)
        assert sorted(offers["manager_offers"].values(), key=str) == [
            {"arch": "amd64"}, {"gpu": "a100"}
        ]  # fmt: skip
    finally:
        for process in (kube, local):
            process.send_signal(signal.SIGTERM)
        for process in (kube, local):
            process.wait(timeout=60)


def _node(name: str, labels: dict, *, taints=(), cordoned: bool = False) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": cordoned, "taints": list(taints)}}  # fmt: skip


def test_a_kubernetes_manager_offers_what_every_node_its_jobs_may_use_says_and_pins_them(
    tmp_path, ambassador_server, marker_worker, cluster, postgres
):
    """`--offers-node-label`: the cluster's manager reads its nodes at start and offers a
    label every node its pods may use has with one value - a cordoned node and one whose
    taint the pods do not tolerate do not count, and a label the usable nodes disagree on is
    not offered. Its Jobs are pinned to what it offers; the renders that need the GPU run on
    the cluster only, the rest on either, each once."""
    gpu = "nvidia.com/gpu.product"
    zone = "topology.kubernetes.io/zone"
    for node in (
        _node("gpu-a", {gpu: "A100", zone: "eu-west-1a", "pool": "batch"}),
        _node("gpu-b", {gpu: "A100", zone: "eu-west-1b", "pool": "batch"}),
        _node("cordoned", {"pool": "batch"}, cordoned=True),
        _node("infra", {"pool": "batch"},
              taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
        _node("other-pool", {"pool": "web"}),
    ):  # fmt: skip
        cluster.server.store.create("", "nodes", None, node)
    videos = tmp_path / "videos"
    videos.mkdir()
    server = ambassador_server(videos)
    needs = ["--needs", f"render-*={gpu}=A100"]
    kube = spawn_workqueue(
        *cluster.args(server.url, marker_worker, "--parallelism", "2", "--poll-interval", "0.2",
                      "--ledger", postgres, "--node-selector", "pool=batch",
                      "--offers-node-label", gpu, "--offers-node-label", zone, *needs)
    )  # fmt: skip
    local = spawn_workqueue(
        "manager", "--source", server.url, "--backend", "local", "--ledger", postgres,
        "--state-dir", tmp_path / "state", "--worker-cmd", marker_worker.path,
        "--parallelism", "2", "--poll-interval", "0.2", *needs,
    )  # fmt: skip
    renders = [f"render-{i:02}.mp4" for i in range(4)]
    names = renders + [f"plain-{i:02}.mp4" for i in range(4)]
    try:
        wait_until(lambda: managers_live(postgres) == 2, timeout=60)
        status = json.loads(workqueue("status", "--ledger", postgres, "--json").stdout)
        assert list(status["manager_offers"].values()) == [{gpu: "A100"}]  # no zone: they differ
        for name in names:
            (videos / name).write_bytes(b"x")
        wait_until(lambda: sum(r[0] == "succeeded" for r in rows(postgres).values()) == 8,
                   timeout=120)  # fmt: skip
        assert Counter(marker_worker.ended()) == Counter(names)  # each once
        local_runs = {
            n for n, r in rows(postgres).items() if r[2].startswith(str(tmp_path / "state"))
        }
        assert not local_runs & set(renders), local_runs  # no render off the cluster
        selectors = [j["spec"]["template"]["spec"]["nodeSelector"] for j in cluster.objects("jobs")]
        assert selectors and all(s == {"pool": "batch", gpu: "A100"} for s in selectors)
    finally:
        for process in (kube, local):
            process.send_signal(signal.SIGTERM)
        said = [process.communicate(timeout=60)[1] for process in (kube, local)]
    assert f"offers from node labels: {gpu}=A100 (and its Jobs pinned to them)" in said[0]
    disagree = "the nodes its Jobs may use disagree (eu-west-1a, eu-west-1b)"
    assert f"not offering {zone} from node labels: {disagree}" in said[0]  # as the docs show


def test_offers_that_the_nodes_contradict_are_one_line_before_anything_is_claimed(
    tmp_path, ambassador_server, marker_worker, cluster, postgres
):
    cluster.server.store.create("", "nodes", None, _node("n1", {"gpu": "h100"}))
    server = ambassador_server(tmp_path)
    contradicted = ["--offers", "gpu=a100", "--offers-node-label", "gpu"]
    said = workqueue(*cluster.args(server.url, marker_worker, "--ledger", postgres, *contradicted))
    assert said.returncode == 2, said.stderr
    assert "--offers gpu=a100, but the nodes its Jobs may use all have gpu=h100" in said.stderr
    assert "Traceback" not in said.stderr and said.stderr.count("\n") == 1, said.stderr
    bad = workqueue(*cluster.args(server.url, marker_worker, "--ledger", postgres,
                                  "--offers-node-label", "gpu model"))  # fmt: skip
    assert bad.returncode == 2 and "wants a node label's key" in bad.stderr, bad.stderr
