"""Items that change, on Kubernetes (a real ambassador, the manager as a real process, the
API-server stand-in): the Job name comes from queue, name and version, so new bytes under
`--on-change rerun` get a Job of their own beside the old one's - and under the default
`ignore` nothing runs again; `--version-by content` tells the same bytes copied again from a
change; `status NAME` shows the versions an item ran at."""

from __future__ import annotations

import json
import os
import shutil

import requests

from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.e2e.conftest import workqueue
from tests.support.servers import wait_until


def write(path, data: bytes, mtime: int) -> None:
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def version_of(server, name: str) -> str:
    return requests.get(f"{server.url}/api/v1/items/{name}", timeout=5).json()["data"]["version"]


def once(cluster, server, worker, *extra):
    r = workqueue(*cluster.args(server.url, worker, "--once", *extra))
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_new_bytes_get_a_job_of_their_own_under_rerun_and_nothing_by_default(
    tmp_path, ambassador_server, marker_worker, cluster
):
    videos = tmp_path / "videos"
    videos.mkdir()
    write(videos / "a.mp4", b"first", 1_000_000_000)
    write(videos / "b.mp4", b"same", 1_000_000_000)
    server = ambassador_server(videos)
    first = version_of(server, "a.mp4")
    assert "2 succeeded" in once(cluster, server, marker_worker)
    write(videos / "a.mp4", b"second upload", 1_000_000_500)
    second = wait_until(lambda: (v := version_of(server, "a.mp4")) != first and v, timeout=20)
    assert "2 already done" in once(cluster, server, marker_worker)  # default: ignore
    out = once(cluster, server, marker_worker, "--on-change", "rerun")
    assert "1 succeeded, 1 already done" in out, out
    assert sorted(marker_worker.started()) == ["a.mp4", "a.mp4", "b.mp4"]
    jobs = {
        j["metadata"]["name"]: j["metadata"]["annotations"].get(ko.VERSION_ANNOTATION)
        for j in cluster.objects("jobs")
        if j["metadata"]["annotations"][ko.ITEM_ANNOTATION] == "a.mp4"
    }
    assert jobs == {
        ko.object_name("thumbs", "a.mp4", first): first,
        ko.object_name("thumbs", "a.mp4", second): second,
    }
    assert "2 already done" in once(cluster, server, marker_worker, "--on-change", "rerun")
    r = workqueue("status", "a.mp4", *cluster.queue_args(), "--json")
    assert r.returncode == 0, r.stderr
    versions = json.loads(r.stdout)["versions"]
    assert [(v["version"], v["state"]) for v in versions][-2:] == [
        (first, "succeeded"),
        (second, "succeeded"),
    ]
    text = workqueue("status", "a.mp4", *cluster.queue_args()).stdout
    assert text.count("ran at version") >= 2


def test_the_same_bytes_copied_again_run_again_by_stat_but_not_by_content(
    tmp_path, ambassador_server, marker_worker, cluster
):
    videos = tmp_path / "videos"
    videos.mkdir()
    write(videos / "a.mp4", b"bytes", 1_000_000_000)
    server = ambassador_server(videos, "--version-by", "content")
    before = version_of(server, "a.mp4")
    once(cluster, server, marker_worker, "--on-change", "rerun")
    copy = tmp_path / "copy.mp4"
    shutil.copyfile(videos / "a.mp4", copy)
    os.replace(copy, videos / "a.mp4")  # the same bytes, a new mtime and inode
    os.utime(videos / "a.mp4", (1_000_000_900, 1_000_000_900))
    assert version_of(server, "a.mp4") == before  # content: the same version
    assert "1 already done" in once(cluster, server, marker_worker, "--on-change", "rerun")
    assert marker_worker.started() == ["a.mp4"]
