"""What counts as an item leaving the source (`manager.runtime.removals`), and the poller
handing over only complete listings: over real HTTP on 127.0.0.1, with the real source client,
a listing that fails, breaks off between pages or is cut mid-body cancels nothing."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from kube_workqueue.manager.runtime.poller import Poller
from kube_workqueue.manager.runtime.removals import Removals
from kube_workqueue.manager.sources.http import SourceClient


def test_a_newer_complete_listing_proves_removal():
    removals = Removals()
    assert removals.listing(["a", "b", "c"], 5) == []  # the first listing: nothing before it
    assert removals.listing(["a", "c"], 6) == ["b"]
    assert removals.listing(["a", "c"], 6) == []  # the same version proves nothing new
    assert removals.listing(["c"], 9) == ["a"]


def test_a_listing_of_the_same_version_that_lists_less_hides_no_removal():
    """A `view=full` listing leaves out an item whose file went after its version was
    published: the same version, one name fewer. The next, newer listing still proves it."""
    removals = Removals()
    removals.listing(["a", "b", "c"], 5)
    assert removals.listing(["a", "b"], 5) == []  # not proof: the same version
    assert removals.listing(["a", "b"], 6) == ["c"]


def test_a_listing_that_went_back_in_time_cancels_nothing_and_is_the_new_baseline(caplog):
    removals = Removals()
    removals.listing(["a", "b", "c"], 50)
    assert removals.listing(["a"], 3) == []  # restarted (or another replica): no proof
    assert "went back in time" in caplog.text
    assert removals.listing(["a"], 4) == []  # b and c were not in the baseline: not proven
    assert removals.listing([], 5) == ["a"]


def test_a_source_without_resource_versions_cancels_nothing_and_says_so_once(caplog):
    removals = Removals()
    assert removals.listing(["a", "b"], None) == []
    assert removals.listing([], None) == []
    assert caplog.text.count("no resourceVersion") == 1


def test_watch_events_keep_the_listed_names_and_a_listing_proves_a_deletion():
    removals = Removals()
    removals.listing(["a"], 1)
    removals.added("b")
    assert removals.deleted("b") is True  # known: a listing is to prove it
    assert removals.deleted("never-listed") is False  # nothing to prove
    assert removals.listing(["a"], 2) == ["b"]
    assert removals.deleted("b") is False  # proved once: told twice, left once
    assert removals.listing([], 3) == ["a"]


class ScriptedSource(BaseHTTPRequestHandler):
    """`/api/v1/items` answering whatever `self.server.phase` says (see PHASES)."""

    def do_GET(self):  # noqa: N802 - the stdlib's name
        query = parse_qs(urlparse(self.path).query)
        page = 2 if "continue" in query else 1
        answer = PHASES[self.server.phase](page)
        if answer == "cut":  # headers promise more than the body brings, then the socket closes
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "4000")
            self.end_headers()
            self.wfile.write(b'{"kind":"ItemList","apiVersion":"v1","items":["a"')
            self.close_connection = True
            return
        status, body = answer
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def _items(names, version, more=None):
    metadata = {"resourceVersion": str(version)}
    if more:
        metadata["continue"] = "n.YQ"
    items = [{"name": n, "data": {"name": n}} for n in names]
    return 200, {"kind": "ItemList", "apiVersion": "v1", "items": items, "metadata": metadata}


PHASES = {
    "all": lambda page: _items(["a", "b", "c"], 5),
    # page 1 is fine and newer, page 2 never comes: a listing cut short
    "page-two-fails": lambda page: _items(["a"], 6, more=True) if page == 1 else (500, {}),
    "down": lambda page: (503, {}),
    "cut": lambda page: "cut",
    "b-gone": lambda page: _items(["a", "c"], 7),
}


@pytest.fixture
def source():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedSource)
    server.phase = "all"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_only_complete_listings_reach_the_removals(source):
    client = SourceClient(f"http://127.0.0.1:{source.server_port}", sleep=lambda s: None)
    removed: list[str] = []
    poller = Poller(client, lambda names: None, on_removed=removed.extend)
    assert poller.poll_once() == ["a", "b", "c"]
    for phase in ("page-two-fails", "down", "cut"):
        source.phase = phase
        assert poller.poll_once() is None, phase  # the source is "down": nothing proven
        assert removed == [], phase
    source.phase = "b-gone"
    assert poller.poll_once() == ["a", "c"]
    assert removed == ["b"]
    assert client.listing_version == 7
