"""Items are objects in a Google Cloud Storage bucket.

    workqueue ambassador --source gs://bucket/videos/ --suffix .mp4 [--recursive]
                         [--poll-interval 10s]

This module is the client part alone: the URL, the client and its errors. Names, the meta kept
of each object, versions and the item data are the object-store core's (objects.py), as for S3.

Configuration is the official client's own (`google-cloud-storage`, the extra `gcs`):
Application Default Credentials - `GOOGLE_APPLICATION_CREDENTIALS` (a key file), Workload
Identity on GKE, the metadata server on Google Cloud, or `gcloud auth application-default
login` - and `STORAGE_EMULATOR_HOST` to point it at an emulator, which the client then asks
without credentials. There is no flag for either: a URL names where, never who, and nothing
secret is ever in a URL that is printed.

Versions: from the object's md5Hash (the bytes: the same bytes written again keep their
version), or, for a composite object, which has none, its generation (every write a new one).

Changes: the listing (objects.list, 1,000 objects a page, only the fields kept asked for) every
`--poll-interval`. Cloud Storage can announce changes through Pub/Sub notifications, but no
emulator here serves them, so this source does not claim to follow them: it polls (the docs say
what that costs, and what a user turns on instead).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from .listers import SourceUnreachable
from .objects import (
    ObjectLister,
    ObjectStoreType,
    common_config,
    packed_md5,
    seconds,
    split_bucket_url,
)
from .registry import SourceConfigError

PAGE_SIZE = 1000  # objects.list's most results per page
FIELDS = "items(name,md5Hash,generation,size,updated),nextPageToken"  # nothing else is kept
# Bucket names as Cloud Storage allows them: 3-63 of a-z 0-9 - _ (and dots, up to 222).
BUCKET = re.compile(r"^[a-z0-9][a-z0-9._\-]{1,220}[a-z0-9]$")
TIMEOUT = (5, 30)  # connect, read (seconds): a store that is down is noticed in seconds


def split_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `gs://bucket/prefix/` - the prefix ends with `/` unless empty."""
    return split_bucket_url(url, BUCKET, "a Cloud Storage source is gs://bucket/prefix/")


def client():
    """The official client, configured as it configures itself (the module docstring)."""
    from google.cloud import storage

    return storage.Client()


