"""What an item may make fetch-run-put read: the worker's rules for locations an item names.

In fetch-run-put's command-line mode the item is data, not a request - whoever can add an item
(drop a file, write a Redis member, publish a record) must not be able to have the worker copy
anything of the worker's own world to the output:

  * a local file only under a folder an `--input-root DIR` names (its real path: no symlink
    leads out; no `.` or `..` segment) - never `/etc/shadow` or `/proc/self/environ`;
  * an http(s) object only under a prefix an `--input-url PREFIX` names (the same scheme, host
    and port, and a path under the prefix's, cut at a `/`: `https://store/in` admits
    `https://store/in/a.mp4`, never `https://store/inbox/...` or `https://store.evil/`) - never
    an internal service's answer (`http://127.0.0.1:9200/_cat/indices`);
  * an object of a store (`s3://`, `gs://`, `azblob://`) only under a prefix an `--input-url`
    names (`s3://bucket/in/`: the same bucket, a key under the prefix's, cut at a `/`) or under
    the queue's own source (`WORKQUEUE_SOURCE_OBJECTS`, which `workqueue run`, the operator and
    the chart give workers of an object-store source) - never whatever bucket a stream's record
    or a Redis member names (`bucket=secret-bucket key=creds.json`), which the worker's
    identity may well be able to read;
  * never a link-local address, whatever the mode and the prefixes: 169.254.0.0/16 and
    fe80::/10 are where clouds serve instance metadata and its credentials (the host name is
    resolved, and every address it has is looked at); and a redirect is held to the same rules
    as the URL it came from.

Every location is parsed once, here (`location`), and the fetch uses what the check saw: a
URL that another parser could read otherwise is refused rather than guessed at - a control
character (Python's `urlsplit` drops a tab or a newline that a store's client would keep), a
user part (`http://evil@127.0.0.1/`), a backslash in an http(s) host.

Each check returns None when the location may be used, else the line to fail with; the worker
says it and exits 2. The standard library only: this runs as a script beside fetch-run-put.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import NamedTuple

DEFAULT_PORTS = {"http": 80, "https": 443}
OBJECT_SCHEMES = ("s3", "gs", "azblob")
SOURCE_OBJECTS = "WORKQUEUE_SOURCE_OBJECTS"  # the queue's own source's objects (space-separated)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Location(NamedTuple):
    """A location as the check and the fetch both read it: `place` is the host (http(s)),
    the bucket (`ACCOUNT/CONTAINER` for Azure) or "" (a file); `path` the http(s) path, the
    object's key as written, or the file's decoded path."""

    scheme: str
    place: str
    port: int | None
    path: str


def location(url: str) -> Location:
    """`url` parsed, or `ValueError` naming why it is refused (see the module docstring)."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"not a URL: {url!r}")
    if CONTROL.search(url):
        raise ValueError(f"a location must not hold a control character (a tab, a newline, "
                         f"NUL): {url!r}")  # fmt: skip
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme in OBJECT_SCHEMES:
        bucket, _, key = rest.partition("/")
        if scheme == "azblob":
            container, _, key = key.partition("/")
            bucket = f"{bucket}/{container}" if bucket and container else ""
        if "@" in bucket or not bucket:
            form = (
                "azblob://ACCOUNT/CONTAINER/key" if scheme == "azblob" else f"{scheme}://bucket/key"
            )
            raise ValueError(f"an {scheme}:// location is {form}, not {url!r}")
        return Location(scheme, bucket, None, key)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc}): {url!r}") from None
    if "@" in parts.netloc:
        raise ValueError(f"a location must not have a user part: {url!r}")
    if scheme == "file":
        path, refused = file_path(url)
        if refused:
            raise ValueError(refused)
        return Location(scheme, "", None, path)
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"unsupported location {url!r}: use s3://, gs://, azblob://, "
                         "http(s):// or file://")  # fmt: skip
    if "\\" in parts.netloc or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host: {url!r}")
    return Location(scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme],
                    parts.path or "/")  # fmt: skip


