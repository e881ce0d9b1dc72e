"""The ledger contract: one suite of the item's life that every ledger runs from its own tests,
as each of River's drivers calls the shared `riverdrivertest.Exercise` from its own test file.

    transitions.py  `Transitions`: each transition of an item's life, case by case
    controls.py     `Controls`: what is asked of the queue as a whole, read back and kept
    model.py        `FollowsTheModel`: random sequences against a model of the rules
    subject.py      `Subject`: what a manager does around the port, and the differences the
                    contract allows, as flags

A ledger's test file subclasses `LedgerContract` and gives it a `subject` fixture; adding a
ledger is its module and that file, and no file here changes:

    class TestSqliteLedger(LedgerContract):
        @pytest.fixture
        def subject(self, tmp_path):
            subject = Subject(lambda: SqliteLedger(str(tmp_path / "state")).open())
            yield subject
            subject.close()

The three today: tests/manager/backends/local/test_ledger_contract.py (SQLite),
tests/fleet/test_ledger_contract.py (PostgreSQL), and
tests/manager/backends/kubernetes/test_ledger_contract.py (the cluster's record).
"""

from .controls import Controls
from .model import FollowsTheModel
from .subject import Subject
from .transitions import Transitions


class LedgerContract(Transitions, FollowsTheModel, Controls):
    """Every case of the contract; a subclass gives the `subject` fixture (a `Subject`)."""


__all__ = ["LedgerContract", "Subject"]
