"""The data a source client holds for the items about to run (`manager.sources.held_data`):
pages from a name, what is kept of them and for how long, the pause after a useless page."""

from __future__ import annotations

import threading

import pytest

from kube_workqueue.manager.sources.held_data import (
    DATA_PAGE,
    HELD_MAX,
    PAGE_PAUSE,
    HeldData,
    NoPage,
)

NAMES = [f"{i:06d}" for i in range(10_000)]


class Pages:
    """A source of pages over NAMES, counting the pages asked for."""

    def __init__(self, served: bool = True) -> None:
        self.asked: list[str] = []
        self.served = served

    def __call__(self, start: str):
        self.asked.append(start)
        if not self.served:
            return None
        at = next((i for i, n in enumerate(NAMES) if n >= start), len(NAMES))
        return [(n, {"name": n}) for n in NAMES[at : at + DATA_PAGE]]


def test_a_backlog_in_line_order_costs_one_page_per_page_of_items():
    pages = Pages()
    held = HeldData(pages)
    for name in NAMES[: 4 * DATA_PAGE + 100]:
        data = held.take(name) or held.from_page(name, keep=lambda n: True)
        assert data == {"name": name}
    assert len(pages.asked) == 5
    assert len(held) == DATA_PAGE - 100  # the rest of the last page, waiting for its runs


def test_only_what_will_run_is_kept_and_never_more_than_held_max():
    pages = Pages()
    held = HeldData(pages)
    running = set(NAMES[1:100])  # taken by another run already: not kept
    assert held.from_page(NAMES[0], keep=lambda n: n not in running) == {"name": NAMES[0]}
    assert held.peek(NAMES[50]) is None and held.peek(NAMES[100]) == {"name": NAMES[100]}
    for start in range(1_000, 10_000, DATA_PAGE):  # pages far apart: the oldest held go
        held.from_page(NAMES[start], keep=lambda n: True)
        assert len(held) <= HELD_MAX
    assert held.peek(NAMES[100]) is None and held.peek(NAMES[-1]) is not None


def test_a_name_that_is_not_an_item_is_none_and_its_page_still_serves_the_next():
    pages = Pages()
    held = HeldData(pages)
    assert held.from_page("000010.5", keep=lambda n: True) is None  # gone: between two items
    assert held.take("000011") == {"name": "000011"}


def test_a_page_of_little_use_pauses_paging_for_a_while_and_a_bulk_ends_the_pause():
    pages = Pages()
    held = HeldData(pages)
    wanted = {NAMES[0], NAMES[5_000]}  # a trickle among many finished items
    held.from_page(NAMES[0], keep=wanted.__contains__)
    for _ in range(PAGE_PAUSE):  # each of the next misses is one GET (NoPage)
        with pytest.raises(NoPage):
            held.from_page(NAMES[5_000], keep=wanted.__contains__)
    assert held.from_page(NAMES[5_000], keep=wanted.__contains__) == {"name": NAMES[5_000]}
    assert len(pages.asked) == 2
    with pytest.raises(NoPage):  # that page was of little use too: paused again
        held.from_page(NAMES[7_000], keep=wanted.__contains__)
    held.bulk()  # until a listing brings a bulk of work
    held.from_page(NAMES[8_000], keep=wanted.__contains__)
    assert len(pages.asked) == 3


def test_a_source_without_pages_is_asked_once():
    pages = Pages(served=False)
    held = HeldData(pages)
    for name in NAMES[:3]:
        with pytest.raises(NoPage):
            held.from_page(name, keep=lambda n: True)
    assert pages.asked == [NAMES[0]] and held.served is False


def test_threads_that_miss_together_share_one_page():
    pages = Pages()
    held = HeldData(pages)
    results: dict[str, dict | None] = {}
    barrier = threading.Barrier(8)

    def run(name: str) -> None:
        barrier.wait()
        results[name] = held.take(name) or held.from_page(name, keep=lambda n: True)

    threads = [threading.Thread(target=run, args=(n,)) for n in NAMES[:8]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {n: {"name": n} for n in NAMES[:8]}
    assert len(pages.asked) <= 8 and len(set(pages.asked)) == len(pages.asked)
