"""Ownership and labels on a third-party emulator: kmock's KubernetesEmulator
(https://github.com/nolar/kmock), an in-memory API server written apart from our stand-in, so a
habit our stand-in shares with our client cannot hide a mistake.

kmock 0.8 stores objects as JSON and nothing more: no uid, resourceVersion, label selectors,
JSON patch, PUT or garbage collector - so the manager as a whole cannot run on it. What can be
checked is what the manager writes: the objects it creates for a queue, through its own client
and its own object builders, reach the emulator with their owners and Helm's labels, and read
back unchanged. kmock's documentation asks for "special field treatment" to be added by
inheriting; the one thing added here is what every API server does on create (a uid and a
creation time), because an ownerReference names its owner by uid.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import uuid

import kmock
import pytest
from kubernetes import client

from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi
from kube_workqueue.manager.backends.kubernetes.dispatch.backend import give_item_data
from kube_workqueue.manager.backends.kubernetes.dispatch.batches import create_job
from kube_workqueue.manager.backends.kubernetes.manifests import batch_objects as bo
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from kube_workqueue.manager.backends.kubernetes.parts import own
from tests.manager.backends.kubernetes.test_ownership import STANDARD

NS = "media"
RESOURCES = ("batch/v1/jobs", "v1/configmaps", "apps/v1/deployments",
             "workqueue.dev/v1alpha1/workqueues")  # fmt: skip


class Emulator(kmock.KubernetesEmulator):
    """kmock's emulator, giving a created object the uid and creation time the API server
    would (https://kubernetes.io/docs/reference/using-api/api-concepts/ "uid")."""

    async def _handle(self, request):
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", datetime.datetime.now(datetime.UTC).isoformat())
        return await super()._handle(request)


@pytest.fixture
def emulator():
    """(the emulator, its URL), served from a thread of its own until the test ends."""
    started: dict = {}
    ready = threading.Event()

    async def serve():
        stop = asyncio.Event()
        async with Emulator() as emu, kmock.Server(emu) as server:
            for resource in RESOURCES:
                emu.resources[resource] = {}
            started.update(emu=emu, url=str(server.url).rstrip("/"), stop=stop,
                           loop=asyncio.get_running_loop())  # fmt: skip
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(60), "kmock did not start"
    yield started["emu"], started["url"]
    started["loop"].call_soon_threadsafe(started["stop"].set)
    thread.join(60)


def api_for(url: str) -> KubeApi:
    configuration = client.Configuration()
    configuration.host = url
    configuration.api_key = {"BearerToken": "kmock"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return KubeApi(NS, configuration, qps=0, retries=0)


def owners(obj: dict) -> list[tuple[str, str, str]]:
    return [(r["kind"], r["name"], r["uid"]) for r in obj["metadata"].get("ownerReferences", [])]


def test_what_the_manager_creates_is_owned_and_labelled_on_kmock(emulator):
    _, url = emulator
    api = api_for(url)
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo-wq"}}
    deployment = api.create("deployments", body)
    own(api, "thumbs", "demo-wq", parallelism=2)  # the WorkQueue, owned by the Deployment
    queue = api.get("workqueues", "thumbs")
    assert owners(queue) == [("Deployment", "demo-wq", deployment["metadata"]["uid"])]
    assert api.owner["uid"] == queue["metadata"]["uid"]

    pod = ko.PodOptions(image="thumbnailer:1", standard_labels=ko.standard_labels("demo"))
    one = create_job(api, ko.job("thumbs", NS, "a.mp4", 1, pod))
    give_item_data(api, one, ko.config_map("thumbs", NS, "a.mp4", {"name": "a.mp4"}))
    members = [bo.member("b.mp4", {"name": "b.mp4"}, 1), bo.member("c.mp4", {"name": "c.mp4"}, 1)]
    api.create("configmaps", bo.config_map("thumbs", NS, 1, members))
    batch = create_job(api, bo.job("thumbs", NS, 1, len(members), pod, max_attempts=1))

    by_queue = ("WorkQueue", "thumbs", queue["metadata"]["uid"])
    for job in (one, batch):  # read back from the emulator, not our own bodies
        stored = api.get("jobs", job["metadata"]["name"])
        assert owners(stored) == [by_queue]
        assert STANDARD.items() <= stored["metadata"]["labels"].items()
        assert STANDARD.items() <= stored["spec"]["template"]["metadata"]["labels"].items()
        assert stored["metadata"]["labels"][ko.QUEUE_LABEL] == "thumbs"
    item_data = api.get("configmaps", one["metadata"]["name"])
    assert owners(item_data) == [("Job", one["metadata"]["name"], one["metadata"]["uid"])]
    claim = api.get("configmaps", bo.batch_name("thumbs", 1))
    assert owners(claim) == [by_queue]
