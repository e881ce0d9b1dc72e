"""The chart's tests reuse the Kubernetes fixtures (the stand-in, the kubelet) and the e2e ones."""

from __future__ import annotations

import pytest

from ..e2e.conftest import marker_worker  # noqa: F401  (fixtures)
from ..kube.conftest import apiserver  # noqa: F401
from ..kube.kubelet import Kubelet


@pytest.fixture
def kube_cluster(apiserver, tmp_path):  # noqa: F811
    Kubelet(apiserver)
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig")

    class Cluster:
        @staticmethod
        def args(source, worker, *extra):
            return [
                "manager",
                "--backend",
                "kubernetes",
                "--source",
                source,
                "--namespace",
                "media",
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

    return Cluster
