"""`workqueue operator` end to end, with the real kubectl against the stand-in: the three
example WorkQueues (a folder on a claim, a bucket, a Redis sorted set) applied together each run
their items exactly once; a patch reaches only its queue; a spec the operator cannot run is a
condition and an Event, never a crash; a deleted queue leaves nothing of its own behind while
the others run on; and a restarted operator runs nothing twice (the workers' own marks)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import yaml

from tests.charts.rendering import by_kind, render
from tests.support.servers import wait_until

from .conftest import NS, ROOT, marks

EXAMPLES = ROOT / "examples" / "operator"


def example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def pointed_here(operated, tmp_path: Path, object_store, redis_store, bucket: str, zset: str):
    """The three examples, their addresses pointed at this machine's folder, moto and Redis,
    and their worker at the marking worker (each queue marks into its own file)."""
    folder, reports, renders = (example(f) for f in ("folder.yaml", "bucket.yaml",
                                                      "sorted-set.yaml"))  # fmt: skip
    folder["spec"]["source"]["volume"]["mountPath"] = str(tmp_path / "media")
    reports["spec"]["source"]["url"] = f"s3://{bucket}/reports/"
    reports["spec"]["source"]["endpointUrl"] = object_store.endpoint
    renders["spec"]["source"]["url"] = f"{redis_store.url}?zset={zset}"
    for queue in (folder, reports, renders):
        name = queue["metadata"]["name"]
        worker = queue["spec"]["worker"]
        worker["command"] = [str(operated.worker)]
        worker.pop("args", None)
        worker["env"] = [{"name": "MARKERS", "value": str(tmp_path / f"{name}.marks")}]
        queue["spec"]["pollInterval"] = "1s"
    return [folder, reports, renders]


def test_three_workqueues_run_once_each_through_patch_bad_spec_delete_and_restart(
    operated, tmp_path, object_store, redis_store
):
    media = tmp_path / "media"
    media.mkdir()
    for i in range(3):
        (media / f"clip-{i}.mp4").write_bytes(b"video")
    (media / "notes.txt").write_text("not an item")
    bucket = object_store.bucket(*(f"reports/r{i}.csv" for i in range(3)), body=b"1,2\n")
    zset = f"renders-{tmp_path.name}"
    redis = redis_store.client()
    redis.zadd(zset, {"acme/a": 5, "acme/b": 4, "beta/c": 3, "beta/d": 1})
    secret = ["create", "secret", "generic", "s3-credentials", "-n", NS,
              "--from-literal=AWS_ACCESS_KEY_ID=testing",
              "--from-literal=AWS_SECRET_ACCESS_KEY=testing"]  # fmt: skip
    operated.kubectl(*secret)
    operated.start_operator()
    queues = pointed_here(operated, tmp_path, object_store, redis_store, bucket, zset)
    operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-",
                     stdin=yaml.safe_dump_all(queues))  # fmt: skip
    expected = {"thumbs": 3, "reports": 3, "renders": 4}

    def ran(name: str) -> list[str]:
        return marks(tmp_path / f"{name}.marks")

    wait_until(lambda: all(len(ran(n)) >= k for n, k in expected.items()), timeout=120)
    for name in expected:
        wait_until(lambda name=name: operated.condition(name, "Ready").get("status") == "True",
                   timeout=60)  # fmt: skip
    listed = operated.kubectl("get", "workqueues", "-A").stdout.splitlines()
    assert listed[0].split()[:3] == ["NAMESPACE", "NAME", "READY"]
    assert sorted((row.split()[1], row.split()[2]) for row in listed[1:]) == [
        ("renders", "True"), ("reports", "True"), ("thumbs", "True")]  # fmt: skip
    # each queue's ambassador is its own Deployment + Service, owned by its WorkQueue
    for name in expected:
        uid = operated.queue(name)["metadata"]["uid"]
        owned = set(operated.owned_by(uid))
        assert {("deployments", f"{name}-ambassador"),
                ("services", f"{name}-ambassador")} <= owned  # fmt: skip

    # a patch of one queue's parallelism reaches it, and only it
    before = {n: operated.queue(n)["metadata"]["generation"] for n in ("thumbs", "reports")}
    operated.kubectl("patch", "workqueue", "renders", "-n", NS, "--type", "merge",
                     "-p", '{"spec":{"parallelism":1}}')  # fmt: skip
    wait_until(lambda: operated.queue("renders")["status"].get("replicas") == 1, timeout=30)
    assert {n: operated.queue(n)["metadata"]["generation"] for n in before} == before
    assert operated.queue("thumbs")["status"]["replicas"] == 3
    assert operated.deployments.started[(NS, "renders-ambassador")] == 1  # not restarted

    # a spec it cannot run: a condition and an Event; the operator and the others go on
    broken = {"apiVersion": "workqueue.dev/v1beta1", "kind": "WorkQueue",
              "metadata": {"name": "broken"},
              "spec": {"source": {"url": "ftp://files.example/in/"},
                       "worker": {"image": "busybox"}}}  # fmt: skip
    locked = {"apiVersion": "workqueue.dev/v1beta1", "kind": "WorkQueue",
              "metadata": {"name": "locked"},
              "spec": {"source": {"url": f"s3://{bucket}/reports/",
                                  "credentialsSecret": "not-there"},
                       "worker": {"image": "busybox"}}}  # fmt: skip
    operated.kubectl(
        "apply", "--validate=false", "-n", NS, "-f", "-", stdin=yaml.safe_dump_all([broken, locked])
    )
    wait_until(lambda: operated.condition("broken", "Ready").get("reason") == "UnknownSource",
               timeout=30)  # fmt: skip
    wait_until(lambda: operated.condition("locked", "Ready").get("reason") == "SecretNotFound",
               timeout=30)  # fmt: skip
    assert operated.condition("broken", "Ready")["status"] == "False"
    assert "ftp" in operated.condition("broken", "Ready")["message"]
    events = json.loads(operated.kubectl("get", "events", "-n", NS, "-o", "json").stdout)
    said = {(e["involvedObject"]["name"], e["reason"], e["type"]) for e in events["items"]}
    assert {("broken", "UnknownSource", "Warning"),
            ("locked", "SecretNotFound", "Warning")} <= said  # fmt: skip
    assert operated.operator.poll() is None
    assert not any(n == "broken-ambassador" for (r, _, n) in operated.server.store.objects)

    # deleting one queue removes all it owned; the others keep running
    reports_uid = operated.queue("reports")["metadata"]["uid"]
    operated.kubectl("delete", "workqueue", "reports", "-n", NS, "--wait=false")
    wait_until(lambda: operated.queue("reports") is None and not operated.owned_by(reports_uid),
               timeout=60)  # fmt: skip
    left = [(r, n) for (r, _, n), o in list(operated.server.store.objects.items())
            if _labelled(o, "reports")]  # fmt: skip
    assert left == []  # deletionPolicy Delete: its record went too
    wait_until(lambda: (NS, "reports-ambassador") not in operated.deployments.running, timeout=30)
    (media / "clip-3.mp4").write_bytes(b"video")
    wait_until(lambda: len(ran("thumbs")) >= 4, timeout=60)

    # a new image (and a new ambassador setting): the next items run with it, nothing again
    operated.kubectl(
        "patch",
        "workqueue",
        "thumbs",
        "-n",
        NS,
        "--type",
        "merge",
        "-p",
        '{"spec":{"worker":{"image":"thumbnailer:2"},"source":{"settleSeconds":0}}}',
    )
    wait_until(lambda: operated.deployments.started.get((NS, "thumbs-ambassador")) == 2,
               timeout=60)  # fmt: skip
    (media / "clip-5.mp4").write_bytes(b"video")
    wait_until(lambda: len(ran("thumbs")) >= 5, timeout=60)
    images = {o["spec"]["template"]["spec"]["containers"][0]["image"]
              for (r, _, _), o in list(operated.server.store.objects.items())
              if r == "jobs" and _labelled(o, "thumbs")}  # fmt: skip
    assert "thumbnailer:2" in images

    # a second operator stands by (the first holds the Lease); the first stops, the second
    # takes over: nothing runs twice, what came meanwhile runs once
    first = operated.operator
    standby = operated.start_operator()
    wait_until(lambda: operated.log.read_text().count("standing by for the Lease") == 2,
               timeout=60)  # fmt: skip
    lease = operated.server.store.objects[("leases", NS, "workqueue-operator")]
    holder = lease["spec"]["holderIdentity"]
    assert holder.endswith(f"-{first.pid}")  # the second waits
    operated.operator = first
    assert operated.stop_operator() == 0
    (media / "clip-4.mp4").write_bytes(b"video")
    redis.zadd(zset, {"beta/e": 2})
    operated.operator = standby
    counted: list[dict] = []  # each queue's status.counts, as the new operator's managers write

    def took_over() -> bool:
        for name in ("renders", "thumbs"):
            counts = (operated.queue(name).get("status") or {}).get("counts")
            if counts is not None:
                counted.append(counts)
        lease = operated.server.store.objects[("leases", NS, "workqueue-operator")]
        return lease["spec"].get("holderIdentity") == \
            f"{holder.rsplit('-', 1)[0]}-{standby.pid}"  # fmt: skip

    wait_until(took_over, timeout=60)
    expected.update(thumbs=6, renders=5)

    def ran_all() -> bool:
        took_over()
        return len(ran("thumbs")) >= 6 and len(ran("renders")) >= 5

    wait_until(ran_all, timeout=120)
    # a manager just started knows no item until its first listing is recorded: it says no
    # status before (one counting every state 0 read for 10-20 s over the true counts)
    assert counted and all(sum(c.values()) > 0 for c in counted), counted
    for name, count in expected.items():
        seen = Counter(ran(name))
        assert len(seen) == count and set(seen.values()) == {1}, (name, seen)

    # deletionPolicy Retain (the default): the record outlives the WorkQueue, unowned
    operated.kubectl("delete", "workqueue", "thumbs", "-n", NS, "--wait=false")
    wait_until(lambda: operated.queue("thumbs") is None, timeout=60)
    records = [o for (r, _, _), o in list(operated.server.store.objects.items())
               if r == "configmaps" and _labelled(o, "thumbs", "record")]  # fmt: skip
    assert records and all(not o["metadata"].get("ownerReferences") for o in records)
    assert operated.condition("renders", "Ready")["status"] == "True"

    # the operator's rules are what it called: everything it called is granted, and what is
    # granted beyond this run's calls is a queue manager's own (the per-queue Role's paths)
    seen = operated.server.verbs_seen(but_agent="kubectl")
    called = {(resource.split("/")[-1] + (f"/{sub}" if sub else ""), verb)
              for verb, resource, sub in seen}  # fmt: skip
    granted = _granted(by_kind(render({"mode": "operator"}), "ClusterRole")[0])
    assert called <= granted, called - granted
    assert granted - called <= _granted(by_kind(render(), "Role")[0]), granted - called


def _labelled(obj: dict, queue: str, role: str | None = None) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return labels.get("workqueue.dev/queue") == queue and (
        role is None or labels.get("workqueue.dev/role") == role
    )


def _granted(role: dict) -> set[tuple[str, str]]:
    return {(res, verb) for rule in role["rules"] for res in rule["resources"]
            for verb in rule["verbs"]}  # fmt: skip
