"""The order of the line, as a strategy the dedup queue holds (client-go's `Queue[T]` under its
`Typed[T]`: Push, Pop, Touch, Len).

    Fifo        first in, first out: a deque, 8 bytes a waiting key (the default)
    ByPriority  higher priority first, first come first served within one priority: a heap of
                (*line_key(priority, arrival), key) - ~180 bytes a waiting key with the
                queue's dedup set, against ~50 for the FIFO (bench/priorities.py)

`line_key(priority, arrival)` is THE ordering function: the queue orders its keys by it (their
arrival is the order they entered the line), and `manager.views.schedule.line_of` orders a
ledger's pending rows by it (their arrival is when the item was first seen) - so `status`
positions, ETAs, the dashboard and the batches formed from the head of the line all follow one
order - on one manager. A fleet on a shared ledger takes its items by a claim the database
orders (priority, then `seq`, the row's arrival: `manager/fleet/statements.py`), the same
rule written for the index; a re-run item gets a new `seq`, as it gets a new first-seen time.
Priorities never preempt: they choose what starts next, nothing running is stopped.
There is no ageing: a low priority waits while higher ones keep coming (an aged order would
change with the clock, and positions shown a second ago would be wrong now); the stability
calculator says when workers do not keep up, which is when a low priority starves.

A waiting key whose priority changes moves (`touch`), keeping its arrival: it goes where it
would be had it always had its new priority. The heap drops the old entry lazily: entries whose
(priority, arrival) is no longer the key's current one are skipped when they reach the top, and
the heap is rebuilt when such stale entries outnumber the live ones.

What the queue asks of a strategy is declared here, once: `Order` (push, pop, touch, len,
iteration and `moves`) and `GatedOrder`, an order that may hold its keys (the tenants' line,
`manager.tenancy.line.Grouped`). The queue checks which it was given by its protocol, never by
probing for a method.

The caller's duty (the queue's): call `push` only for a key not waiting, `touch` only for one
waiting, and hold the queue's lock around every call - a strategy has no lock of its own. A
strategy whose `moves` is False says a touch never moves a key: the queue skips the call, so a
FIFO pays nothing on a dedup add for the priorities it does not use.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from itertools import count
from typing import Protocol, runtime_checkable


class Order(Protocol):
    """The line's order, as the queue uses it (client-go's `Queue[T]`). Truthy while a key may
    be handed out; `len` is how many wait."""

    moves: bool  # whether `touch` may move a key (False: the queue never calls it)

    def push(self, key: Hashable) -> None: ...

    def pop(self) -> Hashable: ...

    def touch(self, key: Hashable) -> None: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Hashable]: ...


@runtime_checkable
class GatedOrder(Order, Protocol):
    """An order that may hold keys that wait (a group at its limit, a rate spent): truthy only
    while one may be handed out NOW, told when the work of each key it handed out `ended`, and
    waited on at most `ready_in()` seconds (None: until something wakes the queue)."""

    def ended(self, key: Hashable) -> None: ...

    def ready_in(self) -> float | None: ...


def line_key(priority: int, arrival: float) -> tuple[int, float]:
    """Where an item stands in the line: smaller stands first (higher priority, then earlier
    arrival). Ties - the same priority and arrival - are broken by the caller (by name)."""
    return (-priority, arrival)


class Fifo(deque):
    """First in, first out: a deque whose `push` and `pop` are its own `append` and `popleft`,
    so a FIFO line costs C calls, nothing more - the Python methods that once wrapped them
    made add + get + done 15% slower than a bare deque (`bench/workqueue.py`).
    Invariant: each waiting key once, in arrival order (the queue's dedup set sees to it)."""

    __slots__ = ()
    push = deque.append
    pop = deque.popleft  # the head
    moves = False  # a touched key keeps its place: the queue does not even call `touch`

    def touch(self, key: Hashable) -> None:
        """A waiting key added again: its place does not change."""

    def __iter__(self) -> Iterator[Hashable]:
        """The waiting keys, head first (a copy: the line may change while it is read)."""
        return iter(list(deque.__iter__(self)))


class ByPriority:
    """Higher priority first; first come first served within one (see the module docstring).

    `priority_of(key)` is asked when a key is pushed and when it is touched; it must be cheap
    (the manager's is a dict lookup in the ledger's mirror)."""

    moves = True  # a touched key may move: the queue calls `touch` on every dedup add

    def __init__(self, priority_of: Callable[[Hashable], int]) -> None:
        self.priority_of = priority_of
        self._arrivals = count()
        # Invariant: every waiting key maps to its live entry, (-priority, arrival, key) - the
        # line key and the key in one flat tuple; the heap holds every live entry once, plus
        # stale ones (a moved key's old place) skipped when they reach the top.
        self._live: dict[Hashable, tuple[int, float, Hashable]] = {}
        self._heap: list[tuple[int, float, Hashable]] = []

    def push(self, key: Hashable) -> None:
        self._place(key, next(self._arrivals))

    def touch(self, key: Hashable) -> None:
        """A waiting key added again: it moves when its priority changed."""
        negated, arrival, _ = self._live[key]
        if -negated != self.priority_of(key):
            self._place(key, arrival)
            if len(self._heap) > 2 * len(self._live) + 64:
                self._heap = list(self._live.values())
                heapq.heapify(self._heap)

    def _place(self, key: Hashable, arrival: float) -> None:
        entry = (*line_key(self.priority_of(key), arrival), key)
        self._live[key] = entry
        heapq.heappush(self._heap, entry)

    def pop(self) -> Hashable:
        while True:
            entry = heapq.heappop(self._heap)
            key = entry[2]
            if self._live.get(key) is entry:
                del self._live[key]
                return key

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Hashable]:
        """The waiting keys, head first (a sort of the live entries: for views, not the hot
        path)."""
        return iter([entry[2] for entry in sorted(self._live.values())])

    @classmethod
    def after(cls, waiting: Fifo | ByPriority, priority_of: Callable[[Hashable], int]):
        """A priority order holding what `waiting` holds; within one priority, in the order
        they waited there."""
        ordered = cls(priority_of)
        for key in waiting:
            ordered.push(key)
        return ordered
