"""The items resource: `GET /api/v1/items`, `GET /api/v1/items/<name>`, and the watch stream.

Response shapes are Burns' source-ambassador contract, plus Kubernetes-style list paging:

  GET /api/v1/items[?limit=N&continue=TOKEN][&view=full]
      {"kind":"ItemList","apiVersion":"v1","items":[names, sorted],"metadata":{...}}
      with view=full each item is {"name": name, "data": {...}} - the data GET /items/<name>
      gives - so a client needs no request per item (same paging and tokens).
      metadata.continue is set while more remain; metadata.remainingItemCount with it.
      A token names the last item returned, so it stays valid when the folder changes: the next
      page starts right after that name, whatever was added or removed meanwhile.
      Priorities (additive to v1): where the source ranks its items (a Redis sorted set's
      scores, an item data field `priority`), a names listing carries "priorities": {name:
      integer} for the page's items whose priority is not 0; the full view has it in each
      item's data, and the watch's ADDED events as "priority" (an item whose priority changes
      is ADDED again, with the new one). Higher starts first; absent is 0.
  GET /api/v1/items?startAt=NAME[&limit=N][&view=full]
      the page starts at NAME (when it is an item) or at the first name after it: how a client
      asks for the data of the names it is about to use, a page at a time, without listing
      everything (additive to v1). It starts the first page only: a `continue` token pages on
      from its own name, and a watch ignores it. The manager's client falls back to one GET
      per item where a source refuses it.
  GET /api/v1/items?watch=true[&timeoutSeconds=N][&view=full]
      newline-delimited JSON: {"type":"ADDED","item":name} for every current item, then ADDED /
      DELETED as they happen; ends after timeoutSeconds when given. With view=full an ADDED
      event carries the item's "data" too. After HEARTBEAT_SECONDS without an event an empty
      line is sent (clients skip it): a watcher that went away is noticed and its thread freed.
      The current items go out a page at a time (`BURST_NAMES` names, or `BURST_BYTES` of the
      lines prebuilt and shared by every watch), made as the client reads: a watcher that
      never reads holds one page, whatever the number of items. Events come after them; a name
      added meanwhile may come twice as ADDED (one event means: it exists).
  GET /api/v1/items/<name>
      {"kind":"Item","apiVersion":"v1","data":{"name","path","size","modified","contentType",
      "version"}} - `version` changes when the file does (ambassador.versions).

Errors are raised as werkzeug HTTP exceptions and rendered as Status bodies by app.py. While
the source cannot be read (a bucket or a Redis server unreachable, the folder gone: `/readyz`
fails) every request here answers 503 saying why: a client must not take the last listing for
the source's current one - the manager then holds, as for any source outage, and never reads
an outage as "every item was removed". Watch streams already open stay open.
"""

from __future__ import annotations

import base64
import json
import queue
import re
import time
from collections.abc import Callable

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import BadRequest, NotFound, ServiceUnavailable, TooManyRequests
from werkzeug.wsgi import wrap_file

from .full_listing import item_list, list_metadata, log_of, priorities_of
from .sources.base import Ranks, ReadsPages, ServesPrebuilt, StreamsEvents
from .watch_slots import RETRY_AFTER_SECONDS, bound_send_queue

bp = Blueprint("items", __name__, url_prefix="/api/v1")

MAX_LIMIT = 100_000
HEARTBEAT_SECONDS = 15.0
# A watch's first listing goes out BURST_NAMES names a write (with their data), or, prebuilt,
# BURST_BYTES of lines: a watcher that never reads holds one such page (and what the server
# made of it to send) - 31-34 KB a watcher at the margin of 100 with these,
# 62 KB with 16 KB pages and 180 KB with 256 names' data. A reader pays a write a page:
# 5% more time for a first listing of 100,000 items with their data, none for names.
BURST_NAMES = 32
BURST_BYTES = 4_096


def _source():
    return current_app.extensions["workqueue.source"]


def unreadable(source) -> str | None:
    """Why `source` cannot be read now (its `problem`, when it says), or None when it can:
    what `/readyz` and every items request answer with."""
    if source.ready():
        return None
    return source.problem or "the source cannot be read"


@bp.before_request
def _source_readable() -> None:
    why = unreadable(_source())
    if why is not None:
        raise ServiceUnavailable(f"the source is unavailable: {why}")


