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
  * never a link-local address, whatever the mode and the prefixes: 169.254.0.0/16 and
    fe80::/10 are where clouds serve instance metadata and its credentials (the host name is
    resolved, and every address it has is looked at); and a redirect is held to the same rules
    as the URL it came from.

Each check returns None when the location may be used, else the line to fail with; the worker
says it and exits 2. The standard library only: this runs as a script beside fetch-run-put.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_PORTS = {"http": 80, "https": 443}


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


def _parts(url: str):
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or DEFAULT_PORTS.get(scheme)
    return scheme, (parts.hostname or "").lower(), port, parts.path or "/"


def prefix(text: str) -> str:
    """An `--input-url` value, checked: an http(s) URL with a host, no query or fragment;
    `ValueError` saying what is wrong."""
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        raise ValueError(f"--input-url {text!r} is not a URL ({exc})") from None
    if parts.scheme.lower() not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"--input-url {text!r}: give an http(s):// URL with a host")
    if parts.query or parts.fragment or parts.username is not None:
        raise ValueError(f"--input-url {text!r}: a prefix has no user, query or fragment")
    return text


def under_prefixes(url: str, prefixes: list[str]) -> str | None:
    """Whether the http(s) input `url` is under one of `prefixes` (see the module docstring)."""
    try:
        scheme, host, port, path = _parts(url)
    except ValueError:
        return f"not a URL: {url!r}"
    decoded = urllib.parse.unquote(path)
    if any(part in (".", "..") for part in decoded.split("/")):
        return f"an http(s) input must not have . or .. segments: {url!r}"
    for text in prefixes:
        p_scheme, p_host, p_port, p_path = _parts(text)
        if (scheme, host, port) != (p_scheme, p_host, p_port):
            continue
        if p_path.endswith("/") and path.startswith(p_path):
            return None
        if path == p_path or path.startswith(p_path + "/"):
            return None
    where = (
        "no --input-url is given"
        if not prefixes
        else "it is under no --input-url (" + ", ".join(prefixes) + ")"
    )
    return f"the work item names an http(s) object, and {where}: {url}"


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
