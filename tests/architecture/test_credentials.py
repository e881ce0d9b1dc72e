"""No source's secret in a worker: every environment variable the queue's own parts read is
declared - a credential (withheld from every local worker, `--worker-env NAME` passes one on)
or a setting (an endpoint, a protocol: nothing to hide) - in one place, the source registry's
lines (`ambassador.sources.registry`), beside the manager's own (`backends.local.spawn`).

A source or cloud client that starts reading a variable nobody declared fails here, so a new
password cannot reach workers by being forgotten (it did: `REDIS_PASSWORD`, `NATS_*`,
`KAFKA_SASL_*` and `AZURE_STORAGE_*` reached every worker of `workqueue run`)."""

from __future__ import annotations

import ast
from pathlib import Path

from kube_workqueue.ambassador.sources import registry
from kube_workqueue.manager.backends.local import spawn

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_workqueue"
# the parts whose reads are the queue's own: the sources, the cloud clients, the shared ledger
READERS = [SRC / "ambassador", SRC / "clouds", SRC / "manager" / "fleet"]
# read by the ambassador for itself: limits and its metrics' folder, no secret in any
AMBASSADOR_OWN = {
    "PROMETHEUS_MULTIPROC_DIR",
    "WORKQUEUE_AMBASSADOR_HEAD_TIMEOUT",
    "WORKQUEUE_AMBASSADOR_MAX_REQUEST_LINE",
    "WORKQUEUE_AMBASSADOR_MAX_HEADER_BYTES",
}


def variables_read(path: Path) -> set[str]:
    """The names `path` reads from the environment by a literal: `os.environ.get("X")`,
    `os.environ["X"]`, `os.getenv("X")`, and a module constant named `ENV_*` or a tuple of
    names looped over (`for variable in ("AWS_ENDPOINT_URL_S3", ...)`)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            found |= _literals(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            reads = (func.attr == "get" and _is_environ(func.value)) or (
                func.attr == "getenv" and isinstance(func.value, ast.Name)
            )
            if reads and node.args:
                found |= _literals(node.args[0])
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):
            names = set().union(*(_literals(e) for e in node.iter.elts))
            if any(n.isupper() and "_" in n for n in names):
                found |= names
    return {name for name in found if name.isupper()}


def _is_environ(node: ast.AST) -> bool:
    """`os.environ` (a WSGI request's `environ` is not the process's)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")  # fmt: skip


def _literals(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    return set()


def declared() -> tuple[set[str], set[str]]:
    credentials = {name for entry in registry.BUILT_IN for name in entry.credentials}
    settings = {name for entry in registry.BUILT_IN for name in entry.settings}
    return credentials, settings


def test_every_variable_the_queue_s_parts_read_is_declared():
    credentials, settings = declared()
    known = credentials | settings | spawn.LIBPQ | spawn.MANAGER_OWN | AMBASSADOR_OWN
    for folder in READERS:
        for path in folder.rglob("*.py"):
            undeclared = variables_read(path) - known
            assert not undeclared, (
                f"{path.relative_to(SRC)} reads {sorted(undeclared)} from the environment: "
                "declare each in its source's registry line (credentials= or settings=)"
            )


def test_the_scan_finds_what_the_clients_read():
    """The scan itself sees the reads that made this test necessary."""
    sources = SRC / "ambassador" / "sources"
    assert "REDIS_PASSWORD" in variables_read(sources / "redis_client.py")
    assert {"NATS_USER", "NATS_PASSWORD", "NATS_TOKEN"} <= variables_read(
        sources / "nats_client.py"
    )
    assert {"KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"} <= variables_read(
        sources / "kafka_client.py"
    )
    assert "AZURE_STORAGE_CONNECTION_STRING" in variables_read(SRC / "clouds" / "azure_client.py")
    assert "AWS_ENDPOINT_URL" in variables_read(sources / "s3.py")


def test_every_credential_is_withheld_from_workers_and_no_setting_is():
    credentials, settings = declared()
    assert credentials == set(registry.credential_variables())
    assert not credentials & settings
    env = {name: "x" for name in credentials | settings | {"PATH", "HOME"}}
    given = spawn.worker_environment(env, registry.credential_variables())
    assert set(given) == settings | {"PATH", "HOME"}
    passed = spawn.worker_environment(env, registry.credential_variables(), ["REDIS_PASSWORD"])
    assert set(passed) == settings | {"PATH", "HOME", "REDIS_PASSWORD"}
