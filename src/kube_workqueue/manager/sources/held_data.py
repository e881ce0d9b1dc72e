"""The item data a source client holds for the items about to run: what a listing brought
(`view=full`) or a page of data from a name (`startAt`), each item's used once.

Why pages: a backlog of a million must not hold a million items' data (about 700 bytes each as
Python objects) - only its names. A miss (`take` finds nothing) asks the source for a page from
that name (`DATA_PAGE` items): in a backlog the names after it are the ones that run next (a
backlog enters the line in listing order, and listings are sorted), so one request serves the
next `DATA_PAGE` runs. Only the data of items the manager will run is kept (`keep`), at most
`HELD_MAX` items' (the oldest dropped first: fetched again if they are ever asked for). A page
that brings little of use - a trickle of new names among many finished ones - makes the next
`PAGE_PAUSE` misses one GET each before a page is tried again; a listing that brings a bulk of
work (`bulk`) ends the pause.

Invariant (under `_lock`): `_held` holds data not handed out yet, each item's at most once;
after a page, at most HELD_MAX items. `_pause` counts the misses left before the next page.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

DATA_PAGE = 500  # items a page of data brings: the names about to run
HELD_MAX = 4 * DATA_PAGE  # the most items whose data is held for their run
PAGE_PAUSE = 100  # misses fetched one GET each after a page that brought little of use
USEFUL_SHARE = 0.1  # the share of a page's items that must be kept for paging to go on

# `page(start)`: (name, data) of the page from `start`, or None when the source does not
# serve such pages
PageFetch = Callable[[str], "list[tuple[str, dict]] | None"]


class NoPage(Exception):
    """No page was asked (paging is paused, or the source does not serve pages): one GET."""


class HeldData:
    def __init__(self, page: PageFetch) -> None:
        self._page = page
        self._held: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._paging = threading.Lock()  # one page at a time: threads that missed together wait
        self._pause = 0
        self.served: bool | None = None  # whether the source serves pages (None: not asked)
        self.pages = 0  # pages asked for

    def replace(self, data: dict[str, dict]) -> None:
        """Hold `data` (a full listing's, every item's), and nothing else."""
        with self._lock:
            self._held = data

    def peek(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._held.get(name)

    def take(self, name: str) -> dict[str, Any] | None:
        """`name`'s held data, handed out once; None when none is held."""
        with self._lock:
            return self._held.pop(name, None)

    def bulk(self) -> None:
        """A listing brought a bulk of work: the next miss asks for a page."""
        self._pause = 0

    def from_page(self, name: str, keep: Callable[[str], bool]) -> dict[str, Any] | None:
        """`name`'s data from a page starting at it (None: it is not an item), the data of
        the names after it that `keep` says will run held for their turn. `NoPage` when no
        page is asked (paused) or served: the caller GETs the item."""
        if self.served is False:
            raise NoPage
        with self._paging:
            held = self.take(name)
            if held is not None:  # a page another thread asked for brought it
                return held
            if self._pause > 0:
                self._pause -= 1
                raise NoPage
            self.pages += 1
            items = self._page(name)
            self.served = items is not None
            if items is None:
                raise NoPage
            mine, kept = None, {}
            for item_name, data in items:
                if item_name == name:
                    mine = data
                elif keep(item_name):
                    kept[item_name] = data
            with self._lock:
                self._held.update(kept)
                while len(self._held) > HELD_MAX:  # the oldest held go first
                    del self._held[next(iter(self._held))]
            if len(kept) < USEFUL_SHARE * (len(items) - 1):
                self._pause = PAGE_PAUSE
            return mine

    def __len__(self) -> int:
        return len(self._held)


def page_items(body: Any, start: str) -> list[tuple[str, dict]] | None:
    """(name, data) of an ItemList asked for from `start`; None when the source refused the
    page (`body` None) or did not serve it as asked (names only, malformed, or names before
    `start`: it ignored `startAt`)."""
    if body is None or not isinstance(body.get("items"), list):
        return None
    items = []
    for item in body["items"]:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                and isinstance(item.get("data"), dict)):  # fmt: skip
            return None
        if item["name"] < start:
            return None
        items.append((item["name"], item["data"]))
    return items
