"""Pytest fixtures of a cluster: a running API-server stand-in, official-client APIs bound to it,
and a `cluster` with a test kubelet and the manager's command line for it. A test folder that
needs them imports them into its conftest."""

from __future__ import annotations

import pytest

from .apiserver import ApiServer
from .kubelet import QUICK_BACKOFF, Kubelet

NS = "media"


@pytest.fixture
def apiserver():
    server = ApiServer(history=50).start()
    yield server
    server.stop()


@pytest.fixture
def kube(apiserver):
    from kubernetes import client

    api_client = client.ApiClient(apiserver.client_configuration())

    class Apis:
        batch = client.BatchV1Api(api_client)
        core = client.CoreV1Api(api_client)
        coordination = client.CoordinationV1Api(api_client)
        apps = client.AppsV1Api(api_client)

    yield Apis
    api_client.close()


@pytest.fixture
def cluster(apiserver, tmp_path):
    kubelet = Kubelet(apiserver, backoff=QUICK_BACKOFF)
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig")

    class Cluster:
        server = apiserver

        @staticmethod
        def args(source, worker, *extra):
            return [
                "manager",
                "--backend",
                "kubernetes",
                "--source",
                source,
                "--namespace",
                NS,
                "--queue",
                "thumbs",
                "--image",
                "thumbnailer:1.0",
                "--command",
                str(worker.path),
                "--kubeconfig",
                kubeconfig,
                "--kube-api-qps",
                "0",
                *extra,
            ]

        @staticmethod
        def queue_args():
            """The flags naming the queue, for `status` and `retry`."""
            return [
                "--backend",
                "kubernetes",
                "--namespace",
                NS,
                "--queue",
                "thumbs",
                "--kubeconfig",
                kubeconfig,
            ]

        @staticmethod
        def objects(resource):
            return [
                o for (r, n, _), o in apiserver.store.objects.items() if r == resource and n == NS
            ]

    Cluster.kubelet = kubelet
    return Cluster