def _json_response(body: bytes | str, status: int = 200) -> Response:
    return Response(body, status=status, mimetype="application/json")


CONTINUE_PREFIX = "n."  # marks a token this server issued: "garbage" is not one
CONTINUE_PATTERN = r"^(n\.([A-Za-z0-9_-]{4})*([A-Za-z0-9_-]{2,3})?)?$"  # or empty: no paging
_CONTINUE_RE = re.compile(CONTINUE_PATTERN)


def encode_continue(last_name: str) -> str:
    """The token is `n.` and the last name returned, base64url-encoded without padding: opaque
    to the client, and valid for as long as names sort the same way."""
    encoded = base64.urlsafe_b64encode(last_name.encode("utf-8")).decode("ascii").rstrip("=")
    return CONTINUE_PREFIX + encoded


def decode_continue(token: str) -> str | None:
    """The name to resume after; None for an empty token (no paging). A token not of the
    documented pattern - one this server could not have issued, like `garbage` - is a 400;
    every token of the pattern decodes to some name, and resuming after a name that never
    existed is well defined."""
    if token == "":
        return None
    if not _CONTINUE_RE.match(token):
        raise BadRequest("invalid continue token")
    body = token[len(CONTINUE_PREFIX) :]
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    return raw.decode("utf-8", errors="surrogateescape") or None


def _int_param(name: str, low: int, high: int) -> int | None:
    text = request.args.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}, got {value}")
    return value


def _bool_param(name: str) -> bool:
    text = request.args.get(name, "false").lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise BadRequest(f"{name} must be true or false, got {text!r}")


VIEWS = ("names", "full")


@bp.get("/items")
def list_items() -> Response:
    known = {"limit", "continue", "watch", "timeoutSeconds", "view", "startAt"}
    unknown = sorted(set(request.args) - known)
    if unknown:
        raise BadRequest(f"unknown query parameter: {unknown[0]}")
    # every parameter is checked, whichever of them this request uses
    watch = _bool_param("watch")
    timeout_seconds = _int_param("timeoutSeconds", 1, 86_400)
    limit = _int_param("limit", 1, MAX_LIMIT)
    after = decode_continue(request.args.get("continue", ""))
    view = request.args.get("view", "names")
    if view not in VIEWS:
        raise BadRequest(f"view must be one of {', '.join(VIEWS)}, got {view[:50]!r}")
    full = view == "full"
    start_at = request.args.get("startAt")
    if watch:
        return _watch(timeout_seconds, full)
    if start_at is not None and after is None:  # a continue token pages on from its name
        names, remaining, version = _page_at(start_at, limit)
    elif after is None and limit is None and not full:
        return _full_listing_response()
    else:
        names, remaining, version = _source().page(after, limit)
    metadata = _metadata(version)
    if remaining and names:
        metadata["continue"] = encode_continue(names[-1])
        metadata["remainingItemCount"] = remaining
    if full:
        return _json_response(item_list(_with_data(names), metadata))
    return _json_response(item_list(names, metadata, priorities_of(_source(), names)))


def _metadata(version: int) -> dict:
    by_retention = current_app.config.get("REMOVALS") == "retention"
    return list_metadata(version, by_retention, log_of(_source()))


def _page_at(start: str, limit: int | None) -> tuple[list[str], int, int]:
    """Names from `start` (inclusive), at most `limit`: `start` itself when it is an item,
    then the names strictly after it - no source needs an inclusive page of its own."""
    source = _source()
    if source.get(start) is None:
        return source.page(start, limit)
    names, remaining, version = source.page(start, None if limit is None else limit - 1)
    return [start, *names], remaining, version


def _with_data(names: list[str]) -> list[dict]:
    """`view=full`: each item with its data, as `GET /api/v1/items/<name>` gives it. An item
    whose file went between the listing and its stat is left out (it is gone)."""
    get = _page_reader(_source())
    out = []
    for name in names:
        data = get(name)
        if data is not None:
            out.append({"name": name, "data": data})
    return out


def _page_reader(source) -> Callable[[str], dict | None]:
    """How one page reads its items' data: through one `reader` where the source has one
    (`ReadsPages`), else `get`."""
    return source.reader() if isinstance(source, ReadsPages) else source.get


