"""One queue's failure is its own: beside a queue whose manager cannot start (its shared
ledger does not answer) and one whose source is down, a healthy queue runs every item once; the
failing one says so (Ready=False, Degraded=True, an Event) and is tried again with a back-off,
the operator never exits, and fixing the spec makes it run."""

from __future__ import annotations

import base64
import json
from collections import Counter

import requests
import yaml

from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import free_port, wait_until

from .conftest import NS, marks


def items_queue(name: str, url: str, operated, tmp_path, **spec) -> dict:
    worker = {"image": "w:1", "command": [str(operated.worker)],
              "env": [{"name": "MARKERS", "value": str(tmp_path / f"{name}.marks")}]}  # fmt: skip
    return {"apiVersion": "workqueue.dev/v1beta1", "kind": "WorkQueue",
            "metadata": {"name": name},
            "spec": {"source": {"url": url}, "worker": worker, "pollInterval": "1s",
                     "parallelism": 2, **spec}}  # fmt: skip


def test_a_failing_queue_is_a_condition_and_the_others_run(operated, tmp_path,
                                                           ambassador_server):  # fmt: skip
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(4):
        (folder / f"v{i}.mp4").write_bytes(b"video")
    served = ambassador_server(folder)
    ledger = base64.b64encode(b"postgresql://workqueue@127.0.0.1:1/none").decode()
    operated.server.store.create("", "secrets", NS, {"metadata": {"name": "ledger"},
                                                      "data": {"url": ledger}})  # fmt: skip
    queues = [
        items_queue("good", served.url, operated, tmp_path),
        items_queue("lost", f"http://127.0.0.1:{free_port()}", operated, tmp_path),
        items_queue("failing", served.url, operated, tmp_path, ledgerSecret={"name": "ledger"}),
    ]
    health = free_port()
    operated.start_operator("--health-port", str(health))
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-",
                     stdin=yaml.safe_dump_all(queues))  # fmt: skip
    wait_until(lambda: len(marks(tmp_path / "good.marks")) >= 4, timeout=120)
    wait_until(lambda: operated.condition("failing", "Degraded").get("status") == "True",
               timeout=120)  # fmt: skip
    failing = operated.condition("failing", "Ready")
    assert failing["status"] == "False" and failing["reason"] == "ManagerFailed"
    wait_until(lambda: operated.condition("lost", "Degraded").get("reason")
               == "SourceUnavailable", timeout=120)  # fmt: skip
    assert operated.condition("lost", "Ready")["status"] == "True"  # it runs, it cannot list
    events = json.loads(operated.kubectl("get", "events", "-n", NS, "-o", "json").stdout)
    assert ("failing", "ManagerFailed") in {
        (e["involvedObject"]["name"], e["reason"]) for e in events["items"]}  # fmt: skip
    assert operated.operator.poll() is None
    assert not (tmp_path / "failing.marks").exists()
    # a failing queue is the queue's trouble, not the operator's: its probes stay green
    for probe in ("/healthz", "/readyz"):
        answer = requests.get(f"http://127.0.0.1:{health}{probe}", timeout=10)
        assert answer.status_code == 200 and answer.text == "ok\n"

    # the spec fixed: the queue runs, and what the healthy one ran is not run again
    operated.kubectl("patch", "workqueue", "failing", "-n", NS, "--type", "json", "-p",
                     '[{"op": "remove", "path": "/spec/ledgerSecret"}]')  # fmt: skip
    wait_until(lambda: len(marks(tmp_path / "failing.marks")) >= 4, timeout=120)
    wait_until(lambda: operated.condition("failing", "Ready").get("status") == "True",
               timeout=60)  # fmt: skip
    for name in ("good", "failing"):
        seen = Counter(marks(tmp_path / f"{name}.marks"))
        assert len(seen) == 4 and set(seen.values()) == {1}, (name, seen)


def test_a_tenants_pattern_cannot_freeze_the_operator(operated, tmp_path, ambassador_server):
    """The attacker's `spec.group: '^(a+)+$'` over items named `aaaa…!` - minutes of
    backtracking per name in Python's `re` - beside a healthy queue: groups are matched by RE2,
    in linear time, so the operator's probes answer throughout and both queues run every item."""
    attacked, healthy = tmp_path / "attacked", tmp_path / "healthy"
    for folder, names in ((attacked, [f"{'a' * (28 + i)}!.mp4" for i in range(4)]),
                          (healthy, [f"v{i}.mp4" for i in range(4)])):  # fmt: skip
        folder.mkdir()
        for name in names:
            (folder / name).write_bytes(b"video")
    queues = [
        items_queue(
            "attacked",
            ambassador_server(attacked).url,
            operated,
            tmp_path,
            group="^(a+)+$",
            limits=["*=1"],
        ),  # fmt: skip
        items_queue("healthy", ambassador_server(healthy).url, operated, tmp_path),
    ]
    health = free_port()
    operated.start_operator("--health-port", str(health))
    wait_until(lambda: _answers(f"http://127.0.0.1:{health}/healthz"), timeout=60)
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-",
                     stdin=yaml.safe_dump_all(queues))  # fmt: skip

    def healthy_and_done() -> bool:
        answer = requests.get(f"http://127.0.0.1:{health}/healthz", timeout=10)
        assert answer.status_code == 200  # every look: never starved
        return all(len(marks(tmp_path / f"{n}.marks")) >= 4 for n in ("attacked", "healthy"))

    wait_until(healthy_and_done, timeout=120)
    for name in ("attacked", "healthy"):
        seen = Counter(marks(tmp_path / f"{name}.marks"))
        assert len(seen) == 4 and set(seen.values()) == {1}, (name, seen)


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=10).status_code == 200
    except requests.RequestException:  # refused, or slow under load: not yet
        return False
