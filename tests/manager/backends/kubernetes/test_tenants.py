"""Group limits on the Kubernetes backend (the API-server stand-in and its kubelet), one Job per
item and in batches (Indexed Jobs), judged by the workers' own marks: a group's limit is
reached and never passed, and a batch never holds more of a group than its free limit."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.e2e.conftest import workqueue
from tests.support.marks import marking_worker, most_at_once, read_marks


class Worker:  # what `cluster.args` reads of a worker
    def __init__(self, path) -> None:
        self.path = path


@pytest.mark.parametrize("batch", [[], ["--batch-size", "4"]], ids=["per-item", "batches"])
def test_a_group_limit_holds_on_kubernetes(tmp_path, ambassador_server, cluster, batch):
    source = tmp_path / "in"
    counts = {"api": 6, "db": 4}
    for group, count in counts.items():
        (source / group).mkdir(parents=True)
        for i in range(count):
            (source / group / f"{i:02d}.mp4").write_bytes(b"x")
    server = ambassador_server(source, "--recursive")
    worker, marks = marking_worker(tmp_path, 0.4)
    done = workqueue(*cluster.args(
        server.url, Worker(worker), "--once", "--parallelism", "5",
        "--group", "^([^/]+)/", "--limit", "api=2", *batch,
    ), timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = read_marks(marks)
    assert Counter(n for e, _, n in found if e == "end") == Counter(
        f"{g}/{i:02d}.mp4" for g, n in counts.items() for i in range(n)
    )
    most = most_at_once(found, lambda name: name.split("/")[0])
    assert most["api"] == 2 and most["db"] >= 2, most
