"""The manager's client of the source API (Burns' source-ambassador contract, `/api/v1/items`):
list names, get one item, watch. It satisfies `manager.ports.Source`.

Listings are names only once the manager says what data it keeps (`keep_data_of`), so a poll
over a million items costs ~12 bytes a name and no stat at the source; an item's data is
fetched when it is about to run, a page of the names after it at a time (`held_data.py`). Until
then - and with `keep_data_of(None)`: `--on-change rerun` compares every listed item's version
with the one it ran at - a listing brings every item's data (`view=full`). A source that does
not serve the full view or pages of it is asked for names, and for each item with its own GET.

Groups (a tenant, `--group`'s fallback): an item's `data.group` in the full view
(`listed_groups()`).

Priorities (additive to v1): a names listing may carry `priorities`, {name: integer} for the
page's items whose priority is not 0; in the full view an item's `data.priority`; in the watch
stream an ADDED event's `priority`. The last complete listing's (and the watch events' since)
are `listed_priorities()`; a value that is not an integer is ignored.

Every call (`source_calls.py`) retries connection errors, timeouts and 5xx answers with
`retry.SOURCE_CALL`'s backoff, then raises `SourceUnavailable` - one line saying what failed
and where, never a traceback for the user. An answer that is not the API (not JSON, wrong
`kind`, wrong shape) raises `SourceProtocolError`: that is a misconfiguration (a wrong URL),
and retrying will not fix it.
A 404 for one item is not an error of the source: `get_item` returns None (the item is gone).

One `requests.Session` is kept, so polls and item fetches reuse a keep-alive connection.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a client is made: `workqueue run` never needs it
    import requests

from ..ports import (
    SourceError,
    SourceProtocolError,
    SourceUnavailable,
    WatchUnsupported,
    keep_priority,
    valid_priority,
)
from ..retry import SOURCE_CALL, Backoff
from ..tenancy.rules import valid_group
from .held_data import DATA_PAGE, HeldData, NoPage, page_items
from .promised_data import PromisedData
from .source_calls import SourceCalls, check_source_url, item_path, session_for, short_reason

__all__ = [
    "SourceClient",
    "SourceError",
    "SourceProtocolError",
    "SourceUnavailable",
    "WatchUnsupported",
]

PAGE_SIZE = 10_000
BULK_MIN = 50  # items a listing must bring to the line for pages to be tried at once


class _NoFullView(Exception):
    """The source does not serve `view=full`."""


class SourceClient(SourceCalls):
    def __init__(
        self,
        base_url: str,
        *,
        retries: int = 3,
        backoff: Backoff = SOURCE_CALL,
        timeout: float = 10.0,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        check_source_url(base_url)
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self.session = session or session_for(self.base_url)
        self.sleep = sleep
        # Whether the source serves `view=full` (None: not asked yet).
        self.full_view: bool | None = None
        # What data to keep (the manager's "needs work"); None - until told, or told so -
        # every listing brings all data (see the module docstring).
        self.keep: Callable[[str], bool] | None = None
        self.held = HeldData(self._data_page)
        # a source whose items leave by retention: every listed item's data, until settled
        self.promised = PromisedData(self._full_tail, self._one_item)
        self.requests = {"list": 0, "item": 0}  # GETs made, by kind (pages: `held.pages`)
        # The resourceVersion of the last complete listing: its first page's (the oldest: a
        # later page can only be newer), None when a page gave none (`manager.runtime.removals`).
        self.listing_version: int | None = None
        # Whether the last complete listing said its items leave only by the source's retention
        # (`metadata.removals: retention`, a log's every-record shape): then a removal is never
        # a cancellation (`manager.runtime.poller`).
        self.retention_only = False
        # What the last complete listing said of the log it reads (`metadata.log`: its
        # identity, when it last started over), or None (`ports.TellsLog`).
        self.log_facts: dict | None = None
        # Invariant: the priorities (not 0) of the last complete listing, and of the watch
        # events since; replaced whole by each listing, changed in place by an event.
        self._priorities: dict[str, int] = {}
        self._groups: dict[str, str] = {}
        # when a call must have its answer (time.monotonic()), retries included - a first
        # listing's `--source-timeout`; None: each attempt's own timeout, and its retries
        self.answer_by: float | None = None

    # -- calls -----------------------------------------------------------------------------

    def list_items(self) -> list[str]:
        """Every item name, following `continue` tokens page by page: names only once the
        manager said what data it keeps, else (and from a source that serves it) with every
        item's data, kept for `peek` and `get_item`."""
        if self.keep is None and self.full_view is not False:
            try:
                names, data, version = self._list(full=True)
            except _NoFullView:
                self.full_view = False
            else:
                self.full_view = True
                self.held.replace(data)
                self.listing_version = version
                return names
        names, _, version = self._list(full=False)
        self.listing_version = version
        if self.retention_only and self.keep is not None:
            return self.promised.keep(names, self.keep)  # (`promised_data.py`)
        return names

    def settled(self, name: str) -> None:
        """`manager.ports.SettlesItems`: `name`'s end is recorded for good."""
        self.promised.settled(name)

    def listed_priorities(self) -> dict[str, int]:
        """`manager.ports.RanksItems`: see the module docstring."""
        return self._priorities

    def listed_groups(self) -> dict[str, str]:
        """The groups (`data.group`) of the last full-view listing's items: a manager whose
        items' groups come from their data keeps the full view (`Manager`)."""
        return self._groups

    def _list(self, *, full: bool) -> tuple[list[str], dict[str, dict], int | None]:
        names: list[str] = []
        data: dict[str, dict] = {}
        priorities: dict[str, int] = {}
        groups: dict[str, str] = {}
        token = ""
        first_version: int | None = None
        pages = 0
        while True:
            params = {"limit": str(PAGE_SIZE)}
            if full:
                params["view"] = "full"
            if token:
                params["continue"] = token
            self.requests["list"] += 1
            body = self._get_json("/api/v1/items", params, expect_kind="ItemList", refused_ok=full)
            if body is None:
                raise _NoFullView()
            items = body.get("items")
            if not isinstance(items, list):
                raise SourceProtocolError(f"{self.base_url}: ItemList.items is not a list")
            for item in items:
                if isinstance(item, str) and not full:
                    names.append(item)
                elif (
                    full
                    and isinstance(item, dict)
                    and isinstance(item.get("name"), str)
                    and isinstance(item.get("data"), dict)
                ):
                    names.append(item["name"])
                    data[item["name"]] = item["data"]
                    priority = valid_priority(item["data"].get("priority"))
                    if priority:
                        priorities[item["name"]] = priority
                    group = valid_group(item["data"].get("group"))
                    if group is not None:
                        groups[item["name"]] = group
                elif full and isinstance(item, str):
                    raise _NoFullView()  # it ignored view=full: names only
                else:
                    raise SourceProtocolError(f"{self.base_url}: ItemList.items is malformed")
            ranked = body.get("priorities")
            if isinstance(ranked, dict):
                for name, value in ranked.items():
                    priority = valid_priority(value)
                    if priority:
                        priorities[name] = priority
            metadata = body.get("metadata") or {}
            if not isinstance(metadata, dict):
                metadata = {}
            version = _resource_version(metadata)
            if version is None:
                first_version = None
            elif pages == 0:
                first_version = version
            pages += 1
            token = metadata.get("continue")
            if not token:
                self.retention_only = metadata.get("removals") == "retention"
                told = metadata.get("log")
                self.log_facts = told if isinstance(told, dict) else None
                self._priorities = priorities
                if full:
                    self._groups = groups
                return names, data, first_version

    def keep_data_of(self, wanted: Callable[[str], bool] | None) -> None:
        """`manager.ports.Source.keep_data_of`: with `wanted`, listings are names only and
        data comes in pages for the items about to run; None keeps every listing's data."""
        self.keep = wanted
        if wanted is not None:
            self.held.replace({})

    def listed_work(self, needing_work: int) -> None:
        """A listing brought `needing_work` items to the line: a bulk asks for pages at once."""
        if needing_work >= BULK_MIN:
            self.held.bulk()

    def peek(self, name: str) -> dict[str, Any] | None:
        """The data held for `name` (a listing's or a page's), without using it up; None when
        none is held."""
        return self.promised.peek(name) or self.held.peek(name)

    def get_item(self, name: str) -> dict[str, Any] | None:
        """The item's `data`, or None when the source says it does not exist. Data held (from
        a listing or a page) is used once, without a request; a miss brings a page of data
        while pages are worth it (`held_data.py`), else it is one GET."""
        held = self.promised.take(name) or self.held.take(name)
        if held is not None:
            return held
        if self.keep is not None and self.full_view is not False:
            try:
                return self.held.from_page(name, self.keep)
            except NoPage:
                pass
        return self._one_item(name)

    def _one_item(self, name: str) -> dict[str, Any] | None:
        self.requests["item"] += 1
        body = self._get_json(item_path(name), None, expect_kind="Item", allow_404=True)
        if body is None:
            return None
        data = body.get("data")
        if not isinstance(data, dict):
            raise SourceProtocolError(f"{self.base_url}: Item.data for {name!r} is not an object")
        return data

    def _data_page(self, start: str) -> list[tuple[str, dict]] | None:
        params = {"view": "full", "startAt": start, "limit": str(DATA_PAGE)}
        body = self._get_json("/api/v1/items", params, expect_kind="ItemList", refused_ok=True)
        return page_items(body, start)

    def _full_tail(self, start: str) -> Iterator[tuple[str, dict]] | None:
        """(name, data) of every listed item from `start` on, page by page; None when the
        source does not serve the full view."""
        if self.full_view is False:
            return None
        params = {"view": "full", "startAt": start, "limit": str(PAGE_SIZE)}
        body = self._get_json("/api/v1/items", params, expect_kind="ItemList", refused_ok=True)
        if body is None:
            self.full_view = False
            return None

        def pages(body):
            while True:
                items = body.get("items")
                if not isinstance(items, list):
                    raise SourceProtocolError(f"{self.base_url}: ItemList.items is not a list")
                for item in items:
                    if (isinstance(item, dict) and isinstance(item.get("name"), str)
                            and isinstance(item.get("data"), dict)):  # fmt: skip
                        yield item["name"], item["data"]
                token = (body.get("metadata") or {}).get("continue")
                if not token:
                    return
                params = {"view": "full", "limit": str(PAGE_SIZE), "continue": token}
                body = self._get_json("/api/v1/items", params, expect_kind="ItemList")

        return pages(body)

    def watch(
        self, timeout_seconds: int | None = None, read_timeout: float | None = None
    ) -> Iterator[dict[str, str]]:
        """Follow the watch stream: {"type": "ADDED"|"DELETED", "item": name} events. Ends when
        the stream ends; raises SourceUnavailable when it cannot be opened or breaks, and
        WatchUnsupported when the source has no stream (the caller then polls)."""
        params = {"watch": "true"}
        if timeout_seconds:
            params["timeoutSeconds"] = str(timeout_seconds)
        import requests

        url = self.base_url + "/api/v1/items"
        try:
            with self.session.get(url, params=params, stream=True, timeout=(5, read_timeout)) as r:
                if r.status_code in (400, 404, 405, 501):
                    raise WatchUnsupported(f"{url} has no watch stream (HTTP {r.status_code})")
                if r.status_code != 200:
                    raise SourceUnavailable(f"{url}?watch=true answered HTTP {r.status_code}")
                if "ndjson" not in r.headers.get("Content-Type", ""):
                    raise WatchUnsupported(f"{url} answered watch=true with a plain response")
                for line in r.iter_lines(chunk_size=None):
                    if not line:
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        raise SourceProtocolError(f"{url}: watch stream is not JSON") from None
                    if isinstance(event, dict) and isinstance(event.get("item"), str):
                        self._note_priority(event)
                        if (
                            self.retention_only
                            and self.keep is not None
                            and event.get("type") == "ADDED"
                            and not self.promised.keep([event["item"]], self.keep)
                        ):
                            continue  # trimmed before this manager heard of it
                        yield event
        except requests.RequestException as exc:
            raise SourceUnavailable(f"watch stream of {url} broke: {short_reason(exc)}") from None

    def _note_priority(self, event: dict) -> None:
        name, kind = event["item"], event.get("type")
        priority = valid_priority(event.get("priority")) if kind == "ADDED" else None
        # (a dict's get, set and pop are atomic: readers only look names up)
        keep_priority(self._priorities, name, priority)


def _resource_version(metadata: dict) -> int | None:
    """A listing's `metadata.resourceVersion` as a number, None when absent or not one."""
    try:
        return int(metadata.get("resourceVersion"))
    except (TypeError, ValueError):
        return None
