"""The cluster's ledger view (`ClusterLedger`) over its durable record, on the API-server
stand-in, runs the ledger contract (tests/ledger_contract) - with the two differences the
contract allows it, and its settler's duty around the port."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi, load_configuration
from kube_workqueue.manager.backends.kubernetes.client.cache import ClusterCache
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from kube_workqueue.manager.backends.kubernetes.records.ledger import ClusterLedger
from kube_workqueue.manager.backends.kubernetes.records.record import RecordStore
from kube_workqueue.manager.backends.kubernetes.steering.control import Control
from tests.ledger_contract import LedgerContract, Subject
from tests.support.cluster import NS, apiserver  # noqa: F401  (fixture)

QUEUE = "q"


class ClusterSubject(Subject):
    keeps_exit_details = False  # they live with the Job, not in the record
    keeps_unfinished_items = False  # the record is of what ended

    def ended(self, name: str, succeeded: bool) -> None:
        """The settler records the Job's end in the durable record before the run returns,
        and the ledger is told after."""
        attempts = self.ledger.state(name)[1]
        state = "succeeded" if succeeded else "failed"
        self.ledger.record.put(ko.item_hash(QUEUE, name), state, attempts,
                               version=self.ledger.version_ran(name))  # fmt: skip


class TestClusterLedger(LedgerContract):
    @pytest.fixture
    def subject(self, apiserver, tmp_path):  # noqa: F811
        config = load_configuration(apiserver.write_kubeconfig(tmp_path / "kubeconfig"))
        closing = []

        def opener():
            api = KubeApi(NS, config, qps=0)
            cache = ClusterCache(api, ko.queue_selector(QUEUE), index_label=ko.ITEM_HASH_LABEL)
            cache.start()
            assert cache.synced.wait(30)
            record = RecordStore(api, QUEUE)
            record.load()
            control = Control(api, QUEUE).start()  # what is asked of the queue (scale, pause)
            closing.extend([cache.stop, control.stop, api.close])
            return ClusterLedger(QUEUE, cache, record, namespace=NS, control=control)

        subject = ClusterSubject(opener)
        yield subject
        subject.close()
        for close in reversed(closing):
            close()
