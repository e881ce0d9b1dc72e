"""The ambassador's Flask application: `create_app(config=None)`.

Config keys (all optional except a source):
  SOURCE_TYPE      the registry's kind (sources/registry.py, `BUILT_IN`): "filesystem" (the
                   default, with ROOT), "s3", "gcs", "azure", "redis", "redis-stream", "nats",
                   "kafka" or a third party's - each with the keys its `config_from_url` makes
  ROOT             folder to serve                       SUFFIXES       ['.mp4']
  RECURSIVE        serve files below ROOT too (False)    SETTLE         seconds to hold still (2)
  FORCE_POLLING    poll instead of file events (False)   POLL_INTERVAL  seconds (1)
  SOURCE           a ready Source (tests, other backends); then the keys above are ignored
  SHARED_SNAPSHOT  a gunicorn worker's: the publisher's folder (publication.py)
  START_SOURCE     start the source now (True)

One error handler turns every HTTP error, and any unexpected exception, into the Status body
`{"kind":"Status","apiVersion":"v1","status":"Failure","code","reason","message"}`; an
unexpected exception is logged and answered as a 500 that says nothing about the server's files.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, InternalServerError

from .api import bp as items_bp
from .api import unreadable
from .full_listing import ListingFile, shortcut
from .metrics import install_metrics
from .openapi import openapi_document
from .sources.registry import kind_of, open_source
from .watch_slots import WatchSlots

log = logging.getLogger(__name__)

MAX_URI_LENGTH = 8190  # what gunicorn itself allows at most
DEFAULT_MAX_WATCHES = 512  # a worker's watches when nobody says (half of its 1024 threads)
# Kubernetes' StatusReason where it has one; otherwise the HTTP name without spaces.
REASONS = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def status_response(code: int, message: str, headers: Any = None) -> Response:
    reason = REASONS.get(code)
    if reason is None:
        reason = _reason_from_code(code)
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    response = Response(
        json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        status=code,
        mimetype="application/json",
    )
    for key, value in headers or []:
        if key.lower() != "content-type":
            response.headers[key] = value
    return response


def _reason_from_code(code: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(code).phrase.replace(" ", "").replace("-", "")
    except ValueError:
        return "Unknown"


def _build_source(config: dict) -> Any:
    if config.get("SOURCE") is not None:
        return config["SOURCE"]
    if kind_of(config) == "filesystem" and not config.get("ROOT"):
        raise ValueError("the ambassador needs ROOT (a folder), a SOURCE_TYPE or SOURCE")
    if config.get("SHARED_SNAPSHOT"):  # a gunicorn worker: the publisher keeps the snapshot
        from .shared_snapshot import SharedSnapshot

        return SharedSnapshot(config["SHARED_SNAPSHOT"], config)
    return open_source(config)


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(config or {})
    app.json.sort_keys = False
    # A name is matched exactly: no redirect that rewrites "//" (or anything else) into a path.
    app.url_map.merge_slashes = False
    source = _build_source(app.config)
    if app.config.get("START_SOURCE", True):
        source.start()
    app.extensions["workqueue.source"] = source
    app.extensions["workqueue.listing_file"] = ListingFile(
        app.config.get("REMOVALS") == "retention"
    )
    app.extensions["workqueue.watch_slots"] = WatchSlots(
        int(app.config.get("MAX_WATCHES") or DEFAULT_MAX_WATCHES),
        int(app.config.get("MAX_WATCHES_PER_CLIENT") or DEFAULT_MAX_WATCHES),
    )
    app.register_blueprint(items_bp)
    shortcut(app, app.extensions["workqueue.listing_file"], install_metrics(app, source))

    @app.before_request
    def _uri_length() -> Response | None:
        # gunicorn is told to take request lines of any length (limit_request_line=0), so that
        # a long one is refused here, as a Status body like every other error.
        uri = request.environ.get("RAW_URI") or request.full_path
        if len(uri) > MAX_URI_LENGTH:
            return status_response(
                414, f"the request URI is {len(uri):,} characters; at most {MAX_URI_LENGTH:,}"
            )
        return None

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        headers = exc.get_headers() if exc.code in (405, 429) else None  # Allow, Retry-After
        return status_response(exc.code or 500, exc.description or exc.name, headers)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return _http_error(exc)
        log.exception("unexpected error")
        return status_response(500, InternalServerError.description)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        why = unreadable(current_app.extensions["workqueue.source"])
        if why is not None:
            return status_response(503, why)
        return Response("ok\n", mimetype="text/plain")

    @app.get("/api/v1/openapi.json")
    def openapi() -> Response:
        return Response(json.dumps(openapi_document()), mimetype="application/json")

    return app
