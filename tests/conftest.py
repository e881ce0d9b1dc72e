"""Fixtures shared by every test package: free loopback ports, waiting for a condition."""

from __future__ import annotations

import pytest

from .support.servers import Server, free_port, wait_until  # noqa: F401  (re-exported)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def ambassador_server():
    servers = []

    def start(root, *extra: str, port: int | None = None) -> Server:
        server = Server(root, port or free_port(), extra)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()
