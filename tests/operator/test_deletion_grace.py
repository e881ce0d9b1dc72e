"""Deleting a WorkQueue while its Job runs: the Job goes with the queue, and its worker is
asked to stop (SIGTERM, its grace period) rather than killed outright; nothing of the queue is
left, and the deletion does not wait on the record finalizer a running Job carries."""

from __future__ import annotations

import yaml

from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import wait_until

from .conftest import NS


def test_a_running_job_gets_its_grace_when_its_queue_is_deleted(operated, tmp_path,
                                                                 ambassador_server):  # fmt: skip
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "long.mp4").write_bytes(b"video")
    served = ambassador_server(folder)
    marks = tmp_path / "grace.marks"
    worker = tmp_path / "patient-worker.sh"
    worker.write_text(
        "#!/bin/sh\n"
        f"trap 'echo terminated >> \"{marks}\"; exit 143' TERM\n"
        f'echo started >> "{marks}"\n'
        "sleep 300 &\n"
        "wait $!\n"
    )
    worker.chmod(0o755)
    queue = {"apiVersion": "workqueue.dev/v1beta1", "kind": "WorkQueue",
             "metadata": {"name": "slow"},
             "spec": {"source": {"url": served.url}, "pollInterval": "1s",
                      "worker": {"image": "w:1", "command": [str(worker)]}}}  # fmt: skip
    operated.start_operator()
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-", stdin=yaml.safe_dump(queue))
    wait_until(lambda: marks.exists() and "started" in marks.read_text(), timeout=120)
    uid = operated.queue("slow")["metadata"]["uid"]
    operated.kubectl("delete", "workqueue", "slow", "-n", NS, "--wait=false")
    wait_until(lambda: "terminated" in marks.read_text(), timeout=60)
    wait_until(lambda: operated.queue("slow") is None and not operated.owned_by(uid), timeout=60)
    assert not [k for k in operated.server.store.objects if k[0] == "jobs"]
    assert operated.operator.poll() is None
