"""The Azure Blob Storage client for one account, from the environment - the ambassador's
`azblob://` source and fetch-run-put's `azblob://` locations are set up by this one rule, so a
pod that works for one works for the other.

Where the account answers:
  * `AZURE_STORAGE_CONNECTION_STRING`'s endpoint when it is set (its `BlobEndpoint`, or its
    `AccountName` and `EndpointSuffix`): Azurite, a sovereign cloud, a DNS-zone endpoint;
  * else `https://ACCOUNT.blob.core.windows.net`.
A connection string must be for the URL's account (a pod given another account's string is a
configuration mistake, said at once, not a listing of the wrong container).

The credential, the first of:
  1. the connection string's own `AccountKey` or `SharedAccessSignature`;
  2. `AZURE_STORAGE_KEY` (the account key) or `AZURE_STORAGE_SAS_TOKEN` (a SAS, `?` or not);
  3. Azure workload identity: `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_CLIENT_ID` and
     `AZURE_TENANT_ID` (and `AZURE_AUTHORITY_HOST`), which AKS's workload identity webhook puts
     in a pod whose service account names a managed identity; azure-identity's
     WorkloadIdentityCredential trades the projected service-account token for an Entra ID
     token, re-reading the file as Kubernetes rotates it. No secret is stored anywhere.
Nothing else is tried: not the instance metadata service, not a developer's `az login` - a pod
that was meant to use one of the three and is missing it gets the one-line error, rather than
whatever identity the node happens to have.

Instance discovery (MSAL asking login.microsoftonline.com whether an unknown authority is
Microsoft's) is off: the authority is the one the pod's environment names, set by the same
webhook that wrote the token file, and a private cloud's authority is unknown to that service.

Errors are `AzureSetupError`, one line, for the caller to turn into its own (a configuration
error at the ambassador's start, a failed transfer in the worker).
"""

from __future__ import annotations

import functools
import logging
import os

KEY_VARIABLES = ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN")
WORKLOAD_IDENTITY_VARIABLES = ("AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID", "AZURE_TENANT_ID")
CREDENTIALS_SAID = (
    "AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, or workload "
    "identity's AZURE_FEDERATED_TOKEN_FILE with AZURE_CLIENT_ID and AZURE_TENANT_ID"
)


class AzureSetupError(Exception):
    """The environment does not make a client for the account (one line)."""


def service_client(account: str, *, retries: int, first_backoff: float, **settings):
    """A BlobServiceClient for `account` (module docstring) that retries a failed request
    `retries` times, `first_backoff` seconds apart and doubling - but never a refused token -
    with `settings` (timeouts) passed to the client. Raises AzureSetupError; ImportError when
    azure-storage-blob (or, for workload identity, azure-identity) is not installed: the caller
    names its extra."""
    from azure.storage.blob import BlobServiceClient

    settings["retry_policy"] = _retry_policy()(
        initial_backoff=first_backoff,
        increment_base=2,
        retry_total=retries,
        random_jitter_range=first_backoff,
    )
    # the SDK's own log lines are not the caller's to print: every request and response at
    # INFO, a refused token at WARNING once per retry; the caller says a failure in one line
    logging.getLogger("azure").setLevel(logging.ERROR)
    connection = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if connection:
        try:
            service = BlobServiceClient.from_connection_string(connection, **settings)
        except ValueError:
            raise AzureSetupError("AZURE_STORAGE_CONNECTION_STRING is malformed") from None
        if service.account_name != account:
            raise AzureSetupError(
                f"AZURE_STORAGE_CONNECTION_STRING is for the account "
                f"{service.account_name!r}, not {account!r}"
            )
        if service.credential is not None:
            return service
        endpoint = service.url
    else:
        endpoint = f"https://{account}.blob.core.windows.net"
    return BlobServiceClient(endpoint, credential=_credential(), **settings)


@functools.cache
def _retry_policy():
    """The storage client's exponential retry, except that a token Entra ID refused is final:
    the client retries every Azure error, and the same token file is refused again - a worker
    would wait through a minute of backoff to say so."""
    from azure.core.exceptions import ClientAuthenticationError
    from azure.storage.blob import ExponentialRetry

    class RefusalIsFinal(ExponentialRetry):
        def increment(self, settings, request, response=None, error=None) -> bool:
            if isinstance(error, ClientAuthenticationError):
                return False
            return super().increment(settings, request, response=response, error=error)

    return RefusalIsFinal


def entra_refusal(exc: Exception) -> str | None:
    """Entra ID's reason (its AADSTS code and words, one line) when `exc` is a token refused to
    the workload identity, else None."""
    said = str(getattr(exc, "message", None) or exc)
    line = next((line for line in said.splitlines() if "AADSTS" in line), None)
    if line is None:
        return None
    reason = line[line.index("AADSTS") :].split(" Trace ID")[0].strip(" '\"")
    return reason[:200]


def _credential():
    key = os.environ.get("AZURE_STORAGE_KEY")
    if key:
        return key
    sas = (os.environ.get("AZURE_STORAGE_SAS_TOKEN") or "").lstrip("?")
    if sas:  # as the portal shows it, with or without its `?`
        return sas
    present = [name for name in WORKLOAD_IDENTITY_VARIABLES if os.environ.get(name)]
    if not present:
        raise AzureSetupError(f"no Azure credentials found ({CREDENTIALS_SAID})")
    if len(present) < len(WORKLOAD_IDENTITY_VARIABLES):
        missing = [name for name in WORKLOAD_IDENTITY_VARIABLES if name not in present]
        raise AzureSetupError(
            f"Azure workload identity is half configured: {', '.join(missing)} not set"
        )
    token_file = os.environ["AZURE_FEDERATED_TOKEN_FILE"]
    if not os.access(token_file, os.R_OK):
        raise AzureSetupError(
            "AZURE_FEDERATED_TOKEN_FILE is not a readable file (is the service account "
            "annotated for workload identity?)"
        )
    from azure.identity import WorkloadIdentityCredential

    return WorkloadIdentityCredential(
        tenant_id=os.environ["AZURE_TENANT_ID"],
        client_id=os.environ["AZURE_CLIENT_ID"],
        token_file_path=token_file,
        disable_instance_discovery=True,
    )
