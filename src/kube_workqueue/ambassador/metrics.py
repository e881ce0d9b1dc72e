"""The ambassador's Prometheus metrics: requests by route and code, listing latency, item count,
and a log source's backlog (records read and not yet listed, the oldest one's age).

Each app gets its own registry, so several apps (tests) never collide. Under gunicorn with more
than one worker process the CLI sets PROMETHEUS_MULTIPROC_DIR before anything imports
prometheus-client; values then live in files shared by the workers, and /metrics aggregates them
(prometheus-client's multiprocess mode), so any worker answers with the whole server's figures.
Routes are labelled by their rule (`/api/v1/items/<path:name>`), never by the raw path, so hostile
URLs cannot blow up the label set.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable

from flask import Flask, Response, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from .sources.base import CountsBacklog

ROUTE = "/api/v1/items"  # the items list's rule, as Flask labels it
LISTING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


_refused = None


def refused_counter() -> Counter:
    """`ambassador_refused_total{reason}`: requests refused to keep the ambassador answering -
    `watches` / `watches_per_client` (429, `api.py`), `line_too_long` (414),
    `head_too_large` (431), `head_timeout` (408) (`guarded_worker.py`). One per process, in
    every app's registry (and in the multiprocess files under gunicorn)."""
    global _refused
    if _refused is None:
        _refused = Counter(
            "ambassador_refused",
            "Requests refused to keep the ambassador answering lists, by reason.",
            ["reason"],
            registry=None,
        )
    return _refused


_skipped = None


def skipped_names_counter() -> Counter:
    """`ambassador_names_skipped_total{reason}`: names a source found but cannot serve
    (`naming.SkippedNames`: `not_utf8`, `nul`, `line_break`), each counted once."""
    global _skipped
    if _skipped is None:
        _skipped = Counter(
            "ambassador_names_skipped",
            "Names the source found but cannot serve (not UTF-8, a NUL, a line break).",
            ["reason"],
            registry=None,
        )
    return _skipped


def install_metrics(app: Flask, source) -> Callable[[float], None]:
    """Metrics for `app`; returns `count_listing(started)`, which records a whole listing
    answered (200) outside Flask (`full_listing.shortcut`) as the hooks below would."""
    registry = CollectorRegistry()
    registry.register(refused_counter())
    registry.register(skipped_names_counter())
    requests_total = Counter(
        "ambassador_requests",
        "HTTP requests answered, by route, method and status code.",
        ["route", "method", "code"],
        registry=registry,
    )
    listing_seconds = Histogram(
        "ambassador_listing_duration_seconds",
        "Time to answer GET /api/v1/items (not watches), in seconds.",
        buckets=LISTING_BUCKETS,
        registry=registry,
    )
    items = Gauge(
        "ambassador_items",
        "Items currently listed.",
        registry=registry,
        multiprocess_mode="max",
    )

    unread = Gauge(
        "ambassador_log_unread_records",
        "A log source's records read from its server (or, where it says, still held there "
        "beyond them) and not yet in the listing.",
        registry=registry,
        multiprocess_mode="max",
    )
    unread_age = Gauge(
        "ambassador_log_oldest_unread_age_seconds",
        "The age of a log source's oldest record read and not yet in the listing (0: none).",
        registry=registry,
        multiprocess_mode="max",
    )
    backlog = source.backlog if isinstance(source, CountsBacklog) else None  # a log's

    @app.before_request
    def _start_timer() -> None:
        g.workqueue_started = time.perf_counter()

    @app.after_request
    def _count(response: Response) -> Response:
        rule = request.url_rule.rule if request.url_rule is not None else "unmatched"
        requests_total.labels(rule, request.method, str(response.status_code)).inc()
        if rule == ROUTE and request.args.get("watch", "false") in ("false", "0"):
            started = g.get("workqueue_started")
            if started is not None:
                listing_seconds.observe(time.perf_counter() - started)
        return response

    @app.get("/metrics")
    def metrics() -> Response:
        items.set(len(source))
        figures = backlog() if backlog is not None else None
        if figures is not None:
            unread.set(figures[0])
            unread_age.set(figures[1])
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")  # (several workers: their files)
        body = merged_metrics(folder) if folder else generate_latest(registry)
        return Response(body, mimetype=CONTENT_TYPE_LATEST)

    whole_listing = requests_total.labels(ROUTE, "GET", "200")

    def count_listing(started: float) -> None:
        whole_listing.inc()
        listing_seconds.observe(time.perf_counter() - started)

    return count_listing


def merged_metrics(folder: str) -> bytes:
    """Every worker's figures from the multiprocess files in `folder`, in the text format -
    prometheus-client's merge, minus the files a process has made and not yet sized.

    A process creates its file and only then sizes it; read in between, the empty file failed
    the whole merge (`struct.error`: prometheus/client_python#1199, open in 0.26), so a scrape
    that met a worker booting answered 500 - and a worker killed in that moment left the empty
    file behind for good. An empty file holds no figure yet: it is left out."""
    registry = CollectorRegistry()
    registry.register(_SizedFiles(folder))
    return generate_latest(registry)


class _SizedFiles:
    """A collector of the multiprocess files in one folder that have their header."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def collect(self):
        files = []
        for path in glob.glob(os.path.join(self.folder, "*.db")):
            try:
                if os.path.getsize(path) >= 8:  # a file only grows: read below as it is now
                    files.append(path)
            except OSError:  # removed since the listing (a dead worker's live gauge)
                continue
        return multiprocess.MultiProcessCollector.merge(files, accumulate=True)
