"""One contract for the three object-store sources - S3 (moto), Google Cloud Storage
(gcp-storage-emulator) and Azure Blob Storage (Azurite) - each reached over HTTP by its official
client, pointed there by the client's own setting: the keys that are items, names that are never
paths, versions that follow the bytes, arrivals and removals, an outage held, and bad sources
in one line. What only one store does (S3's SQS notifications) is in its own module."""

from __future__ import annotations

import re

import pytest

from kube_workqueue.ambassador.sources.registry import SourceConfigError, resolve, source_type
from tests.support.servers import wait_until

HOSTILE = ["a b.mp4", "ünïcødé.mp4", "plus+sign.mp4", "100%.mp4", "../up.mp4", "x/../y.mp4"]


def opened(url: str, **options):
    spec = resolve(url, {"SUFFIXES": [".mp4"], **options})
    kind = source_type(spec.kind)
    kind.check(spec.config)
    source = kind.open(spec.config)
    source.start()
    return spec, source


def setenv(monkeypatch, env: dict) -> None:
    for key, value in env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)


def test_lists_keys_under_the_prefix_as_names(store):
    bucket = store.bucket("in/a.mp4", "in/b.MP4", "in/notes.txt", "in/sub/deep.mp4", "out/c.mp4")
    _, source = opened(store.url(bucket, "in/"))
    try:
        assert source.page(None, None)[0] == ["a.mp4", "b.MP4"]
    finally:
        source.stop()
    _, deep = opened(store.url(bucket, "in"), RECURSIVE=True)
    try:
        assert deep.page(None, None)[0] == ["a.mp4", "b.MP4", "sub/deep.mp4"]
    finally:
        deep.stop()


def test_keys_are_names_never_paths(store):
    hostile = [k for k in HOSTILE if store.dot_segments or ".." not in k]
    bucket = store.bucket(*(f"in/{k}" for k in hostile))
    _, source = opened(store.url(bucket, "in/"), RECURSIVE=True)
    try:
        names = source.page(None, None)[0]
        assert sorted(names) == sorted(hostile)
        for name in hostile:
            data = source.get(name)
            assert data["key"] == f"in/{name}"
            assert data["url"] == store.url(bucket, f"in/{name}")
            assert "path" not in data  # nothing joins a key to a folder
        assert source.get("nope.mp4") is None
    finally:
        source.stop()


def test_item_data_and_versions_follow_the_bytes(store):
    bucket = store.bucket("a.mp4", "b.mp4", body=b"same bytes")
    _, source = opened(store.url(bucket), POLL_INTERVAL=0.1)
    try:
        a, b = source.get("a.mp4"), source.get("b.mp4")
        assert a["size"] == len(b"same bytes") and a["contentType"] == "video/mp4"
        assert a["modified"].endswith("Z") and a["url"].startswith(f"{store.scheme}://")
        assert a["version"] == b["version"]  # the same bytes: the same version
        before = source.version
        store.copy(bucket, "b.mp4", "a.mp4")
        store.put(bucket, "b.mp4", b"new bytes")
        wait_until(lambda: source.get("b.mp4")["version"] != b["version"])
        assert source.get("a.mp4")["version"] == a["version"]  # copied again: unchanged
        assert source.get("b.mp4")["size"] == len(b"new bytes")
        assert source.version > before  # an overwrite is a new listing version
    finally:
        source.stop()


def test_the_same_bytes_are_the_same_version_in_every_store(store):
    """The version is a hash of the bytes' MD5, whichever store lists them (objects.py)."""
    bucket = store.bucket("a.mp4", body=b"same bytes")
    _, source = opened(store.url(bucket))
    try:  # md5(b"same bytes"), hashed as every object store's version is
        assert source.get("a.mp4")["version"] == "e-29df96a2fd25cec8"
    finally:
        source.stop()


def test_arrivals_and_removals_by_polling(store):
    bucket = store.bucket("a.mp4")
    _, source = opened(store.url(bucket), POLL_INTERVAL=0.1)
    _, events = source.subscribe()
    try:
        store.put(bucket, "b.mp4", b"x")
        store.delete(bucket, "a.mp4")
        wait_until(lambda: source.page(None, None)[0] == ["b.mp4"])
        seen = [events.get(timeout=5) for _ in range(2)]
        assert {(e["type"], e["item"]) for e in seen} == {("ADDED", "b.mp4"), ("DELETED", "a.mp4")}
        assert source.mode == "polling"
    finally:
        source.unsubscribe(events)
        source.stop()


def test_an_outage_keeps_the_items_and_makes_it_unready(store, monkeypatch):
    bucket = store.bucket("a.mp4")
    spec, source = opened(store.url(bucket), POLL_INTERVAL=0.1)
    try:
        working = source.lister
        setenv(monkeypatch, store.unreachable_env)
        source.lister = type(working)(spec.config)  # the store goes away
        store.delete(bucket, "a.mp4")
        wait_until(lambda: not source.ready(), timeout=60)
        assert re.search(r"cannot reach", source.problem), source.problem
        assert source.page(None, None)[0] == ["a.mp4"]  # never "every item was removed"
        source.lister = working  # back
        wait_until(source.ready, timeout=60)
        assert source.page(None, None)[0] == []
    finally:
        source.stop()


