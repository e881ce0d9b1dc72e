"""Faults on demand: 429 with Retry-After, 500, slow answers, requests held unanswered and
never acted on (a write a crash cut short), watch streams cut after N events, and "foreign"
answers - an HTTP code with a body that is not a Kubernetes Status (a proxy's text page, or a
reason Kubernetes does not define) - each for a verb and resource (and, optionally, a body a
predicate picks), a number of times."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Faults:
    """Faults to inject, each matching a verb and a resource, used up `count` times."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[dict] = []

    def add(
        self,
        kind: str,
        *,
        verb: str = "*",
        resource: str = "*",
        count: int = 1,
        retry_after: int = 1,
        delay: float = 0.5,
        after_events: int = 1,
        code: int = 404,
        reason: str | None = None,
        when: Callable[[dict], bool] | None = None,
    ) -> None:
        """`kind`: "429", "500", "delay", "hang" (held `delay` s, then the connection closes with
        nothing done), "cut" (a watch), or "foreign" (HTTP `code` with a
        plain-text body, or with a Status whose reason is `reason` when one is given)."""
        with self._lock:
            self._faults.append(
                {
                    "kind": kind,
                    "verb": verb,
                    "resource": resource,
                    "count": count,
                    "retry_after": retry_after,
                    "delay": delay,
                    "after_events": after_events,
                    "code": code,
                    "reason": reason,
                    "when": when,
                }
            )

    def take(self, verb: str, resource: str, body: dict | None = None) -> dict | None:
        """The first fault for this request, used once (`when`, if given, is asked about the
        request's body: {} when it has none)."""
        with self._lock:
            for fault in self._faults:
                if fault["verb"] not in ("*", verb) or fault["resource"] not in ("*", resource):
                    continue
                if fault["when"] is None or fault["when"](body or {}):
                    fault["count"] -= 1
                    if fault["count"] <= 0:
                        self._faults.remove(fault)
                    return fault
        return None
