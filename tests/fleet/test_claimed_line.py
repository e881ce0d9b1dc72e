"""The dispatcher's line on a shared ledger (`runtime.claims.ClaimedLine`) against a real
PostgreSQL, counted in statements: a worker that keeps its slot gets its next item from the
finish it just wrote, and asks the ledger nothing more; a worker with no slot yet claims for
the free slots in the one statement that tells it whether anything waits."""

from __future__ import annotations

from kube_workqueue.manager.runtime.claims import ClaimedLine
from kube_workqueue.manager.workqueue.rate_limiters import ItemExponentialFailureRateLimiter


def _counted(ledger) -> list[str]:
    """The statements `ledger` sends from now on, by name - but the queue's settings, read at
    most twice a second whatever the line does."""
    said: list[str] = []

    def hook(name: str, phase: str, cursor) -> None:
        if phase == "before" and name != "settings":
            said.append(name)

    ledger.db.statement_hook = hook
    return said


def _line(ledger, free: list[int]) -> ClaimedLine:
    return ClaimedLine(ledger, ItemExponentialFailureRateLimiter(0.1, 1.0), lambda: free[0])


def test_a_kept_slot_takes_its_next_item_from_the_finish_it_wrote(open_ledger):
    a = open_ledger("a")
    free = [1]  # one slot free beside the one the worker holds
    line = _line(a, free)
    a.see(["x", "y", "z"])
    assert line.get() == ("x", False)  # y claimed with it, for the free slot
    free[0] = 0
    a.start("x", "log")
    said = _counted(a)
    a.finish("x", True, 0, None)
    assert said == ["finish"]  # y waits here: the finish claims nothing
    assert line.waiting_for_slot() is True and line.get() == ("y", False)
    assert said == ["finish"]
    a.start("y", "log")
    a.finish("y", True, 0, None)  # nothing waits here: the finish claims for the slot
    assert said == ["finish", "start", "finish_and_claim"]
    assert line.waiting_for_slot() is True and line.get() == ("z", False)
    assert said == ["finish", "start", "finish_and_claim"]  # z came with the finish


def test_a_finish_that_found_the_line_empty_spares_the_slot_a_second_look(open_ledger):
    a = open_ledger("a")
    line = _line(a, [0])
    a.see(["x"])
    assert line.get() == ("x", False)
    a.start("x", "log")
    said = _counted(a)
    a.finish("x", True, 0, None)
    assert line.waiting_for_slot() is False
    assert said == ["finish_and_claim"]  # no claim of its own after the finish's
    assert line.waiting_for_slot() is False and said[-1] == "claim"  # a later ask asks


def test_a_worker_without_a_slot_claims_for_the_free_ones_in_one_statement(open_ledger):
    a = open_ledger("a")
    line = _line(a, [2])
    a.see(["x", "y", "z"])
    said = _counted(a)
    assert line.wait_for_key() is True
    assert said == ["claim"]  # not a look, then a claim
    assert [line.get()[0] for _ in range(2)] == ["x", "y"] and said == ["claim"]
    assert a.holds("x") and a.holds("y") and not a.holds("z")


def test_a_run_that_holds_nothing_hears_of_an_end_elsewhere_at_once(open_ledger):
    """The tail of a drain: a `--once` run whose manager holds nothing looks at others' ends
    at once and then often - not at its busy cadence (here 60 s, which the wait below would
    never reach)."""
    import threading

    from kube_workqueue.manager.runtime.others import OthersFollower
    from kube_workqueue.manager.runtime.reconciler import Result
    from kube_workqueue.manager.runtime.run_report import RunReport
    from tests.support.servers import wait_until

    a, b = open_ledger("a"), open_ledger("b")
    a.see(["x", "y"])
    report = RunReport(targets=["x", "y"], started=0.0)
    follower = OthersFollower(a, lambda name, state: False)
    stop = threading.Event()
    following = threading.Thread(target=follower.follow, args=(report, stop, 60.0), daemon=True)
    following.start()
    try:
        for name in b.claim(2):
            b.start(name, "log")
            b.finish(name, True, 0, None)
        wait_until(lambda: len(report.results) == 2, timeout=30)
        assert report.results == {"x": Result.ELSEWHERE, "y": Result.ELSEWHERE}
    finally:
        stop.set()
        following.join(timeout=30)
