"""The ledger a fleet shares, on a real PostgreSQL, runs the ledger contract
(tests/ledger_contract)."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.fleet.database import Database
from kube_workqueue.manager.fleet.ledger import PostgresLedger
from tests.ledger_contract import LedgerContract, Subject


class TestPostgresLedger(LedgerContract):
    @pytest.fixture
    def subject(self, postgres):
        def opener():
            ledger = PostgresLedger(Database(postgres), "contract", backoff=lambda attempts: 0.0)
            ledger.join()
            return ledger

        subject = Subject(opener)
        yield subject
        subject.close()
