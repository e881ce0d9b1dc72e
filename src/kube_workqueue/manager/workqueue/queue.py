"""The dedup work queue: a dirty set, a processing set and a line (client-go's workqueue.Type).

    add(k) ──► dirty ──get()──► processing ──done(k)──► gone, or back in the line once
                                                       if k was added again meanwhile

The line's order is a strategy (`ordering.py`, client-go's `Queue[T]`): FIFO by default, or
by priority (`order=ByPriority(...)`, or `use_order` on a running queue: what waits keeps its
order within each priority). A key added again while it waits is touched: a priority order
moves it when its priority changed.

Rules every caller can rely on:
  * Stingy: a key waiting in the line is there once; adding it again is a no-op (dedup).
  * One worker per key: a key a worker holds is never handed to another worker. Adding it while
    held marks it dirty, and `done()` puts it back in the line exactly once, however many adds
    came meanwhile - so a change is never lost and never processed twice at once.
  * Fair: distinct keys come out in the line's order (FIFO: the order they were first added).
  * Shut-down: adds are ignored, `get()` hands out what is still queued and then `(None, True)`,
    every blocked `get()` wakes; `shut_down_with_drain()` also waits until no key is processing.

The caller's duty: call `done(key)` exactly once for every key `get()` returned, success or not.

Keys are any hashable value; the manager uses item names. Time comes from the injected clock and
is read only when metrics are on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from sys import getsizeof
from typing import Any

from .clock import RealClock
from .events import Event, Observer
from .metrics import FOLD_AT
from .ordering import Fifo, GatedOrder, Order

# A dict that once held many keys keeps its table after they leave; past this many bytes, a
# worker about to wait in get() swaps it for a fresh copy, so a drained queue holds almost
# nothing. (Only the dirty table grows with the backlog; the processing table is bounded by the
# number of workers.)
_COMPACT_ABOVE_BYTES = 64 * 1024


class Queue:
    """A work queue with dedup and one-worker-per-key semantics (see the module docstring).

    `name` labels the metrics; `clock` is a RealClock or FakeClock; `metrics_provider` (for
    instance a `PrometheusMetricsProvider`) turns metrics on; `observer` is told what each call did
    (see events.py).
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Any = None,
        metrics_provider: Any = None,
        observer: Observer | None = None,
        order: Order | None = None,
    ) -> None:
        self.name = name
        self.clock = clock if clock is not None else RealClock()
        self._cond = threading.Condition(threading.Lock())
        # Invariant: every key in _line (the line: an `ordering` strategy) is in _dirty and not
        # in _processing, and appears once.
        self._line: Order = order if order is not None else Fifo()
        self._touches = self._line.moves  # whether touch() may move a key
        # a line that may hold its keys (`ordering.GatedOrder`: a group at its limit)
        self._gated = isinstance(self._line, GatedOrder)
        # Invariant: the keys that need processing - those in _line plus those held by a worker
        # that were added again since get() (they go back to _line at done()). Each maps to the
        # time it became dirty when metrics are on, else to None: the set and the metric's
        # timestamps are one table, so metrics add no lookups of their own.
        self._dirty: dict[Any, float | None] = {}
        # Invariant: the keys a worker holds right now, each held by exactly one worker; each
        # maps to the time get() handed it out when metrics are on, else to None.
        self._processing: dict[Any, float | None] = {}
        self._shutting_down = False
        self._drain = False
        self._metrics = metrics_provider.new_queue_metrics(self) if metrics_provider else None
        self._observer = observer

    # -- producer side -------------------------------------------------------------------------

    def add(self, key: Any) -> None:
        """Mark `key` as needing processing (see the rules in the module docstring)."""
        with self._cond:
            if self._shutting_down:
                if self._observer is not None:
                    self._observer(Event.IGNORED_SHUTTING_DOWN, key, None)
                return
            if key in self._dirty:
                if self._touches and key not in self._processing:
                    self._line.touch(key)  # a priority order moves it if its priority changed
                if self._observer is not None:
                    self._observer(Event.DEDUPLICATED, key, {"held": key in self._processing})
                return
            metrics = self._metrics
            self._dirty[key] = None if metrics is None else metrics.now()
            if key in self._processing:
                if self._observer is not None:
                    self._observer(Event.MARKED_FOR_REDELIVERY, key, None)
                return
            self._line.push(key)
            if self._observer is not None:
                self._observer(Event.ENQUEUED, key, None)
            self._cond.notify()

    def __len__(self) -> int:
        """Keys waiting in the line right now (informational: it may change at once)."""
        return len(self._line)

    def has_waiting(self) -> bool:
        """Whether a key waits in the line that may be handed out now (the manager's `Line`
        protocol asks it so; in a grouped line a key whose group is held does not count)."""
        return bool(self._line)

    # a worker that holds a slot asks whether a key waits for it: here, the same question
    waiting_for_slot = has_waiting

    def use_order(self, make: Callable[[Order], Order]) -> None:
        """Order the line with `make(waiting)` from now on: `make` is given the current
        strategy (iterable, head first) and returns the new one holding the same keys - for
        instance `lambda w: ByPriority.after(w, priority_of)`."""
        with self._cond:
            self._line = make(self._line)
            self._touches = self._line.moves
            self._gated = isinstance(self._line, GatedOrder)

    def poke(self) -> None:
        """What holds keys changed (a group's limit or rate): waiters look again."""
        with self._cond:
            self._cond.notify_all()

    def touch(self, key: Any) -> None:
        """`key`'s priority may have changed: a waiting key moves to its new place (a no-op for
        a key not waiting, and in a FIFO)."""
        with self._cond:
            if self._touches and key in self._dirty and key not in self._processing:
                self._line.touch(key)

    def waiting(self) -> list[Any]:
        """The keys waiting in the line, head first (a copy: for views and tests)."""
        with self._cond:
            return list(self._line)

    # -- consumer side -------------------------------------------------------------------------

    def get(self) -> tuple[Any, bool]:
        """Block until a key is available; return `(key, False)`, or `(None, True)` once the
        queue is shut down and nothing is left. The caller must call `done(key)`."""
        with self._cond:
            while not self._line:  # (one look a turn: a grouped line's look is not free)
                if self._shutting_down:
                    return None, True
                # About to sleep: the idle moment, off the hot path, to shed a backlog's table.
                if getsizeof(self._dirty) > _COMPACT_ABOVE_BYTES:
                    self._dirty = dict(self._dirty)
                self._cond.wait(self._line.ready_in() if self._gated else None)
            key = self._line.pop()
            added = self._dirty.pop(key)
            metrics = self._metrics
            if metrics is None:
                self._processing[key] = None
            else:  # recording inlined (it runs on every item): see QueueMetrics
                now = self._processing[key] = metrics.now()
                metrics.waits.append(now - added)
            return key, False

    def wait_for_key(self) -> bool:
        """Block until a key waits in the line (True) or the queue is shut down with none
        left (False). For a single consumer that must take something else first - a capacity
        slot - before it takes the key: its `get()` then returns at once, the head of the line
        (no other consumer can take it meanwhile)."""
        with self._cond:
            while not self._line and not self._shutting_down:
                if getsizeof(self._dirty) > _COMPACT_ABOVE_BYTES:
                    self._dirty = dict(self._dirty)
                self._cond.wait(self._line.ready_in() if self._gated else None)
            return bool(self._line)

    def done(self, key: Any, _fold_at=FOLD_AT) -> None:
        """Mark `key` as finished. If it was added while held, it goes back in the line once."""
        with self._cond:
            started = self._processing.pop(key, None)
            if started is not None:  # only with metrics on
                metrics = self._metrics
                works = metrics.works
                works.append(metrics.now() - started)
                if len(works) >= _fold_at:
                    metrics.fold()
            if self._gated:  # its group runs one fewer: a held group may start one now
                self._line.ended(key)
                self._cond.notify_all()
            if key in self._dirty:
                self._line.push(key)
                if self._observer is not None:
                    self._observer(Event.REDELIVERED, key, None)
                self._cond.notify()
            elif self._drain and not self._processing:
                self._cond.notify_all()

    # -- shut-down -----------------------------------------------------------------------------

    def shut_down(self) -> None:
        """Stop accepting adds and wake every blocked `get()`; queued keys are still handed out."""
        with self._cond:
            self._drain = False
            self._shutting_down = True
            self._cond.notify_all()

    def shut_down_with_drain(self) -> None:
        """Like `shut_down()`, then wait until no key is being processed. The caller's duty: keep
        workers calling `get()`/`done()` meanwhile, or this never returns."""
        with self._cond:
            self._drain = True
            self._shutting_down = True
            self._cond.notify_all()
            while self._processing and self._drain:
                self._cond.wait()

    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    # -- introspection (tests, the lab, the manager's status) ----------------------------------

    def processing_count(self) -> int:
        with self._cond:
            return len(self._processing)

    def dirty_count(self) -> int:
        with self._cond:
            return len(self._dirty)

    def _metrics_snapshot(self) -> tuple[int, list[float]]:
        """For the metrics collector: the depth and the start times of held keys, the pending
        durations folded into the histograms first."""
        with self._cond:
            self._metrics.fold()
            return len(self._dirty), [t for t in self._processing.values() if t is not None]
