"""Azure workload identity, end to end: a pod's environment as AKS's webhook leaves it (a
projected service-account token in a file, the identity's client and tenant ids, the authority)
and no key, SAS or connection-string credential. The ambassador lists the container and
fetch-run-put reads and writes it with an Entra ID token traded for the file's (support/entra.py
checks the trade as Entra does; Azurite takes the token over HTTPS). What a misconfigured pod
gets is one line at start, naming the cause."""

from __future__ import annotations

import os
import sys

from .conftest import workqueue
from .test_object_store import FETCH_RUN_PUT, upper_script

SECRET_VARIABLES = (
    "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
)  # fmt: skip


def pod_env(identity, **changes) -> dict[str, str]:
    """This machine's environment with no Azure credential of its own, plus the identity's."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES}
    env.update(identity.env)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


# what fetch-run-put needs of the pod's identity, and the endpoint's connection string (a
# credential's variable, though it holds no key here): withheld from workers unless named
WORKLOAD_IDENTITY = tuple(
    word
    for name in (
        "AZURE_FEDERATED_TOKEN_FILE",
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
        "AZURE_STORAGE_CONNECTION_STRING",
    )  # fmt: skip
    for word in ("--worker-env", name)
)


def run_command(identity, bucket: str, tmp_path) -> tuple:
    azurite = identity.azurite
    return (
        "run", azurite.url(bucket, "in/"), "--suffix", ".txt", "--state-dir", tmp_path / "state",
        *WORKLOAD_IDENTITY, "--", sys.executable, FETCH_RUN_PUT, "--output",
        azurite.url(bucket, "out/{stem}.up"),
        upper_script(tmp_path),
    )  # fmt: skip


def test_workqueue_run_lists_fetches_and_puts_with_the_pods_identity_alone(
    azure_workload_identity, tmp_path
):
    identity = azure_workload_identity
    names = ["a.txt", "with space.txt"]
    bucket = identity.azurite.bucket(*(f"in/{n}" for n in names), body=b"hello")
    asked = len(identity.entra.requests)
    env = pod_env(identity)
    assert env["AZURE_STORAGE_CONNECTION_STRING"].startswith("BlobEndpoint=https://")
    assert "AccountKey" not in env["AZURE_STORAGE_CONNECTION_STRING"]

    first = workqueue(*run_command(identity, bucket, tmp_path), env=env, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 items: 2 succeeded" in first.stdout, first.stdout
    for name in names:
        assert identity.azurite.read(bucket, f"out/{name[:-4]}.up") == b"HELLO"
    trades = identity.entra.requests[asked:]
    # the ambassador's process and each worker's traded the token file for a storage token:
    # the federated token is the only secret that was sent, and nothing was refused
    assert len(trades) >= 3, trades
    for trade in trades:
        assert trade["client_assertion"] == identity.entra.federated_token
        assert trade["client_id"] == identity.entra.client_id
        assert trade["scope"] == "https://storage.azure.com/.default"
        assert "client_secret" not in trade

    again = workqueue(*run_command(identity, bucket, tmp_path), env=env, timeout=120)
    assert again.returncode == 0 and "0 succeeded, 2 already done" in again.stdout, again.stdout


def test_a_token_entra_does_not_trust_is_one_line_at_start(azure_workload_identity, tmp_path):
    """A service account not federated with the identity: Entra refuses the trade (AADSTS700213),
    and the ambassador says so in one line, before anything runs - not a 503 later."""
    identity = azure_workload_identity
    bucket = identity.azurite.bucket("in/a.txt")
    stranger = tmp_path / "other-token"
    stranger.write_text("a-token-of-another-service-account")
    env = pod_env(identity, AZURE_FEDERATED_TOKEN_FILE=str(stranger))
    done = workqueue("ambassador", "--source", identity.azurite.url(bucket), env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip()
    assert "\n" not in said and "Traceback" not in said, said
    assert "access denied: Entra ID refused the workload identity's token (AADSTS700213" in said
    assert "a-token-of-another" not in said  # the token itself is never printed


def test_a_half_configured_identity_or_none_is_one_line_naming_what_is_missing(
    azure_workload_identity, tmp_path
):
    identity = azure_workload_identity
    bucket = identity.azurite.bucket("in/a.txt")
    url = identity.azurite.url(bucket)
    half = workqueue(
        "ambassador", "--source", url, env=pod_env(identity, AZURE_CLIENT_ID=None), timeout=60
    )
    assert half.returncode == 2, half.stderr
    assert half.stderr.strip().endswith(
        "Azure workload identity is half configured: AZURE_CLIENT_ID not set"
    ), half.stderr
    unreadable = pod_env(identity, AZURE_FEDERATED_TOKEN_FILE=str(tmp_path / "not-there"))
    gone = workqueue("ambassador", "--source", url, env=unreadable, timeout=60)
    assert gone.returncode == 2 and "AZURE_FEDERATED_TOKEN_FILE is not a readable file" in (
        gone.stderr
    ), gone.stderr
    bare = pod_env(
        identity, AZURE_FEDERATED_TOKEN_FILE=None, AZURE_CLIENT_ID=None, AZURE_TENANT_ID=None
    )
    none = workqueue("ambassador", "--source", url, env=bare, timeout=60)
    assert none.returncode == 2 and "no Azure credentials found" in none.stderr, none.stderr
    assert "AZURE_FEDERATED_TOKEN_FILE" in none.stderr  # the way without a secret is named


def test_fetch_run_put_with_a_refused_identity_fails_the_item_in_one_line(
    azure_workload_identity, tmp_path
):
    import json
    import subprocess

    identity = azure_workload_identity
    bucket = identity.azurite.bucket("in/a.txt", body=b"hello")
    stranger = tmp_path / "other-token"
    stranger.write_text("a-token-of-another-service-account")
    item = tmp_path / "item.json"
    request = {"input": identity.azurite.url(bucket, "in/a.txt"),
               "script": [str(upper_script(tmp_path))],
               "output": identity.azurite.url(bucket, "out/a.up")}  # fmt: skip
    item.write_text(json.dumps(request))
    env = pod_env(identity, AZURE_FEDERATED_TOKEN_FILE=str(stranger), WORK_ITEM_FILE=str(item))
    done = subprocess.run(
        [sys.executable, str(FETCH_RUN_PUT)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    said = done.stderr.strip()
    assert said.startswith("fetch-run-put: download of azblob://") and "\n" not in said, said
    assert "a-token-of-another" not in said
