"""The three ledgers as one subject: the SQLite ledger of a state directory, the PostgreSQL
ledger a fleet shares (a real server), and the cluster's ledger view (`ClusterLedger`) over its
durable record on the API-server stand-in. `Subject` does for each what its manager would do
around the port - a ledger that `ClaimsWork` is claimed before it starts an item - and nothing
else: every rule the contract checks is the ledger's own."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.ports import ClaimsWork
from tests.support.cluster import NS, apiserver  # noqa: F401  (fixture)

KINDS = ["sqlite", "postgres", "cluster"]


class Subject:
    """One ledger under the contract, and its caller's duties (see the module docstring)."""

    def __init__(self, kind: str, ledger, opener) -> None:
        self.kind = kind
        self.ledger = ledger
        self._open = opener

    @property
    def keeps_exit_details(self) -> bool:
        """Whether a finished item's exit code and error outlive its manager: not in the
        cluster's record, ~30 bytes an item, where they live with the Job until it is cleaned
        up (the one difference the contract allows: docs/architecture.md, "The ledger
        contract")."""
        return self.kind != "cluster"

    @property
    def keeps_unfinished_items(self) -> bool:
        """Whether an item that has not finished - waiting, with its priority, or running -
        outlives the manager in the ledger: not on the cluster, whose record is of what
        ended; what waits the source lists again (and the priority rules give again), what
        runs its Job says (docs/architecture.md)."""
        return self.kind != "cluster"

    def reopen(self) -> None:
        """The manager stops (its ledger closed, whatever ran left as it was) and the next one
        opens the same record, as its start does: a ledger that claims work takes what its
        owner held as its own (`owned`, which `manager.fleet.joining` calls at every start)."""
        self.ledger.close()
        self.ledger = self._open()
        if isinstance(self.ledger, ClaimsWork):
            self.ledger.owned()

    def start(self, name: str, version: str | None = None) -> int:
        """Start `name` as its manager would: claimed first where the ledger claims work."""
        if isinstance(self.ledger, ClaimsWork):
            claimed = self.ledger.claim(10_000)
            assert name in claimed, f"{name} could not be claimed: {self.ledger.state(name)}"
            for other in claimed:
                if other != name:
                    self.ledger.release(other)
        return self.ledger.start(name, f"/logs/{name}.log", version)

    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None):
        """End `name`'s run as its manager would: on the cluster the settler records the Job's
        end in the durable record before the run returns, and the ledger is told after."""
        if self.kind == "cluster":
            from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko

            attempts = self.ledger.state(name)[1]
            state = "succeeded" if succeeded else "failed"
            self.ledger.record.put(ko.item_hash("q", name), state, attempts,
                                   version=self.ledger.version_ran(name))  # fmt: skip
        self.ledger.finish(name, succeeded, exit_code, error)


@pytest.fixture(params=KINDS)
def subject(request, tmp_path):
    """Each ledger in turn (the test runs once per kind); closed at the end."""
    kind = request.param
    closing = []
    if kind == "sqlite":
        from kube_workqueue.manager.backends.local.ledger import SqliteLedger

        def opener():
            return SqliteLedger(str(tmp_path / "state")).open()
    elif kind == "postgres":
        from kube_workqueue.manager.fleet.database import Database
        from kube_workqueue.manager.fleet.ledger import PostgresLedger

        url = request.getfixturevalue("postgres")

        def opener():
            ledger = PostgresLedger(Database(url), "contract", backoff=lambda attempts: 0.0)
            ledger.join()
            return ledger
    else:
        from kube_workqueue.manager.backends.kubernetes.client.api import (
            KubeApi,
            load_configuration,
        )
        from kube_workqueue.manager.backends.kubernetes.client.cache import ClusterCache
        from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
        from kube_workqueue.manager.backends.kubernetes.records.ledger import ClusterLedger
        from kube_workqueue.manager.backends.kubernetes.records.record import RecordStore
        from kube_workqueue.manager.backends.kubernetes.steering.control import Control

        server = request.getfixturevalue("apiserver")
        config = load_configuration(server.write_kubeconfig(tmp_path / "kubeconfig"))

        def opener():
            api = KubeApi(NS, config, qps=0)
            cache = ClusterCache(api, ko.queue_selector("q"), index_label=ko.ITEM_HASH_LABEL)
            cache.start()
            assert cache.synced.wait(30)
            record = RecordStore(api, "q")
            record.load()
            control = Control(api, "q").start()  # what is asked of the queue (scale, pause)
            closing.extend([cache.stop, control.stop, api.close])
            return ClusterLedger("q", cache, record, namespace=NS, control=control)

    subject = Subject(kind, opener(), opener)
    yield subject
    subject.ledger.close()
    for close in reversed(closing):
        close()
