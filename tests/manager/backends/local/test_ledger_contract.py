"""The SQLite ledger of a state directory runs the ledger contract (tests/ledger_contract)."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.backends.local.ledger import SqliteLedger
from tests.ledger_contract import LedgerContract, Subject


class TestSqliteLedger(LedgerContract):
    @pytest.fixture
    def subject(self, tmp_path):
        subject = Subject(lambda: SqliteLedger(str(tmp_path / "state")).open())
        yield subject
        subject.close()
