"""The Kubernetes backend's tests run against the API-server stand-in (`tests.support.cluster`)
and, end to end, with the e2e fixtures (videos, a marker worker, ffmpeg)."""

import pytest

from tests.e2e.conftest import ffmpeg_env, marker_worker, sample_videos  # noqa: F401  (fixtures)
from tests.support.cluster import apiserver, cluster, kube  # noqa: F401  (fixtures)
from tests.support.servers import free_port


@pytest.fixture
def ambassador_server():
    """The items API served in this process (`tests.support.in_process_ambassador`): the subject
    here is the Kubernetes backend, which reads it over real HTTP as it would a real one; the
    ambassador's process is the ambassador's tests' subject."""
    from tests.support.in_process_ambassador import InProcessAmbassador

    servers = []

    def start(root, *extra: str, port: int | None = None) -> InProcessAmbassador:
        server = InProcessAmbassador(root, port or free_port(), extra)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()
