"""The source of `workqueue run`: the ambassador's own source (a folder, a bucket, a Redis set),
in-process.

`workqueue run URL -- CMD` needs a source for the manager. It used to serve the ambassador app
over HTTP on a loopback port and have the manager poll it: Flask, waitress and requests were
imported (a third of a second before the first item), and every listing was serialised to
JSON and parsed back, all in the one interpreter the dispatch threads share. The manager needs
none of that from a source in its own process: `FolderSource` satisfies `manager.ports.Source`
by reading the very same source the ambassador would serve (the registry's: for a folder
`ambassador.sources.FilesystemSource` - its settling, hostile-name rules, snapshot versions and
item data with `version`; for a bucket or a Redis set their `ListedSource`) directly. The HTTP
API stays the contract for every other client; `workqueue ambassador` serves it.

    list_items   the snapshot's names; `listing_version` its version (the resourceVersion an
                 HTTP listing would carry), so --cancel-removed orders listings the same way
    get_item     the item's data as GET /api/v1/items/<name> gives it (one lstat), or None
    peek         the same, for --on-change rerun
    listed_groups  each item's `group` data field, read when asked (a tenant: `--group`'s
                 fallback)
    listed_priorities  the priorities (not 0) of the last listing, where the source ranks its
                 items (a Redis sorted set): what `ItemList.priorities` would carry
    watch        ADDED for every name, then each ADDED/DELETED, as the watch stream does
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any


class FolderSource:
    def __init__(self, files, where: str) -> None:
        """`files`: an ambassador source (`ambassador.sources.Source`), not started;
        `where`: how logs name it."""
        self.files = files
        self.base_url = where
        self.listing_version: int | None = None
        self.log_facts: dict | None = None  # a log's identity, as the last listing said
        self._priorities: dict[str, int] = {}

    def start(self) -> FolderSource:
        self.files.start()
        return self

    def wait_settled(self, timeout: float | None = None) -> None:
        """Wait until no file is still settling, so the first listing holds every file that
        was there when the run began (a file still being copied is waited for)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.files.settling():
            if deadline is not None and time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def stop_following(self) -> None:
        """The items are the ones listed now (a `--once` run that cancels nothing): the source
        stops watching - a folder's file events and settling ticks, a bucket's polls - and its
        snapshot stays as it is, read as before. Data is still read when asked."""
        self.files.stop(wait=False)

    def stop(self) -> None:
        """Stop watching the folder; the run is over, so its refresher (a daemon thread, up to
        a tick from noticing) is not waited for."""
        self.files.stop(wait=False)

    # -- manager.ports.Source --------------------------------------------------------------

    def list_items(self) -> list[str]:
        from kube_workqueue.ambassador.sources.base import DescribesLog, Ranks

        names, _, version = self.files.page(None, None)
        self.listing_version = version
        if isinstance(self.files, DescribesLog):  # a log's identity (`ports.TellsLog`)
            self.log_facts = self.files.log_facts()
        if isinstance(self.files, Ranks) and self.files.ranks:
            self._priorities = self.files.priorities(names)
        return names

    def listed_priorities(self) -> dict[str, int]:
        return self._priorities

    def listed_groups(self) -> _DataGroups:
        """Each item's `group` data field (a Redis hash's JSON), read when asked: a map
        whose `get(name)` reads the item's data from the snapshot."""
        return _DataGroups(self.files)

    def get_item(self, name: str) -> dict[str, Any] | None:
        return self.files.get(name)

    def peek(self, name: str) -> dict[str, Any] | None:
        return self.files.get(name)

    def keep_data_of(self, wanted) -> None:
        return None  # nothing is held per listing: data is read from the snapshot when asked

    def listed_work(self, waiting: int) -> None:
        return None

    def watch(
        self, timeout_seconds: int | None = None, read_timeout: float | None = None
    ) -> Iterator[dict[str, str]]:
        names, events = self.files.subscribe()
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        try:
            for name in names:
                yield {"type": "ADDED", "item": name}
            while True:
                wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
                if wait <= 0:
                    return
                try:
                    yield events.get(timeout=wait)
                except queue.Empty:
                    continue
        finally:
            self.files.unsubscribe(events)


class _DataGroups:
    """name -> the `group` field of its data, read from the source's snapshot when asked."""

    def __init__(self, files) -> None:
        self.files = files

    def get(self, name: str, default=None):
        from ..tenancy.rules import valid_group

        data = self.files.get(name) or {}
        return valid_group(data.get("group")) or default


def open_source(config: dict, where: str) -> FolderSource:
    """The source of an ambassador app configuration (`ambassador.sources.resolve`),
    started: its first listing done (raises what the source's start raises). The caller's
    duty: `stop()`."""
    from kube_workqueue.ambassador.sources import open_source as open_ambassador_source

    return FolderSource(open_ambassador_source(config), where).start()