def test_a_missing_bucket_unreachable_store_or_no_credentials_is_one_line_at_start(
    store, monkeypatch
):
    missing = "no-such-bucket-here"
    with pytest.raises(SourceConfigError, match=r"(bucket|container) does not exist") as told:
        opened(store.url(missing))
    assert "\n" not in str(told.value) and missing in str(told.value)
    setenv(monkeypatch, store.unreachable_env)
    with pytest.raises(SourceConfigError, match="cannot reach"):
        opened(store.url("any-bucket"))
    setenv(monkeypatch, store.no_credentials_env)
    with pytest.raises(SourceConfigError, match="credentials"):
        opened(store.url("any-bucket"))


@pytest.mark.parametrize(
    ("url", "options", "said"),
    [
        ("s3://", {}, "an S3 source is s3://bucket/prefix/"),
        ("s3://Bad_Bucket!/", {}, "an S3 source is s3://bucket/prefix/"),
        ("s3://bkt/?x=1", {}, "an S3 source is s3://bucket/prefix/"),
        ("s3://bkt/", {"SETTLE": 1.0}, "--settle applies to folder sources only"),
        ("s3://bkt/", {"S3_ENDPOINT_URL": "ftp://x"}, "--endpoint-url must be an http(s) URL"),
        ("gs://", {}, "a Cloud Storage source is gs://bucket/prefix/"),
        ("gs://UPPER/", {}, "a Cloud Storage source is gs://bucket/prefix/"),
        ("gs://bkt/?x=1", {}, "a Cloud Storage source is gs://bucket/prefix/"),
        ("gs://bkt/", {"SETTLE": 1.0}, "--settle applies to folder sources only"),
        ("gs://bkt/", {"S3_ENDPOINT_URL": "http://x"}, "--endpoint-url applies to S3 sources"),
        ("azblob://acct/", {}, "an Azure Blob source is azblob://ACCOUNT/CONTAINER/prefix/"),
        ("azblob://Acct/c1/", {}, "an Azure Blob source is azblob://ACCOUNT/CONTAINER/prefix/"),
        ("azblob://acct/bad--name/", {}, "an Azure Blob source is azblob://ACCOUNT/CONTAINER/"),
        ("azblob://acct/ctr/", {"SQS_QUEUE_URL": "http://q"}, "--sqs-queue-url applies to S3"),
        ("gopher://x/", {}, "unknown source scheme 'gopher'"),
    ],
)
def test_malformed_sources_are_one_line(url, options, said):
    with pytest.raises(SourceConfigError, match=re.escape(said)):
        resolve(url, options)


def test_cloud_storage_s_own_settings_are_named_when_wrong(gcs_emulator, monkeypatch, tmp_path):
    """The client's environment, checked where the client would only say "MissingSchema" or
    "no credentials found": an emulator address that is no URL, a server there that is no
    Cloud Storage (its 404 was "the bucket does not exist"), a key file missing or not JSON -
    each one line naming the variable."""
    import http.server
    import threading

    gcs = gcs_emulator
    bucket = gcs.bucket("a.mp4")
    setenv(monkeypatch, {"STORAGE_EMULATOR_HOST": "notaurl"})
    with pytest.raises(SourceConfigError, match="STORAGE_EMULATOR_HOST must be an http"):
        opened(gcs.url(bucket))
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        setenv(monkeypatch, {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{other.server_port}"})
        with pytest.raises(SourceConfigError, match="no Cloud Storage's words"):
            opened(gcs.url(bucket))
    finally:
        other.shutdown()
    setenv(monkeypatch, {**gcs.no_credentials_env})
    for content, said in ((None, "cannot read it"), ("{not json", "not a JSON key file"),
                          ('{"a": 1}', "not a Google Cloud key file")):  # fmt: skip
        key = tmp_path / "key.json"
        if content is not None:
            key.write_text(content)
        setenv(monkeypatch, {"GOOGLE_APPLICATION_CREDENTIALS": str(key)})
        with pytest.raises(SourceConfigError, match=f"GOOGLE_APPLICATION_CREDENTIALS .*{said}"):
            opened(gcs.url(bucket))


def test_a_wrong_key_is_one_line_at_start(azurite, monkeypatch):
    """Of the three emulators only Azurite checks a signature (moto and gcp-storage-emulator take
    any credentials): a connection string with another account key is refused, in one line,
    through the real command."""
    from tests.e2e.conftest import workqueue

    bucket = azurite.bucket("a.mp4")
    wrong = azurite.connection_string.replace("AccountKey=", "AccountKey=AAAA")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", wrong)
    done = workqueue("ambassador", "--source", azurite.url(bucket))
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip()
    assert said.endswith(
        "access denied: check the account key, SAS token or the identity's role on the account"
    ), said
    assert "\n" not in said and "AccountKey" not in said and "AAAA" not in said
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    other = workqueue("ambassador", "--source", f"azblob://otheraccount/{bucket}/")
    mismatch = "is for the account 'devstoreaccount1', not 'otheraccount'"
    assert other.returncode == 2 and other.stderr.strip().endswith(mismatch), other.stderr
