"""The object-store core the S3, Cloud Storage and Azure Blob sources share (s3.py, gcs.py,
azure_blob.py): which keys are items, what is kept of each, and what a worker is told.

Each store's module is the client part alone - its URL, its client and configuration, one
listing in the store's own order, and its errors in one line. Everything a store does not decide
lives here, so the three cannot drift apart:

  * names: an item's name is its key relative to the prefix - a name, never a path: a key with
    spaces, unicode, `+`, `%` or `../` is served under exactly that name and reaches the worker
    as `key` and a URL of the store's scheme, which nothing here joins to a folder. Without
    `--recursive` only keys directly under the prefix are items; "folder" markers (keys ending in
    `/`) never are; a key no client could ask for is skipped, said and counted (naming.py);
  * the meta a listing keeps of an object (`meta_of`): its content tag, its size and its time,
    tab-separated, about 35 characters. The tag is the MD5 of the bytes where the store lists
    one (S3's ETag of a plain upload, Cloud Storage's md5Hash, Azure's Content-MD5), 22 base64
    characters; the same bytes copied again keep it. Where the store lists none (a multipart or
    composite object, a block-list upload), the tag is "=" and the store's own token, which
    changes with every write;
  * the item data (`describe_object`): name, bucket, key, url, size, modified, contentType, the
    tag under the store's own word for it, and `version` - a hash of the tag, so an overwrite
    with other bytes is a new version and the same bytes in any of the three stores are the same
    version.

Invariant: a lister's `list_all` yields every item or raises SourceUnreachable - never a part
(listed.py holds the last whole listing through an outage).
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ..naming import SkippedNames, normalise_suffixes
from .items import content_type, rfc3339
from .listed import ListedSource
from .listers import intervals
from .registry import SourceConfigError, not_for

FOLDER_ONLY = ("SETTLE", "VERSION_BY", "FORCE_POLLING")


class ObjectLister:
    """What every object store's `Lister` (listers.py) shares: the keys that are items, and the
    item data. A subclass sets `scheme` and `tag_keys`, says where a configuration's bucket is
    (`located`), and writes `list_all` (and `changes`, where the store tells of changes)."""

    scheme = ""  # "s3", "gs", "azblob": the scheme of the URLs the items' data carries
    tag_keys = ("etag", "etag")  # the item data's word for an MD5 tag, and for a store token

    @staticmethod
    def located(config: dict) -> tuple[str, str]:
        """(bucket, prefix) of a configuration - an Azure "bucket" is ACCOUNT/CONTAINER."""
        raise NotImplementedError

    def __init__(self, config: dict) -> None:
        self.config = config
        self.bucket, self.prefix = self.located(config)
        self.suffixes = normalise_suffixes(config.get("SUFFIXES") or [".mp4"])
        self.recursive = bool(config.get("RECURSIVE"))
        self.where = f"{self.scheme}://{self.bucket}/{self.prefix}"
        self.skipped = SkippedNames(self.where)  # keys no client could ask for: said, counted

    def name_of(self, key: str) -> str | None:
        """The item name of `key`, or None when the key is not an item of this source."""
        if not key.startswith(self.prefix) or key.endswith("/"):
            return None
        name = key[len(self.prefix) :]
        if not name or (not self.recursive and "/" in name):
            return None
        if not name.lower().endswith(self.suffixes):
            return None
        if name.isascii() and name.isprintable():  # the usual name, decided here (hot path)
            return name
        return name if self.skipped.check(name) else None

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        return describe_object(self.scheme, self.tag_keys, self.bucket, self.prefix, name, meta)

    def changes(self, stop):
        return None  # the store tells of no changes here: the listing is polled


HEX_MD5 = re.compile(r"[0-9a-f]{32}")
TO_URLSAFE = str.maketrans("+/", "-_")


def meta_of(tag: str, size: int, modified) -> str:
    """What the snapshot keeps of an object, as short as it reads back: `tag` (an MD5's 32 hex
    digits as 22 base64 characters; any other token as "=" and itself), the size and the time in
    seconds (hex), tab-separated - held by the publisher and by every worker for each object."""
    tag = tag.strip('"')
    stamp = int(modified.timestamp()) if isinstance(modified, datetime) else int(modified)
    if HEX_MD5.fullmatch(tag):
        packed = base64.urlsafe_b64encode(bytes.fromhex(tag)).decode()[:22]
    else:
        packed = "=" + tag
    return f"{packed}\t{size:x}\t{stamp:x}"


def packed_md5(digest: bytes | bytearray | str | None) -> str | None:
    """An MD5 as the meta keeps it (22 URL-safe base64 characters), from its 16 bytes (Azure's
    Content-MD5) or their standard base64 (Cloud Storage's md5Hash, turned over character by
    character: no decoding); None when there is none. The listing's hot path: one call an
    object, per poll."""
    if not digest:
        return None
    if isinstance(digest, str):
        return digest[:22].translate(TO_URLSAFE) if len(digest) == 24 else None
    return base64.urlsafe_b64encode(digest).decode()[:22] if len(digest) == 16 else None


def seconds(stamp: str | None) -> int:
    """An RFC 3339 time as the store lists it ("2026-12-06T02:04:57.123Z") in whole seconds
    since the epoch (0 when missing): one C call, where a client's own parse takes ten times
    longer."""
    if not stamp:
        return 0
    return int(datetime.fromisoformat(stamp).timestamp())


def tag_of(packed: str) -> str:
    if packed.startswith("="):
        return packed[1:]
    return base64.urlsafe_b64decode(packed + "==").hex()


def describe_object(
    scheme: str, tag_keys: tuple[str, str], bucket: str, prefix: str, name: str, meta: str
) -> dict[str, Any]:
    """An object's item data (what GET /api/v1/items/<name> answers and the worker reads);
    `tag_keys`: the store's words for an MD5 tag and for a token of its own."""
    packed, size, stamp = meta.split("\t")
    tag = tag_of(packed)
    key = prefix + name
    data = {
        "name": name,
        "bucket": bucket,
        "key": key,
        "url": f"{scheme}://{bucket}/{key}",
        "size": int(size, 16),
        "modified": rfc3339(int(stamp, 16)),
        "contentType": content_type(name),
        tag_keys[packed.startswith("=")]: tag,
        "version": "e-" + hashlib.sha256(tag.encode()).hexdigest()[:16],
    }
    if "/" in bucket:  # Azure's ACCOUNT/CONTAINER
        data["account"], data["container"] = bucket.split("/", 1)
    return data


