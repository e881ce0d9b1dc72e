"""The manager's live dashboard, served beside /metrics on its `--metrics-port`, at `/`.

    model.py   one moment of the queue (`Board`), built at most twice a second
    page.py    the board as HTML: tables without JavaScript, charts as inline SVG, all escaped
    static/    the script that swaps in a fresh board every second, and the style sheet

Routes (GET only; read-only - nothing here changes the queue):

    /                 the page
    /ui/board         the board's HTML alone (what the script fetches)
    /ui/board.json    the board as JSON: `workqueue status --json`'s object plus `series` and
                      `autoscaler`
    /ui/static/...    the script and the style sheet, shipped in the package (no build step,
                      nothing from the internet)

Who may look: the page shows item names, reasons and log tails, so it is private by default.
On a loopback address it is open to this machine. Bound beyond loopback it needs the bearer
token (`--ui-token-file`, or `WORKQUEUE_UI_TOKEN`; not on the command line, where every user
of the machine reads it): `Authorization: Bearer TOKEN`, or once per
browser `/?token=TOKEN`, which sets an HttpOnly, SameSite=Strict cookie (Secure when served
over TLS) and redirects to `/` so the token leaves the address bar; the cookie carries a value
derived from the token (an HMAC), never the token. Without a token it answers 403 and says how
to set one. With a token set, it is required on loopback too. /metrics, /stats and /healthz
never need it (Prometheus keeps scraping). Every answer forbids framing, sniffing and inline
script (a Content-Security-Policy of 'self' only).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Callable
from importlib import resources
from urllib.parse import parse_qs

from .model import Board, BoardCache, board
from .page import board_html, page

COOKIE = "workqueue_ui"
STATIC = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]

__all__ = ["Dashboard", "board", "is_loopback"]

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Dashboard:
    def __init__(self, build: Callable[[], Board], *, host: str, token: str | None) -> None:
        """`build()` makes a board (`model.board(manager)`); `host` is the address the
        endpoint binds, which decides whether a token is needed (see the module docstring)."""
        self.cache = BoardCache(build)
        self.host = host
        self.token = token or None
        self.needs_token = self.token is not None or not is_loopback(host)
        if self.needs_token and self.token is None:  # closed to all: said at start, not later
            log.warning("the dashboard on %s has no token, so it answers 403 to everyone: set "
                        "WORKQUEUE_UI_TOKEN or --ui-token-file to open it (/metrics, /stats "
                        "and /healthz stay open)", host)  # fmt: skip
        # what the cookie carries: derived from the token, never the token itself (a cookie
        # jar, a proxy's log or a browser's devtools show it)
        self.session = ""
        if self.token is not None:
            self.session = hmac.new(self.token.encode(), b"workqueue dashboard session",
                                    hashlib.sha256).hexdigest()  # fmt: skip

    @staticmethod
    def serves(path: str) -> bool:
        return path == "/" or path.startswith("/ui/")

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", b"read-only\n", "text/plain")
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if path == "/" and self.token and query.get("token"):
            secure = environ.get("wsgi.url_scheme") == "https"
            return self._log_in(start_response, query["token"][0], secure)
        denied = self._denied(environ)
        if denied is not None:
            status, text = denied
            return _answer(start_response, status, text.encode(), "text/plain; charset=utf-8")
        if path == "/":
            body = page(self.cache.get()).encode()
            return _answer(start_response, "200 OK", body, "text/html; charset=utf-8")
        if path == "/ui/board":
            body = board_html(self.cache.get()).encode()
            return _answer(start_response, "200 OK", body, "text/html; charset=utf-8")
        if path == "/ui/board.json":
            body = json.dumps(self.cache.get().as_json()).encode()
            return _answer(start_response, "200 OK", body, "application/json")
        name = path.removeprefix("/ui/static/")
        if name in STATIC:
            body = resources.files(__package__).joinpath("static", name).read_bytes()
            return _answer(start_response, "200 OK", body, STATIC[name])
        return _answer(start_response, "404 Not Found", b"not found\n", "text/plain")

    def _denied(self, environ) -> tuple[str, str] | None:
        if not self.needs_token:
            return None
        if self.token is None:
            return (
                "403 Forbidden",
                f"the dashboard is off: the manager serves {self.host}, beyond this machine, "
                "and no token is set (--ui-token or WORKQUEUE_UI_TOKEN)\n",
            )
        bearer = _bearer(environ.get("HTTP_AUTHORIZATION", ""))
        if bearer is not None and hmac.compare_digest(bearer.encode(), self.token.encode()):
            return None
        cookie = _cookie(environ.get("HTTP_COOKIE", ""))
        if cookie is not None and hmac.compare_digest(cookie.encode(), self.session.encode()):
            return None
        return (
            "401 Unauthorized",
            "this dashboard needs its token: send 'Authorization: Bearer TOKEN', "
            "or open /?token=TOKEN once in a browser\n",
        )

    def _log_in(self, start_response, offered: str, secure: bool = False):
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            return _answer(
                start_response, "401 Unauthorized", b"wrong token\n", "text/plain; charset=utf-8"
            )
        cookie = f"{COOKIE}={self.session}; HttpOnly; SameSite=Strict; Path=/"
        if secure:
            cookie += "; Secure"
        start_response(
            "303 See Other",
            [("Location", "./"), ("Set-Cookie", cookie), ("Content-Length", "0")]
            + SECURITY_HEADERS,
        )
        return [b""]


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == COOKIE and value:
            return value
    return None


def _answer(start_response, status: str, body: bytes, content_type: str):
    start_response(
        status,
        [("Content-Type", content_type), ("Content-Length", str(len(body)))] + SECURITY_HEADERS,
    )
    return [body]
