"""The three object stores under one face, for the one contract suite the S3, Cloud Storage and
Azure Blob sources share (tests/ambassador/test_object_sources.py) and their benchmark:

  * S3: moto's server (stores.ObjectStore), reached by boto3 through AWS_ENDPOINT_URL;
  * Cloud Storage: `gcp-storage-emulator` (its server, in this process, over HTTP on loopback),
    reached by google-cloud-storage through STORAGE_EMULATOR_HOST - the client's own setting;
  * Azure Blob Storage: Azurite, Microsoft's emulator (the npm package, run by Node.js, a
    process of its own), reached by azure-storage-blob through AZURE_STORAGE_CONNECTION_STRING.

Each store writes through its own official client, as a user's uploader would, and says which
environment points a client at it (`env`), at nothing (`unreachable_env`) and at no credentials
(`no_credentials_env`). A bucket (an Azure container) has a unique name per call.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from .servers import free_port, wait_until
from .stores import ObjectStore, end


def passed_on(env: dict) -> list[str]:
    """`--worker-env NAME` for each credential in `env` (a store's): what a worker that reads
    or writes the store itself (fetch-run-put) must be handed by name - the manager withholds
    every source credential from workers otherwise."""
    from kube_workqueue.ambassador.sources.registry import credential_variables

    flags: list[str] = []
    for name in sorted(set(env) & credential_variables()):
        flags += ["--worker-env", name]
    return flags


ROOT = Path(__file__).resolve().parents[2]
AZURITE = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's well-known development account (public: Microsoft's docs print it)
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def unique_bucket() -> str:
    return f"b-{uuid.uuid4().hex[:12]}"


class S3Buckets:
    """moto's S3, as the contract suite sees a store."""

    scheme = "s3"
    dot_segments = True  # keys with `..` segments are stored as named

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.env = dict(store.env)
        self.unreachable_env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # nothing listens
        self.no_credentials_env = {
            "AWS_ACCESS_KEY_ID": None,
            "AWS_SECRET_ACCESS_KEY": None,
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def url(self, bucket: str, prefix: str = "") -> str:
        return f"s3://{bucket}/{prefix}"

    def bucket(self, *keys: str, body: bytes = b"video") -> str:
        return self.store.bucket(*keys, body=body)

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.store.client().put_object(Bucket=bucket, Key=key, Body=body)

    def copy(self, bucket: str, source: str, key: str) -> None:
        self.store.client().copy_object(Bucket=bucket, Key=key, CopySource=f"{bucket}/{source}")

    def delete(self, bucket: str, key: str) -> None:
        self.store.client().delete_object(Bucket=bucket, Key=key)

    def read(self, bucket: str, key: str) -> bytes:
        return self.store.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def fill(self, bucket: str, keys, body: bytes = b"x") -> None:
        self.store.fill(bucket, keys, body)


class GcsEmulator:
    """gcp-storage-emulator's server in this process, in memory, on a loopback port."""

    scheme = "gs"
    # Cloud Storage stores a name with `..` segments (only "." and ".." alone are refused); the
    # emulator keeps objects in a file-system-like tree and answers 500 for one
    dot_segments = False

    def __init__(self) -> None:
        import logging

        from gcp_storage_emulator.server import create_server

        logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
        self.port = free_port()
        self.server = create_server("127.0.0.1", self.port, in_memory=True)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {"STORAGE_EMULATOR_HOST": self.endpoint}
        self.unreachable_env = {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"}
        # no emulator, no key file, and no metadata server asked (NO_GCE_CHECK: google-auth's)
        self.no_credentials_env = {
            "STORAGE_EMULATOR_HOST": None,
            "NO_GCE_CHECK": "True",
            "GOOGLE_APPLICATION_CREDENTIALS": None,
            "CLOUDSDK_CONFIG": "/nonexistent",
        }

    def client(self):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project="test",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.endpoint},
        )

    def url(self, bucket: str, prefix: str = "") -> str:
        return f"gs://{bucket}/{prefix}"

    def bucket(self, *keys: str, body: bytes = b"video") -> str:
        name = unique_bucket()
        bucket = self.client().create_bucket(name)
        for key in keys:
            bucket.blob(key).upload_from_string(body)
        return name

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.client().bucket(bucket).blob(key).upload_from_string(body)

    def copy(self, bucket: str, source: str, key: str) -> None:
        b = self.client().bucket(bucket)
        b.copy_blob(b.blob(source), b, key)

    def delete(self, bucket: str, key: str) -> None:
        self.client().bucket(bucket).blob(key).delete()

    def read(self, bucket: str, key: str) -> bytes:
        return self.client().bucket(bucket).blob(key).download_as_bytes()

    def fill(self, bucket: str, keys, body: bytes = b"x") -> None:
        """Many objects at once, straight into the emulator's storage, each as its upload handler
        records one (a benchmark's 100,000 in seconds: an upload rewrites the emulator's whole
        index, so one each would take hours)."""
        from gcp_storage_emulator.handlers.objects import _checksums, _make_object_resource

        storage = self.server._storage
        objects = storage.objects.setdefault(bucket, {})
        for key in keys:
            obj = _make_object_resource(self.endpoint, bucket, key, "video/mp4", len(body))
            storage._store.write_bytes(storage._object_path(bucket, key), body)
            objects[key] = _checksums(body, obj)
        storage._write_config_to_file()

    def stop(self) -> None:
        self.server.stop()


class Azurite:
    """Azurite's blob service (Node.js, a process of its own), in memory, on a loopback port,
    with telemetry off (it would otherwise try to reach Microsoft), in a folder of its own.

    With `tls` (support/tls.py) it serves HTTPS and takes OAuth bearer tokens as well as the
    account key (`--oauth basic`: Azure refuses a bearer token over plain HTTP, and so do the
    SDK and Azurite); `endpoint_env` then points a client at it with no credential at all."""

    scheme = "azblob"
    # a `..` segment is resolved out of a blob's URL before the request is signed (Azure's naming
    # rules warn against such names): one cannot be written as named
    dot_segments = False

    def __init__(self, tls=None) -> None:
        if not AZURITE.exists():
            raise RuntimeError(f"{AZURITE} is missing: `make test` installs it (npm azurite)")
        node = shutil.which("node")
        self.port = free_port()
        self.folder = tempfile.mkdtemp(prefix="azurite-")
        self.process = subprocess.Popen(
            [
                node or "node",
                str(AZURITE),
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                str(self.port),
                "--inMemoryPersistence",
                "--disableTelemetry",
                "--silent",
                # the newest client asks for a service version newer than the newest Azurite
                # knows (2026-10-06 here): the check Microsoft documents turning off for that
                "--skipApiVersionCheck",
                *self._tls_flags(tls),
            ],
            cwd=self.folder,  # (with in-memory persistence, where nothing should be written)
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.tls = tls
        protocol = "https" if tls else "http"
        self.endpoint = f"{protocol}://127.0.0.1:{self.port}/{AZURE_ACCOUNT}"
        self.connection_string = (
            f"DefaultEndpointsProtocol={protocol};AccountName={AZURE_ACCOUNT};"
            f"AccountKey={AZURE_KEY};BlobEndpoint={self.endpoint};"
        )
        # where the account answers, and nothing else: the credential must come from elsewhere
        self.endpoint_env = {"AZURE_STORAGE_CONNECTION_STRING": f"BlobEndpoint={self.endpoint}"}
        self.env = {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string}
        self.unreachable_env = {
            "AZURE_STORAGE_CONNECTION_STRING": self.connection_string.replace(
                f":{self.port}/", ":9/"
            )
        }
        self.no_credentials_env = {
            "AZURE_STORAGE_CONNECTION_STRING": None,
            "AZURE_STORAGE_KEY": None,
            "AZURE_STORAGE_SAS_TOKEN": None,
            "AZURE_FEDERATED_TOKEN_FILE": None,
        }
        wait_until(self._answers, timeout=60)

    @staticmethod
    def _tls_flags(tls) -> list[str]:
        if tls is None:
            return []
        return ["--oauth", "basic", "--cert", str(tls.cert), "--key", str(tls.key)]

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"azurite exited with {self.process.returncode}")
        try:
            self.service().get_service_properties()
        except Exception:  # not listening yet
            return False
        return True

    def service(self):
        from azure.storage.blob import BlobServiceClient

        verify = {"connection_verify": str(self.tls.ca)} if self.tls else {}
        return BlobServiceClient.from_connection_string(
            self.connection_string, retry_total=0, **verify
        )

    def url(self, bucket: str, prefix: str = "") -> str:
        return f"azblob://{AZURE_ACCOUNT}/{bucket}/{prefix}"

    def bucket(self, *keys: str, body: bytes = b"video") -> str:
        name = unique_bucket()
        container = self.service().create_container(name)
        for key in keys:
            container.upload_blob(key, body)
        return name

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.service().get_container_client(bucket).upload_blob(key, body, overwrite=True)

    def copy(self, bucket: str, source: str, key: str) -> None:
        container = self.service().get_container_client(bucket)
        target = container.get_blob_client(key)
        target.start_copy_from_url(container.get_blob_client(source).url)
        wait_until(lambda: target.get_blob_properties().copy.status == "success")

    def delete(self, bucket: str, key: str) -> None:
        self.service().get_container_client(bucket).delete_blob(key)

    def read(self, bucket: str, key: str) -> bytes:
        return self.service().get_container_client(bucket).download_blob(key).readall()

    def fill(self, bucket: str, keys, body: bytes = b"x") -> None:
        """Many blobs, uploaded from a pool of threads (Azurite has no in-process backdoor)."""
        from concurrent.futures import ThreadPoolExecutor

        container = self.service().get_container_client(bucket)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda key: container.upload_blob(key, body, overwrite=True), keys))

    def stop(self) -> None:
        end(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)
