"""PromisedData: a listed item's data is taken with its listing and held until it is settled."""

from __future__ import annotations

from kube_workqueue.manager.sources.promised_data import ONE_BY_ONE, PromisedData


class Log:
    """A log's items, as the full view's tail and single GETs serve them (counted)."""

    def __init__(self, names):
        self.items = {n: {"n": n} for n in names}
        self.tails, self.gets = [], []

    def tail(self, start):
        self.tails.append(start)
        return iter([(n, d) for n, d in sorted(self.items.items()) if n >= start])

    def one(self, name):
        self.gets.append(name)
        return self.items.get(name)


def names(count, first=0):
    return [f"{i:04}" for i in range(first, first + count)]


def test_new_names_bring_their_data_in_one_tail_and_keep_it_after_a_trim():
    log = Log(names(20))
    promised = PromisedData(log.tail, log.one)
    assert promised.keep(names(20), lambda n: True) == names(20)
    assert log.tails == ["0000"] and not log.gets
    log.items.clear()  # trimmed, every one
    assert promised.take("0003") == {"n": "0003"}
    assert promised.keep([], lambda n: n != "0003") == []  # running: not wanted, still held
    assert promised.take("0003") == {"n": "0003"}  # a retry still has it
    promised.settled("0003")
    assert promised.take("0003") is None
    assert len(promised) == 19 and log.tails == ["0000"]  # nothing fetched again


def test_a_name_trimmed_between_the_listing_and_its_data_is_left_out():
    log = Log(names(20))
    promised = PromisedData(log.tail, log.one)
    listed = names(20)
    del log.items["0005"], log.items["0006"]  # trimmed after the names were listed
    kept = promised.keep(listed, lambda n: True)
    assert kept == [n for n in listed if n not in ("0005", "0006")]


def test_only_wanted_names_are_held_and_what_is_no_longer_wanted_goes():
    log = Log(names(20))
    promised = PromisedData(log.tail, log.one)
    promised.keep(names(20), lambda n: int(n) % 2 == 0)
    assert len(promised) == 10
    promised.keep(names(20), lambda n: int(n) < 4)  # done elsewhere: let go, never handed
    assert sorted(promised._data) == names(4)  # 0001 and 0003 wanted now: taken


def test_a_few_new_names_are_a_get_each_not_a_page():
    log = Log(names(20))
    promised = PromisedData(log.tail, log.one)
    assert promised.keep(["0007"], lambda n: True) == ["0007"]
    assert log.gets == ["0007"] and not log.tails
    assert promised.keep(names(ONE_BY_ONE, 10), lambda n: True) == names(ONE_BY_ONE, 10)
    assert not log.tails


def test_without_a_full_view_each_new_name_is_a_get():
    log = Log(names(20))
    promised = PromisedData(lambda start: None, log.one)
    assert promised.keep(names(20), lambda n: True) == names(20)
    assert sorted(log.gets) == names(20)
