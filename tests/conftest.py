"""Fixtures shared by every test package: free loopback ports, waiting for a condition, the
shared servers; and the hooks that print the ten tests that cost the most CPU."""

from __future__ import annotations

import pytest

# each test's CPU, and the ten costliest printed at the end of a run (support/cpu_cost.py)
from .support.cpu_cost import (  # noqa: F401  (hooks)
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_terminal_summary,
)
from .support.servers import Server, ambassadors, free_port, wait_until  # noqa: F401


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def ambassador_server():
    """`ambassador_server(root, *flags, port=None)`: a `workqueue ambassador` process."""
    yield from ambassadors(Server)


@pytest.fixture(scope="session")
def object_store():
    """moto's S3 and SQS server over HTTP on a loopback port (one per test process; each
    test makes buckets and queues of unique names)."""
    from .support.stores import ObjectStore

    store = ObjectStore()
    yield store
    store.stop()


@pytest.fixture
def s3(object_store, monkeypatch):
    """The object store, with boto3's standard configuration pointing at it in this process's
    environment (and so in every process a test starts)."""
    for key, value in object_store.env.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(key, raising=False)
    return object_store


@pytest.fixture(scope="session")
def gcs_emulator():
    """gcp-storage-emulator over HTTP on a loopback port (one per test process)."""
    from .support.buckets import GcsEmulator

    emulator = GcsEmulator()
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def azurite():
    """Azurite's blob service (one per test process; each test makes containers of unique
    names)."""
    from .support.buckets import Azurite

    server = Azurite()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azure_workload_identity(tmp_path_factory):
    """Azure workload identity as AKS sets it up, on loopback: an Entra ID stand-in
    (support/entra.py) and an Azurite taking its tokens (HTTPS, OAuth), both under a test
    authority (support/tls.py), and the projected service-account token in a file. `env` is a
    pod's environment as the webhook leaves it: where the account answers, the identity, the
    authority to trust - and no key, SAS or connection-string credential."""
    from types import SimpleNamespace

    from .support.buckets import Azurite
    from .support.entra import EntraStandIn
    from .support.tls import make_authority

    folder = tmp_path_factory.mktemp("workload-identity")
    tls = make_authority(folder)
    entra = EntraStandIn(tls)
    server = Azurite(tls=tls)
    token_file = folder / "azure-identity-token"
    token_file.write_text(entra.federated_token)
    env = {**server.endpoint_env, **entra.env(str(token_file)), "REQUESTS_CA_BUNDLE": str(tls.ca)}
    yield SimpleNamespace(azurite=server, entra=entra, token_file=token_file, env=env)
    server.stop()
    entra.stop()


@pytest.fixture(params=["s3", "gcs", "azure"])
def store(request, monkeypatch):
    """Each object store in turn, the face the contract suite sees (support/buckets.py), with
    its client's standard configuration pointing at it in this process's environment (and so in
    every process a test starts)."""
    from .support.buckets import S3Buckets

    if request.param == "s3":
        store = S3Buckets(request.getfixturevalue("s3"))
    elif request.param == "gcs":
        store = request.getfixturevalue("gcs_emulator")
    else:
        store = request.getfixturevalue("azurite")
    for key, value in store.env.items():
        monkeypatch.setenv(key, value)
    return store


@pytest.fixture(scope="session")
def redis_store():
    """A real redis-server with keyspace notifications on (each test uses keys of its own)."""
    from .support.stores import RedisServer

    server = RedisServer(notifications=True)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def nats_store():
    """A real nats-server with JetStream on (each test uses streams of its own)."""
    from .support.stores import NatsServer

    server = NatsServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def kafka_store():
    """A real broker speaking Kafka's protocol (Tansu; each test uses topics of its own)."""
    from .support.stores import KafkaServer

    server = KafkaServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server (initdb + pg_ctl in a temporary folder, a free port; one per
    test process). Tests that stop it make their own: see `own_postgres`."""
    from .support.postgres import PostgresServer

    server = PostgresServer()
    yield server
    server.close()


@pytest.fixture
def postgres(postgres_server) -> str:
    """The URL of a new, empty database of its own for this test."""
    return postgres_server.database()


@pytest.fixture
def own_postgres():
    """A PostgreSQL server of this test's own (one it may stop and start)."""
    from .support.postgres import PostgresServer

    server = PostgresServer()
    yield server
    server.close()
