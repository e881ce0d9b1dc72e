"""How fetch-run-put moves an object in and out, and says a failure: one line, exit non-zero.

A location is checked before anything moves (`scheme_of`): s3://, gs:// and azblob:// go
through each store's official client (cloud_objects.py), file:// is read or written in place
(the result copied beside its target and renamed over it, so a half-written result is never
seen), http(s):// is fetched with GET and stored with PUT - never to or from a link-local
address (instance metadata), and a download's redirects only where the caller's rule lets
them (`fetch(..., allowed)`: input_rules.py's `HeldRedirects`). Every failure ends the worker
through `fail`: one line on stderr, the secrets in its URLs hidden (`shown`: userinfo, and a
query - a presigned URL's signature, a token), exit 1 for a transfer that failed and 2 for a
location that is not allowed. FETCH_TIMEOUT (seconds, 300) bounds each HTTP transfer.

Run as a script too (fetch-run-put's link in worker-images/generic): its imports fall back to
the sibling modules, as fetch_run_put.py's do.
"""

import os
import re
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request

try:
    from . import cloud_objects, input_rules
except ImportError:  # run as a script: the sibling modules
    import cloud_objects  # type: ignore[no-redef]
    import input_rules  # type: ignore[no-redef]

TIMEOUT = float(os.environ.get("FETCH_TIMEOUT", "300"))


def shown(text: str) -> str:
    """`text` with the secrets of its URLs hidden: userinfo, and a query (a presigned URL's
    signature, a token) - a log is read by more people than the store's keys are."""

    def one(match):
        parts = urllib.parse.urlsplit(match.group(0))
        host = parts.netloc.rsplit("@", 1)[-1]
        netloc = f"***@{host}" if "@" in parts.netloc else host
        return urllib.parse.urlunsplit(
            (parts.scheme, netloc, parts.path, "***" if parts.query else "", "")
        )

    try:
        return re.sub(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"]+", one, text)
    except ValueError:
        return re.sub(r"://[^/@\s]*@", "://***@", text)


def fail(message: str, code: int = 1) -> None:
    print(f"fetch-run-put: {shown(message)}", file=sys.stderr)
    sys.exit(code)


def scheme_of(url: str) -> str:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("http", "https", "file", *cloud_objects.SCHEMES):
        fail(f"unsupported location {url!r}: use s3://, gs://, azblob://, http(s):// or "
             "file://", 2)  # fmt: skip
    if scheme in cloud_objects.SCHEMES:
        try:
            cloud_objects.parts(url)
        except cloud_objects.Refused as refused:
            fail(str(refused), 2)
    return scheme


def transfer(move, *args) -> None:
    """An object store's download or upload (cloud_objects.py), of a location `scheme_of` has
    checked: its failure is one line."""
    try:
        move(*args)
    except cloud_objects.Failed as failed:
        fail(str(failed))


def file_path(url: str) -> str:
    path, refused = input_rules.file_path(url)
    if refused:
        fail(refused, 2)
    return path


def reachable(url: str) -> None:
    """One line and exit 2 for an http(s) URL on a link-local address (`input_rules`)."""
    refused = input_rules.link_local(url)
    if refused:
        fail(refused, 2)


def opener(allowed):
    """urllib's opener whose redirects go only where `allowed(url)` (None) lets them."""
    return urllib.request.build_opener(input_rules.HeldRedirects(allowed))


def fetch(url: str, dest: str, allowed=input_rules.link_local) -> None:
    """`url` into `dest`; `allowed(url)`: why a redirect may not go to a URL, or None."""
    if scheme_of(url) in cloud_objects.SCHEMES:
        transfer(cloud_objects.download, url, dest)
        return
    if scheme_of(url) == "file":
        try:
            shutil.copyfile(file_path(url), dest)
        except OSError as exc:
            fail(f"cannot read {url}: {exc.strerror}")
        return
    reachable(url)
    try:
        with opener(allowed).open(url, timeout=TIMEOUT) as r, open(dest, "wb") as out:
            shutil.copyfileobj(r, out)
    except urllib.error.HTTPError as exc:
        fail(f"download of {url} failed: HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        fail(f"download of {url} failed: {getattr(exc, 'reason', exc)}")


def put(src: str, url: str) -> None:
    if scheme_of(url) in cloud_objects.SCHEMES:
        transfer(cloud_objects.upload, src, url)
        return
    if scheme_of(url) == "file":
        target = file_path(url)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        tmp = f"{target}.part-{os.getpid()}"
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, target)
        except OSError as exc:
            fail(f"cannot write {url}: {exc.strerror}")
        return
    with open(src, "rb") as f:
        body = f.read()
    request = urllib.request.Request(
        url, data=body, method="PUT", headers={"Content-Type": "application/octet-stream"}
    )
    reachable(url)
    try:
        with opener(input_rules.link_local).open(request, timeout=TIMEOUT):
            pass
    except urllib.error.HTTPError as exc:
        fail(f"upload to {url} failed: HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        fail(f"upload to {url} failed: {getattr(exc, 'reason', exc)}")
