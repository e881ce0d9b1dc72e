"""fetch-run-put's object stores: download and upload one object at `s3://BUCKET/KEY`,
`gs://BUCKET/KEY` or `azblob://ACCOUNT/CONTAINER/KEY`, each with its store's official client
configured as the ambassador's source is (boto3's chain; Application Default Credentials and
STORAGE_EMULATOR_HOST; for Azure the one rule of clouds/azure_client.py - a connection string,
a key, a SAS token or workload identity) - never a credential from the item or the URL.

A key is a name, taken as written: nothing in it is decoded or resolved (`in/../a b.mp4` is that
key, and is never a path here). Each failure is one line (`Failed`), which the caller prints and
exits 1 on; a URL that is not a location of its store is `Refused` (exit 2).

Caller duty: only a URL whose scheme is in SCHEMES is handed here.
"""

from __future__ import annotations

SCHEMES = ("s3", "gs", "azblob")
EXTRAS = {
    "s3": ("boto3", "s3"),
    "gs": ("google-cloud-storage", "gcs"),
    "azblob": ("azure-storage-blob and azure-identity", "azure"),
}


class Failed(Exception):
    """The transfer failed (one line: what the store said)."""


class Refused(Exception):
    """The URL is not a location of its store (one line)."""


def parts(url: str) -> tuple[str, str, str]:
    """(scheme, bucket, key) - an Azure "bucket" is ACCOUNT/CONTAINER; the key as written."""
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    bucket, _, key = rest.partition("/")
    if scheme == "azblob":
        container, _, key = key.partition("/")
        bucket = f"{bucket}/{container}" if bucket and container else ""
    if not bucket or not key:
        form = "azblob://ACCOUNT/CONTAINER/key" if scheme == "azblob" else f"{scheme}://bucket/key"
        raise Refused(f"an {scheme}:// location is {form}, not {url!r}")
    return scheme, bucket, key


def download(url: str, dest: str) -> None:
    scheme, bucket, key = parts(url)
    try:
        if scheme == "s3":
            _s3().download_file(bucket, key, dest)
        elif scheme == "gs":
            _gcs().bucket(bucket).blob(key).download_to_filename(dest, retry=_gcs_retry())
        else:
            with open(dest, "wb") as out:
                _azure_container(bucket).download_blob(key).readinto(out)
    except Failed:  # (no client library, no credentials: said already)
        raise
    except Exception as exc:  # each client's own errors and its transport's
        raise Failed(f"download of {url} failed: {said(exc)}") from None


def upload(src: str, url: str) -> None:
    scheme, bucket, key = parts(url)
    try:
        if scheme == "s3":
            _s3().upload_file(src, bucket, key)
        elif scheme == "gs":
            _gcs().bucket(bucket).blob(key).upload_from_filename(src, retry=_gcs_retry())
        else:
            with open(src, "rb") as data:
                _azure_container(bucket).upload_blob(key, data, overwrite=True)
    except Failed:
        raise
    except Exception as exc:
        raise Failed(f"upload to {url} failed: {said(exc)}") from None


def said(exc: Exception) -> str:
    """What the store said, on one line: S3's error code and message, an HTTP status and
    reason, else the error's own words."""
    refusal = _entra_refusal(exc)
    if refusal:
        return f"Entra ID refused the workload identity's token ({refusal})"
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    if error:
        return f"{error.get('Code')} {error.get('Message', '')}".strip()
    code = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    reason = getattr(exc, "reason", None) or getattr(exc, "message", None) or exc
    text = f"{code} {reason}" if isinstance(code, int) else f"{type(exc).__name__}: {reason}"
    return " ".join(str(text).split())[:300]


def _entra_refusal(exc: Exception) -> str | None:
    if "azure" not in type(exc).__module__:
        return None
    from kube_workqueue.clouds.azure_client import entra_refusal

    return entra_refusal(exc)


def _client_library(scheme: str):
    library, extra = EXTRAS[scheme]
    return Failed(
        f"{scheme}:// needs {library} in this Python (pip install 'kube-workqueue[{extra}]')"
    )


def _s3():
    try:
        import boto3
    except ImportError:
        raise _client_library("s3") from None
    return boto3.client("s3")


def _gcs():
    try:
        from google.cloud import storage
    except ImportError:
        raise _client_library("gs") from None
    return storage.Client()


def _gcs_retry():
    from google.cloud.storage.retry import DEFAULT_RETRY

    return DEFAULT_RETRY.with_timeout(30.0)


def _azure_container(bucket: str):
    try:
        import azure.storage.blob  # noqa: F401 - said as this scheme's missing library
    except ImportError:
        raise _client_library("azblob") from None
    # by its installed name: fetch-run-put also runs as a script (worker-images/generic), where
    # this module has no parent package to be relative to
    from kube_workqueue.clouds.azure_client import AzureSetupError, service_client

    account, container = bucket.split("/", 1)
    try:
        # a transfer rides out a minute of trouble (the manager retries the item after that)
        service = service_client(account, retries=3, first_backoff=4.0)
    except AzureSetupError as exc:
        raise Failed(str(exc)) from None
    except ImportError:  # azure-identity, for workload identity
        raise _client_library("azblob") from None
    return service.get_container_client(container)