class ObjectStoreType:
    """What the object stores' source types (registry.py) share: how a configuration is shown,
    opened and described. A subclass sets `kind`, `extra`, `secret_variables`, `events` and
    `lister` (its ObjectLister, which says where a configuration's bucket is), and writes
    `config_from_url` and `check`."""

    content_versions = True  # versions from the bytes' MD5 (module docstring)
    data_groups = False  # an object's data is what the store lists of it
    settles = False
    lister: type[ObjectLister]

    def shown(self, config: dict) -> str:
        bucket, prefix = self.lister.located(config)
        return f"{self.lister.scheme}://{bucket}/{prefix}"

    def open(self, config: dict) -> ListedSource:
        return ListedSource.configured(self.lister(config), config, 10.0)

    def describe(self, config: dict, name: str, meta: str | None) -> dict | None:
        if not meta:
            return None
        bucket, prefix = self.lister.located(config)
        scheme, tag_keys = self.lister.scheme, self.lister.tag_keys
        return describe_object(scheme, tag_keys, bucket, prefix, name, meta)


def listed_objects(url: str) -> str | None:
    """`SCHEME://BUCKET/PREFIX/` of an object-store source's URL - the objects it lists, which
    its workers may read without being told (fetch-run-put's `WORKQUEUE_SOURCE_OBJECTS`) - or
    None for any other source (and for one this machine has no client library for)."""
    from .registry import resolve, source_type

    try:
        kind, config = resolve(url)
        found = source_type(kind)
    except (SourceConfigError, ImportError):
        return None
    return found.shown(config) if isinstance(found, ObjectStoreType) else None


def split_bucket_url(url: str, bucket_names: re.Pattern, said: str) -> tuple[str, str]:
    """(bucket, prefix) of `SCHEME://bucket/prefix/` - the prefix ends with `/` unless empty;
    a bucket `bucket_names` does not match, a query or a fragment: `said` and the URL, one
    line."""
    parts = urlsplit(url)
    bucket = parts.netloc
    if not bucket or not bucket_names.match(bucket) or parts.query or parts.fragment:
        raise SourceConfigError(f"{said}, not {url!r}")
    prefix = parts.path.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return bucket, prefix


def common_config(kind: str, options: dict, default_poll: float) -> dict:
    """What every object store's configuration holds besides where the store is: the suffixes
    (checked), `--recursive` and the intervals; a folder-only option refused in one line."""
    not_for(kind, options, FOLDER_ONLY)
    if kind != "s3":  # another store's client is pointed at its emulator by its own setting
        not_for(kind, options, ("S3_ENDPOINT_URL", "SQS_QUEUE_URL"), only="S3 sources")
    try:
        normalise_suffixes(options.get("SUFFIXES") or [".mp4"])
    except ValueError as exc:
        raise SourceConfigError(str(exc)) from None
    return {
        "SUFFIXES": options.get("SUFFIXES") or [".mp4"],
        "RECURSIVE": bool(options.get("RECURSIVE")),
        **intervals(options, default_poll),
    }
