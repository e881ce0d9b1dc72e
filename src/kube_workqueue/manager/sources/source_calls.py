"""One call to the source API: a GET with its retries, and what an answer that is not the
API means.

`SourceCalls._get_json` is every call of the manager's client (`http.SourceClient`, which
mixes it in and holds what it reads: `base_url`, `session`, `retries`, `backoff`, `timeout`,
`sleep`, `answer_by`). Connection errors, timeouts, 429 and 5xx answers are retried with the
backoff, then raise `SourceUnavailable` - one line saying what failed and where; `answer_by`
(a first listing's `--source-timeout`) bounds the attempts and their retries together. An
answer that is not the API - not JSON, the wrong `kind`, another status - raises
`SourceProtocolError` at once: a wrong URL, which no retry mends; so does a failed TLS
handshake. A 404 that is the API's own `Status` is an item that is gone (`allow_404`).

The helpers below it build the one session a client keeps (the environment's proxies, CA
bundle and netrc resolved once), check a source URL before any call, and turn an item's name
into its path.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from ..ports import SourceProtocolError, SourceUnavailable

if TYPE_CHECKING:  # imported when a client is made: `workqueue run` never needs it
    import requests


class SourceCalls:
    """See the module docstring: mixed into `SourceClient`, which provides its attributes."""

    def _get_json(
        self,
        path: str,
        params,
        *,
        expect_kind: str,
        allow_404: bool = False,
        refused_ok: bool = False,
    ):
        """The answer's JSON; None for a 404 Status when `allow_404`, or for a 400 when
        `refused_ok` (a source that does not know a parameter)."""
        import requests

        url = self.base_url + path
        last = "no answer"
        for attempt in range(self.retries + 1):
            timeout = self.timeout
            if self.answer_by is not None:
                left = self.answer_by - time.monotonic()
                if attempt and left <= 0:
                    break
                timeout = max(0.1, min(timeout, left))
            if attempt:
                self.sleep(self.backoff.delay(attempt - 1))
            try:
                r = self.session.get(url, params=params, timeout=timeout)
            except requests.exceptions.SSLError as exc:  # no retry mends a wrong scheme
                raise SourceProtocolError(tls_failed(url, exc)) from None
            except requests.RequestException as exc:
                last = short_reason(exc)
                continue
            if r.status_code >= 500 or r.status_code == 429:
                last = f"HTTP {r.status_code}"
                continue
            if r.status_code == 404 and allow_404 and is_status(r):
                return None
            if r.status_code == 400 and refused_ok:
                return None
            hint = "is it the items API?"
            if r.status_code != 200:
                raise SourceProtocolError(f"{url} answered HTTP {r.status_code}: {hint}")
            try:
                body = r.json()
            except ValueError:
                raise SourceProtocolError(f"{url} did not answer JSON: {hint}") from None
            if not isinstance(body, dict) or body.get("kind") != expect_kind:
                raise SourceProtocolError(f"{url} did not answer a {expect_kind}: {hint}")
            return body
        if last == "timed out" and self.base_url.lower().startswith("https://"):
            last += ": does it speak HTTPS? a plain-HTTP server never answers a TLS handshake"
        raise SourceUnavailable(f"source {self.base_url} unreachable ({last})")


def session_for(base_url: str) -> requests.Session:
    """A session with the environment's settings for `base_url` (proxies and no_proxy, CA
    bundle, netrc credentials) resolved once, here. requests would otherwise look them up
    again on every call - reading the environment and looking for ~/.netrc per item fetch,
    0.13 ms of the 1 ms a loopback fetch costs here; the source's URL does not change, so
    neither do they.
    """
    import requests

    session = requests.Session()
    settings = session.merge_environment_settings(base_url, {}, None, None, None)
    session.proxies.update(settings["proxies"])
    session.verify = settings["verify"]
    session.auth = requests.utils.get_netrc_auth(base_url)
    session.trust_env = False
    return session


def is_status(response: requests.Response) -> bool:
    """Whether the answer is a Kubernetes-style `Status` (the API's own 404), not a page of
    some other server."""
    try:
        return response.json().get("kind") == "Status"
    except ValueError:
        return False


def check_source_url(url: str) -> None:
    """A `SourceProtocolError` (one line, exit 2) for a source URL no retry can mend: not
    http(s), no host, a malformed IPv6 address, a port out of range."""
    if not url.startswith(("http://", "https://")):
        raise SourceProtocolError(f"source URL must start with http:// or https://: {url}")
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # the port is checked (0-65535) when read
    except ValueError as exc:
        raise SourceProtocolError(f"not a source URL ({exc}): {url}") from None
    if not host:
        raise SourceProtocolError(f"no host in the source URL: {url}")


def tls_failed(url: str, exc: Exception) -> str:
    """One line for a TLS handshake that failed, the OpenSSL reason in it."""
    reason = str(exc)
    found = re.search(r"\[SSL: [A-Z_]+\][^'\"()]*|certificate verify failed[^'\"()]*", reason)
    short = found.group(0).strip() if found else reason[:120]
    hint = " - is it a plain http:// server?" if "WRONG_VERSION_NUMBER" in reason else ""
    return f"TLS with {url} failed{hint} ({short})"


def short_reason(exc: Exception) -> str:
    """What went wrong with a call that got no answer, in a few words."""
    import requests

    if isinstance(exc, requests.ConnectionError):
        return "connection refused or reset"
    if isinstance(exc, requests.Timeout):
        return "timed out"
    return type(exc).__name__


def item_path(name: str) -> str:
    """The item's URL path. Its slashes stay slashes (readable logs), except in a name with a
    `.` or `..` segment - an object key such as `../a.mp4` is a name, never a path: HTTP clients
    resolve dot segments before sending, so every slash of such a name is sent encoded."""
    segments = name.split("/")
    dotted = any(part in (".", "..") for part in segments)
    return "/api/v1/items/" + quote(name, safe="" if dotted else "/")
