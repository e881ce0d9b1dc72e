"""Items are blobs in an Azure Blob Storage container.

    workqueue ambassador --source azblob://ACCOUNT/CONTAINER/videos/ --suffix .mp4 [--recursive]
                         [--poll-interval 10s]

This module is the client part alone: the URL, the client and its errors. Names, the meta kept
of each blob, versions and the item data are the object-store core's (objects.py), as for S3.

The URL is `azblob://ACCOUNT/CONTAINER/PREFIX/` rather than the blob endpoint's own
`https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX`: the scheme names the store as `s3://`
and `gs://` do (an `https://` URL says nothing of what answers there), and where the store
answers is configuration, not the item's identity - an emulator or a sovereign cloud answers
elsewhere, under the same account, container and names.

Configuration is the official client's (`azure-storage-blob` and `azure-identity`, the extra
`azure`), from the environment, never from a flag or the URL - the rule clouds/azure_client.py
writes once for this source and fetch-run-put: `AZURE_STORAGE_CONNECTION_STRING` (whose
`BlobEndpoint` points the client at Azurite, Microsoft's emulator), `AZURE_STORAGE_KEY`,
`AZURE_STORAGE_SAS_TOKEN`, or Azure workload identity on AKS (a token from Entra ID for the
pod's service account; no secret at all).

Versions: from the blob's Content-MD5 (the bytes: the same bytes uploaded again keep their
version), or, for a block-list upload that set none, its ETag (every write a new one).

Changes: the listing (List Blobs, 5,000 blobs a page) every `--poll-interval`. Azure announces
changes through Event Grid, which no emulator serves, so this source polls.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlsplit

from ...clouds.azure_client import KEY_VARIABLES, AzureSetupError, entra_refusal, service_client
from .listers import SourceUnreachable
from .objects import ObjectLister, ObjectStoreType, common_config, packed_md5
from .registry import SourceConfigError

PAGE_SIZE = 5000  # List Blobs' most results per page
ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
CONTAINER = re.compile(r"^(\$root|[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9])$")


def split_url(url: str) -> tuple[str, str, str]:
    """(account, container, prefix) of `azblob://ACCOUNT/CONTAINER/prefix/` - the prefix ends
    with `/` unless empty."""
    parts = urlsplit(url)
    account = parts.netloc
    container, _, prefix = parts.path.lstrip("/").partition("/")
    if (
        not ACCOUNT.match(account)
        or not CONTAINER.match(container)
        or parts.query
        or parts.fragment
    ):
        raise SourceConfigError(
            f"an Azure Blob source is azblob://ACCOUNT/CONTAINER/prefix/, not {url!r}"
        )
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return account, container, prefix


def client(account: str):
    """The account's service client, set up from the environment by the rule fetch-run-put
    shares (clouds/azure_client.py); a few quick retries - the storage client's own policy
    starts at 15 s and triples, so an outage would be said after minutes, not seconds."""
    try:
        return service_client(
            account, retries=2, first_backoff=0.5, connection_timeout=5, read_timeout=30
        )
    except AzureSetupError as exc:
        raise SourceConfigError(f"azblob://{account}/: {exc}") from None


class AzureLister(ObjectLister):
    """The `Lister` (listers.py) for one container and prefix."""

    scheme = "azblob"
    tag_keys = ("md5", "etag")

    @staticmethod
    def located(config: dict) -> tuple[str, str]:
        # the item data's "bucket" is ACCOUNT/CONTAINER: its url is azblob://ACCOUNT/CONTAINER/key
        bucket = f"{config['AZURE_ACCOUNT']}/{config['AZURE_CONTAINER']}"
        return bucket, config.get("AZURE_PREFIX") or ""

    def __init__(self, config: dict) -> None:
        super().__init__(config)
        account = config["AZURE_ACCOUNT"]
        self.container = client(account).get_container_client(config["AZURE_CONTAINER"])

    def list_all(self) -> Iterator[tuple[str, str]]:
        """(name, meta) of every item, page by page as the store answers, in its order (the
        names' UTF-8 bytes, as packed_listing.py wants)."""
        from azure.storage.blob import BlobProperties

        try:
            if self.recursive:
                blobs = self.container.list_blobs(
                    name_starts_with=self.prefix or None, results_per_page=PAGE_SIZE
                )
            else:  # one level: deeper names come back as one prefix each, not fetched
                blobs = self.container.walk_blobs(
                    name_starts_with=self.prefix or None, delimiter="/", results_per_page=PAGE_SIZE
                )
            for blob in blobs:
                if not isinstance(blob, BlobProperties):
                    continue  # a BlobPrefix: a "folder" under a one-level listing
                name = self.name_of(blob.name)
                if name is not None:
                    packed = packed_md5(blob.content_settings.content_md5)
                    tag = packed or "=" + blob.etag.strip('"')
                    stamp = int(blob.last_modified.timestamp()) if blob.last_modified else 0
                    yield name, f"{tag}\t{blob.size or 0:x}\t{stamp:x}"
        except Exception as exc:  # azure-core's errors, and the transport's
            raise SourceUnreachable(describe_error(exc, self.where)) from None


def describe_error(exc: Exception, where: str) -> str:
    """One line for what the client raised, naming the likely cause."""
    from azure.core import exceptions as az

    if isinstance(exc, SourceConfigError):
        return str(exc)
    if isinstance(exc, az.ResourceNotFoundError):
        return f"{where}: the container does not exist"
    denied = isinstance(exc, az.HttpResponseError) and exc.status_code in (401, 403)
    if isinstance(exc, az.ClientAuthenticationError) or denied:  # a wrong key: 403 signed
        return f"{where}: access denied: {_denied_because(exc)}"
    if isinstance(exc, az.ServiceRequestError | az.ServiceResponseError):
        return f"{where}: cannot reach the account's blob endpoint"
    if isinstance(exc, az.HttpResponseError):
        return f"{where}: {exc.status_code} {exc.reason}".strip()
    return f"{where}: {type(exc).__name__}: {exc}"


def _denied_because(exc: Exception) -> str:
    """What to check: the Entra ID token the workload identity asked for (Entra's own reason),
    else the key or SAS the request was signed with, or the identity's role."""
    refusal = entra_refusal(exc)
    if refusal:
        return f"Entra ID refused the workload identity's token ({refusal})"
    return "check the account key, SAS token or the identity's role on the account"


class AzureType(ObjectStoreType):
    """The Azure Blob Storage source type of the registry (`registry.py`)."""

    kind = "azure"
    extra = "azure"
    secret_variables = " or ".join(KEY_VARIABLES)
    events = False  # Event Grid is not followed: the listing is polled
    lister = AzureLister

    def config_from_url(self, url: str, options: dict) -> dict:
        config = common_config("azblob", options, 10.0)
        account, container, prefix = split_url(url)
        return {
            **config,
            "AZURE_ACCOUNT": account,
            "AZURE_CONTAINER": container,
            "AZURE_PREFIX": prefix,
        }

    def check(self, config: dict) -> None:
        where = self.shown(config)
        try:
            lister = AzureLister(config)
            first = lister.container.list_blobs(
                name_starts_with=lister.prefix or None, results_per_page=1
            )
            next(iter(first), None)  # asks for the first page
        except ImportError:
            raise  # (azure-identity, for workload identity: the caller names the extra)
        except Exception as exc:
            raise SourceConfigError(describe_error(exc, where)) from None


SOURCE_TYPE = AzureType()
