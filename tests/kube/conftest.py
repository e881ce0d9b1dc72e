"""Fixtures: a running API-server stand-in and official-client APIs bound to it."""

from __future__ import annotations

import pytest

from ..e2e.conftest import ffmpeg_env, marker_worker, sample_videos  # noqa: F401  (fixtures)
from .apiserver import ApiServer


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

    yield Apis
    api_client.close()