def file_path(url: str) -> tuple[str | None, str | None]:
    """(the local path of a file:// URL, None) - or (None, why it is refused)."""
    path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
    if any(part in (".", "..") for part in path.split("/")):
        return None, f"a file:// location must not have . or .. segments: {url!r}"
    return path, None


def under_roots(url: str, roots: list[str]) -> str | None:
    """Whether the file:// input `url` lies under one of `roots` (real paths)."""
    path, refused = file_path(url)
    if refused:
        return refused
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots):
        return None
    where = (
        "no --input-root is given"
        if not roots
        else "it is under no --input-root (" + ", ".join(roots) + ")"
    )
    return f"the work item names a local file, and {where}: {url}"


def prefix(text: str) -> str:
    """An `--input-url` value, checked: an http(s) URL with a host and no user, query or
    fragment, or an object store's `SCHEME://BUCKET[/PREFIX]`; `ValueError` saying what is
    wrong."""
    try:
        found = location(text)
    except ValueError as exc:
        raise ValueError(f"--input-url {text!r}: {exc}") from None
    if found.scheme == "file":
        raise ValueError(f"--input-url {text!r}: a folder is --input-root DIR")
    if found.scheme in OBJECT_SCHEMES:
        return text
    parts = urllib.parse.urlsplit(text)
    if parts.query or parts.fragment:
        raise ValueError(f"--input-url {text!r}: a prefix has no user, query or fragment")
    return text


def _under(path: str, prefix_path: str) -> bool:
    """Whether `path` is under `prefix_path`, cut at a `/`."""
    if prefix_path in ("", "/") or (prefix_path.endswith("/") and path.startswith(prefix_path)):
        return True
    return path == prefix_path or path.startswith(prefix_path + "/")


def under_prefixes(url: str, prefixes: list[str]) -> str | None:
    """Whether the http(s) or object-store input `url` is under one of `prefixes` (see the
    module docstring): None, or why not."""
    try:
        found = location(url)
    except ValueError as exc:
        return str(exc)
    if found.scheme in DEFAULT_PORTS:
        decoded = urllib.parse.unquote(found.path)
        if any(part in (".", "..") for part in decoded.split("/")):
            return f"an http(s) input must not have . or .. segments: {url!r}"
    for text in prefixes:
        try:
            allowed = location(text)
        except ValueError:
            continue
        if (found.scheme, found.place, found.port) != (allowed.scheme, allowed.place,
                                                       allowed.port):  # fmt: skip
            continue
        if _under(found.path, allowed.path):
            return None
    kind = "an http(s) object" if found.scheme in DEFAULT_PORTS else f"a {found.scheme}:// object"
    where = (
        "no --input-url is given"
        if not prefixes
        else "it is under no --input-url (" + ", ".join(prefixes) + ")"
    )
    return f"the work item names {kind}, and {where}: {url}"


def source_objects(environ=os.environ) -> list[str]:
    """The queue's own source's object prefixes (`WORKQUEUE_SOURCE_OBJECTS`), each checked as
    an `--input-url` is (one that is not a store's prefix is left out)."""
    found = []
    for text in (environ.get(SOURCE_OBJECTS) or "").split():
        try:
            if location(text).scheme in OBJECT_SCHEMES:
                found.append(text)
        except ValueError:
            continue
    return found


def link_local(url: str) -> str | None:
    """Why `url` may not be reached - its host is, or resolves to, a link-local address - or
    None. A host that does not resolve is let through: the request then fails on its own."""
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        return None
    if not host:
        return None
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return None
    for address in found:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if ip.is_link_local or (mapped is not None and mapped.is_link_local):
            return f"{host} is a link-local address ({address}), where instance metadata is: {url}"
    return None


class HeldRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect followed only where `allowed(url)` (None) lets the URL itself go."""

    def __init__(self, allowed) -> None:
        super().__init__()
        self.allowed = allowed

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        refused = self.allowed(newurl)
        if refused:
            raise urllib.error.URLError(f"redirected where it may not go: {refused}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)