def retry():
    """The client's own retry policy, given up after 5 s: an outage is said, not waited out."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    return DEFAULT_RETRY.with_timeout(5.0)


class GcsLister(ObjectLister):
    """The `Lister` (listers.py) for one bucket and prefix."""

    scheme = "gs"
    tag_keys = ("md5", "generation")

    @staticmethod
    def located(config: dict) -> tuple[str, str]:
        return config["GCS_BUCKET"], config.get("GCS_PREFIX") or ""

    def __init__(self, config: dict) -> None:
        super().__init__(config)
        self.client = client()

    def list_all(self) -> Iterator[tuple[str, str]]:
        """(name, meta) of every item, page by page as the store answers, in its order (the
        keys' UTF-8 bytes, as packed_listing.py wants)."""
        try:
            blobs = self.client.list_blobs(
                self.bucket,
                prefix=self.prefix or None,
                delimiter=None if self.recursive else "/",
                page_size=PAGE_SIZE,
                fields=FIELDS,
                timeout=TIMEOUT,
                retry=retry(),
            )
            # each object as the resource the page listed, not a Blob made of it (whose
            # properties parse each field again: `updated` alone took 40% of a listing) -
            # the paginator's own public hook (google-api-core's Iterator.item_to_value)
            blobs.item_to_value = lambda _iterator, resource: resource
            for found in blobs:
                name = self.name_of(found["name"])
                if name is not None:
                    tag = packed_md5(found.get("md5Hash")) or f"={found.get('generation')}"
                    size = int(found.get("size") or 0)
                    yield name, f"{tag}\t{size:x}\t{seconds(found.get('updated')):x}"
        except Exception as exc:  # the client's, google-auth's and requests' errors alike
            raise SourceUnreachable(describe_error(exc, self.where)) from None


def _answered_as_storage(exc) -> bool:
    """Whether a 404 came from a Cloud Storage API (a JSON error, or none - an emulator's), not
    from some other web server (a page of HTML)."""
    response = getattr(exc, "response", None)
    kind = (response.headers.get("content-type") or "") if response is not None else ""
    return "html" not in kind.lower()


def checked_environment() -> None:
    """What the client would take from the environment, checked before it does: an emulator's
    address that is not an http(s) URL, a key file that is not there or not a JSON key - each
    a one-line SourceConfigError naming the variable (the client says "MissingSchema", or "no
    credentials found", for both)."""
    import json
    from urllib.parse import urlsplit

    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if emulator:
        parts = urlsplit(emulator)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceConfigError(f"STORAGE_EMULATOR_HOST must be an http(s) URL "
                                    f"(http://127.0.0.1:9023), not {emulator!r}")  # fmt: skip
    key_file = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if key_file and not emulator:  # (an emulator is asked without credentials)
        try:
            with open(key_file, encoding="utf-8") as f:
                found = json.load(f)
        except OSError as exc:
            raise SourceConfigError(f"GOOGLE_APPLICATION_CREDENTIALS {key_file}: cannot read "
                                    f"it ({exc.strerror})") from None  # fmt: skip
        except ValueError:
            raise SourceConfigError(f"GOOGLE_APPLICATION_CREDENTIALS {key_file}: not a JSON "
                                    "key file") from None  # fmt: skip
        if not isinstance(found, dict) or "type" not in found:
            raise SourceConfigError(f"GOOGLE_APPLICATION_CREDENTIALS {key_file}: not a Google "
                                    "Cloud key file (no \"type\")")  # fmt: skip


def describe_error(exc: Exception, where: str) -> str:
    """One line for what the client raised, naming the likely cause."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth
    from requests import RequestException

    if isinstance(exc, auth.DefaultCredentialsError):
        return (
            f"{where}: no Google Cloud credentials found (GOOGLE_APPLICATION_CREDENTIALS, "
            "Workload Identity or the metadata server)"
        )
    if isinstance(exc, api.NotFound):
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator and not _answered_as_storage(exc):
            return (f"{where}: STORAGE_EMULATOR_HOST {emulator} answered 404 in no Cloud "
                    "Storage's words: is it a Cloud Storage emulator?")  # fmt: skip
        return f"{where}: the bucket does not exist"
    if isinstance(exc, api.Forbidden | api.Unauthorized | auth.RefreshError):
        return f"{where}: access denied: check the credentials and the bucket's IAM policy"
    if isinstance(exc, RequestException | api.RetryError | ConnectionError | TimeoutError):
        return f"{where}: cannot reach Cloud Storage ({type(exc).__name__})"
    if isinstance(exc, api.GoogleAPICallError):
        return f"{where}: {exc.code} {exc.message}".strip()
    return f"{where}: {type(exc).__name__}: {exc}"


class GcsType(ObjectStoreType):
    """The Cloud Storage source type of the registry (`registry.py`)."""

    kind = "gcs"
    extra = "gcs"
    secret_variables = "GOOGLE_APPLICATION_CREDENTIALS (a key file), or Workload Identity"
    events = False  # Pub/Sub notifications are not followed: the listing is polled
    lister = GcsLister

    def config_from_url(self, url: str, options: dict) -> dict:
        config = common_config("gs", options, 10.0)
        bucket, prefix = split_url(url)
        return {**config, "GCS_BUCKET": bucket, "GCS_PREFIX": prefix}

    def check(self, config: dict) -> None:
        where = self.shown(config)
        checked_environment()
        try:
            lister = GcsLister(config)
            blobs = lister.client.list_blobs(
                lister.bucket,
                prefix=lister.prefix or None,
                max_results=1,
                timeout=TIMEOUT,
                retry=retry(),
            )
            list(blobs)
        except Exception as exc:
            raise SourceConfigError(describe_error(exc, where)) from None


SOURCE_TYPE = GcsType()
