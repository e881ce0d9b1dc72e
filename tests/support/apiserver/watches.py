"""The stand-in's watch streams: chunked JSON lines, replayed from the store's change log.

A watch from resourceVersion "" or "0" starts with every matching object as ADDED; from a
later one, with every change after it still in the log - or, for one the log no longer
reaches, a single ERROR event with 410 Expired, as kube-apiserver answers a compacted version.
It then follows the log until `timeoutSeconds` (an hour by default) or the server's stop,
ending with the final chunk. A label selector is applied to each change as the watch cache
does (`seen_as`). A "cut" fault (`faults.py`) ends the stream after N events without a final
chunk, as a dropped connection does.
"""

from __future__ import annotations

import json
import time

from .errors import status_body
from .selectors import selector_matches


def seen_as(kind: str, selector: str | None, before: dict | None, now: dict) -> str | None:
    """What a watch with a label selector sees of a change: an object that starts matching is
    ADDED, one that stops matching is DELETED, one that never matched is nothing
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes:
    the watch cache compares the object before and after the change with the selector)."""
    matches_now = selector_matches(selector, now)
    if kind == "ADDED":
        return kind if matches_now else None
    matched = before is not None and selector_matches(selector, before)
    if kind == "DELETED":
        return kind if matched else None
    if matches_now and not matched:
        return "ADDED"
    if matched and not matches_now:
        return "DELETED"
    return kind if matches_now else None


class ServesWatches:
    """`ApiServer`'s watch (a mixin: it reads the server's `store`, `closing` and `_at_version`)."""

    def _watch(self, h, resource: str, ns: str, query: dict, fault: dict | None) -> None:
        store = self.store
        selector = query.get("labelSelector")
        timeout = float(query.get("timeoutSeconds") or 3600)
        deadline = time.monotonic() + timeout
        cut_after = fault["after_events"] if fault and fault["kind"] == "cut" else None
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        sent = 0

        def emit(event: dict) -> None:
            data = (json.dumps(event) + "\n").encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        try:
            with store.cond:
                start = query.get("resourceVersion") or ""
                backlog: list = []
                if start in ("", "0"):
                    items, last = store.list(resource, ns, selector)
                    backlog = [{"type": "ADDED", "object": self._at_version(h, o)} for o in items]
                else:
                    last = int(start)
                    if last < store.oldest_rv() - 1:
                        backlog = [
                            {
                                "type": "ERROR",
                                "object": status_body(
                                    410,
                                    "Expired",
                                    f"too old resource version: {last} ({store.oldest_rv() - 1})",
                                ),
                            }
                        ]
                        last = None
            for event in backlog:
                if cut_after is not None and sent >= cut_after:
                    break
                emit(event)
                sent += 1
            while last is not None and not self.closing.is_set():
                if cut_after is not None and sent >= cut_after:
                    break  # the stream is cut, without a final chunk
                with store.cond:
                    fresh = []
                    for rv, r, n, t, o, before in reversed(store.log):  # newest first
                        if rv <= last:
                            break
                        if r == resource and (ns is None or n == ns):
                            fresh.append((rv, t, o, before))
                    fresh.reverse()
                    if not fresh:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        store.cond.wait(min(remaining, 1.0))
                        continue
                for rv, kind, obj, before in fresh:
                    last = rv
                    kind = seen_as(kind, selector, before, obj["metadata"].get("labels") or {})
                    if kind is not None:
                        emit({"type": kind, "object": self._at_version(h, obj)})
                        sent += 1
                        if cut_after is not None and sent >= cut_after:
                            break
            else:
                h.wfile.write(b"0\r\n\r\n")
                return
            if cut_after is None:
                h.wfile.write(b"0\r\n\r\n")
            else:
                h.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True
