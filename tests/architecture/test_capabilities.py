"""Optional capabilities are declared, not probed: each is a Protocol (a source that says its
items leave by retention, a line that can wake its waiters, a backend package that can share a
ledger...) checked with `isinstance` where it is used. Two things hold that:

  * the real implementations satisfy the capabilities they have, and not those they lack - a
    renamed attribute would otherwise turn a feature off without a word (an `isinstance` that
    quietly says False);
  * no `getattr`/`hasattr` on one of the project's parts is left: the probes that remain are on
    an argparse namespace, an exception, the object itself or a value from a library, each
    kind below with why.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from kube_workqueue.ambassador.shared_snapshot import SharedSnapshot
from kube_workqueue.ambassador.sources import listed, listers, nats_stream, redis_stream, s3
from kube_workqueue.ambassador.sources.base import CountsBacklog, StreamsEvents
from kube_workqueue.manager import backends
from kube_workqueue.manager.backends.kubernetes.dispatch.backend import KubernetesBackend
from kube_workqueue.manager.backends.kubernetes.records.ledger import FollowedControl
from kube_workqueue.manager.backends.local.process import LocalBackend
from kube_workqueue.manager.fleet.options import NamesALedger
from kube_workqueue.manager.ports import (
    AnswersBy,
    GroupsItems,
    RanksItems,
    TellsRetention,
)
from kube_workqueue.manager.runtime.claims import ClaimedLine
from kube_workqueue.manager.runtime.modes import WakesWaiters
from kube_workqueue.manager.setup_parts import SharesALedger
from kube_workqueue.manager.sources.http import SourceClient
from kube_workqueue.manager.tenancy.line import Grouped
from kube_workqueue.manager.workqueue import RateLimitingQueue
from kube_workqueue.manager.workqueue.ordering import ByPriority, Fifo, GatedOrder

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "kube_workqueue"

# What a remaining probe may look at (the object's source text), and why it is no capability.
PROBED_ON = {
    "args": "an argparse namespace: a command's flags differ by command",
    "namespace": "an argparse namespace (the environment's defaults)",
    "exc": "an exception: its attributes differ by library and error",
    "self": "the object itself: a lazily made attribute",
    "self._stream": "a wrapped terminal stream: every other attribute is the stream's",
    "action.type": "an argparse action's type: a function or a class",
    "conn": "gunicorn's connection: our worker marks the ones whose head was read",
    "ctypes.CDLL('libc.so.6')": "libc's function by name",
}


def probes(root: Path = PACKAGE) -> list[tuple[str, str]]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args):  # fmt: skip
                where = f"{path.relative_to(root)}:{node.lineno}"
                found.append((where, ast.unparse(node.args[0])))
    return found


def test_no_capability_is_probed_for():
    found = probes()
    assert len(found) > 10  # the scan sees the probes that are allowed
    wrong = [f"{where}: {on}" for where, on in found if on not in PROBED_ON]
    assert wrong == [], "declare a Protocol and ask isinstance instead:\n" + "\n".join(wrong)


def test_the_scan_sees_a_probe(tmp_path):
    (tmp_path / "x.py").write_text("def f(source):\n    return getattr(source, 'backlog', None)\n")
    assert probes(tmp_path) == [("x.py:2", "source")]


def test_the_http_source_has_the_capabilities_the_manager_asks_of_it():
    client = SourceClient("http://127.0.0.1:9")
    for capability in (GroupsItems, TellsRetention, AnswersBy, RanksItems):
        assert isinstance(client, capability), capability.__name__


def test_orders_lines_and_backends_say_what_they_can():
    assert isinstance(Grouped(lambda k: None, lambda k: 0, None), GatedOrder)
    assert not isinstance(Fifo(), GatedOrder)
    assert not isinstance(ByPriority(lambda k: 0), GatedOrder)
    assert isinstance(RateLimitingQueue(), WakesWaiters)
    assert not hasattr(ClaimedLine, "poke")  # a shared ledger's line asks the database
    for name in backends.NAMES:
        package = backends.load(name)
        assert isinstance(package, SharesALedger), name
        assert "ledger" in package.Options.__dataclass_fields__, name
        assert isinstance(package.Options(), NamesALedger), name
    assert KubernetesBackend.work_outlives_manager is True
    assert LocalBackend.work_outlives_manager is False


def test_a_watched_control_is_followed_and_a_read_one_is_not():
    class Watched:
        changed = threading.Event()

    assert isinstance(Watched(), FollowedControl)
    assert not isinstance(object(), FollowedControl)


def test_the_ambassadors_sources_and_listers_say_what_they_can():
    assert isinstance(SharedSnapshot.__new__(SharedSnapshot), CountsBacklog)
    assert isinstance(SharedSnapshot.__new__(SharedSnapshot), StreamsEvents)
    source = listed.ListedSource.__new__(listed.ListedSource)
    assert isinstance(source, CountsBacklog) and isinstance(source, StreamsEvents)
    redis_log = redis_stream.StreamLister(
        {"REDIS_URL": "redis://127.0.0.1:9/0", "REDIS_STREAM": "k"}
    )  # (a client that connects at its first command)
    nats_log = nats_stream.JetStreamLister({"NATS_STREAM": "S"})
    try:
        for lister in (redis_log, nats_log):
            assert isinstance(lister, listers.Resumes) and lister.resumes is True
            assert isinstance(lister, listers.HoldsBacklog)
        assert isinstance(nats_log, listers.HoldsConnection)  # closed when the source stops
        assert not isinstance(redis_log, listers.HoldsConnection)  # (a pool, closed with it)
    finally:
        nats_log._loop.loop.call_soon_threadsafe(nats_log._loop.loop.stop)
    bucket = s3.S3Lister.__new__(s3.S3Lister)
    assert not isinstance(bucket, listers.Resumes) and not isinstance(bucket, listers.HoldsBacklog)