def _full_listing_response() -> Response:
    """The whole listing through Flask (a HEAD, or a test's client past the shortcut): the
    same `ListingFile` the shortcut sends (`full_listing.py`)."""
    listing = current_app.extensions["workqueue.listing_file"]
    body, size = listing.current(_source())
    if isinstance(body, bytes):
        return _json_response(body)
    response = Response(
        wrap_file(request.environ, body), mimetype="application/json", direct_passthrough=True
    )
    response.content_length = size
    return response


def _watch(timeout_seconds: int | None, full: bool = False) -> Response:
    slots = current_app.extensions["workqueue.watch_slots"]
    client = request.remote_addr or "?"
    refused = slots.take(client)
    if refused is not None:  # long-running requests never take the threads lists need
        from .metrics import refused_counter

        refused_counter().labels(refused).inc()
        limit = slots.total if refused == "watches" else slots.per_client
        raise TooManyRequests(
            f"this ambassador serves at most {limit} watch streams "
            f"{'at once' if refused == 'watches' else 'to one client at once'}: "
            f"try again in {RETRY_AFTER_SECONDS} s",
            retry_after=RETRY_AFTER_SECONDS,
        )
    bound_send_queue(request.environ)  # an unread stream queues 0.5 MB, not its whole listing
    try:
        source = _source()
        ranked = isinstance(source, Ranks) and source.ranks
        if not full and not ranked and isinstance(source, ServesPrebuilt):  # lines made once
            first, events = source.subscribe_lines()
        else:
            events = subscribe_events(source)
            first = None
    except BaseException:
        slots.give(client)
        raise
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds

    def line(event: dict, ranks: dict[str, int] | None = None, get=None) -> bytes:
        """`event` as a line; `ranks`: the priorities already looked up (the first burst's);
        `get`: how its data is read (the first burst's, a page at a time: `_page_reader`)."""
        if full and event.get("type") == "ADDED":
            data = (get or source.get)(event["item"])
            if data is not None:
                event = {**event, "data": data}
        if ranked and event.get("type") == "ADDED":
            name = event["item"]
            priority = (ranks if ranks is not None else source.priorities([name])).get(name)
            if priority:
                event = {**event, "priority": priority}
        return (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    def burst():
        """The current items as ADDED lines, a page a write (see the module docstring)."""
        if first is not None:
            view, start = memoryview(first), 0  # the shared lines: a page copied at a time
            while start < len(first):
                end = first.find(b"\n", start + BURST_BYTES - 1)  # (cut at a line's end)
                end = len(first) if end == -1 else end + 1
                yield bytes(view[start:end])
                start = end
            return
        after = None
        while True:
            names, _, _ = source.page(after, BURST_NAMES)
            if not names:
                return
            # the page's priorities in one pass, not one lookup a name
            ranks = source.priorities(names) if ranked else None
            get = _page_reader(source) if full else None
            yield b"".join(line({"type": "ADDED", "item": n}, ranks, get) for n in names)
            after = names[-1]

    def stream():
        try:
            # The headers go out now, whatever there is to list: a server sends them with the
            # first chunk, and an empty source's stream has none until its first event (a
            # client waiting on the response's start waited that long, or timed out).
            yield b""
            yield from burst()
            quiet_since = time.monotonic()
            while True:
                now = time.monotonic()
                wait = HEARTBEAT_SECONDS if deadline is None else min(5.0, deadline - now)
                if wait <= 0:
                    return
                try:
                    event = events.get(timeout=wait)
                except queue.Empty:
                    if time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                        quiet_since = time.monotonic()
                        yield b"\n"  # a write: a client that left is noticed here
                    continue
                quiet_since = time.monotonic()
                yield line(event)
        finally:
            source.unsubscribe(events)

    response = Response(stream(), mimetype="application/x-ndjson")
    response.call_on_close(lambda: slots.give(client))  # (also when never iterated)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Accel-Buffering"] = "no"
    return response


def subscribe_events(source):
    """A queue of the source's later events, without a copy of its names held for the watch
    (`subscribe` hands them over: they are let go at once, the stream pages instead)."""
    if isinstance(source, StreamsEvents):
        return source.subscribe_events()
    names, queue_ = source.subscribe()
    del names
    return queue_


@bp.get("/items/<path:name>")
def get_item(name: str) -> Response:
    data = _source().get(name)
    if data is None:
        raise NotFound(f'item "{name[:200]}" not found')
    body = {"kind": "Item", "apiVersion": "v1", "data": data}
    return _json_response(json.dumps(body, ensure_ascii=False, separators=(",", ":")))
