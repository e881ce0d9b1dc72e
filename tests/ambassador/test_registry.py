"""The source registry: a scheme picks one module; third parties register by entry point; the
folder keeps every spelling it had (a path, file:///path, --root)."""

from __future__ import annotations

import importlib.metadata

import pytest

from kube_workqueue.ambassador.sources import registry
from kube_workqueue.ambassador.sources.registry import SourceConfigError, resolve, source_type


def test_a_path_and_a_file_url_are_the_same_folder(tmp_path):
    by_path = resolve(str(tmp_path), {"SUFFIXES": [".mov"], "SETTLE": 0})
    by_url = resolve(f"file://{tmp_path}", {"SUFFIXES": [".mov"], "SETTLE": 0})
    assert by_path == by_url and by_path.kind == "filesystem"
    assert by_path.config["ROOT"] == str(tmp_path) and by_path.config["SETTLE"] == 0
    assert resolve(str(tmp_path)).config["SETTLE"] == 2.0  # the folder's default
    with pytest.raises(SourceConfigError, match="file:///absolute/path"):
        resolve("file://elsewhere/x")


def test_capabilities_are_declared():
    folder, s3, redis = (source_type(k) for k in ("filesystem", "s3", "redis"))
    assert folder.settles and not s3.settles and not redis.settles
    assert s3.content_versions and not folder.content_versions
    grouped = {k for k in ("filesystem", "s3", "gcs", "azure", "redis", "redis-stream", "nats",
                           "kafka") if source_type(k).data_groups}  # fmt: skip
    assert grouped == {"redis", "redis-stream", "nats", "kafka"}
    assert source_type("rediss") is redis and source_type("file") is folder


def test_each_type_names_its_source_and_its_extra_without_a_secret(tmp_path):
    from kube_workqueue.ambassador.server import _shown
    from kube_workqueue.ambassador.source_options import _extra_of

    assert _shown(resolve(str(tmp_path)).config) == str(tmp_path)
    assert _shown(resolve("s3://bkt/in/").config) == "s3://bkt/in/"
    redis_config = resolve("redis://:hunter2@127.0.0.1:6379/0?set=todo").config
    assert _shown(redis_config) == "redis set 'todo'"  # not the URL: it holds a password
    assert [_extra_of(u) for u in ("s3://b/", "rediss://h/0?set=k", "/data", "gopher://x")] == [
        "s3",
        "redis",
        "all",
        "all",
    ]


class Upper:
    """A third-party source type: items are the words of its URL, upper-cased."""

    kind = "words"
    extra = ""
    events = False
    content_versions = False
    settles = False
    data_groups = False

    def shown(self, config):
        return "words " + ",".join(config["WORDS"])

    def config_from_url(self, url, options):
        return {"WORDS": url.split("://", 1)[1].split(",")}

    def check(self, config):
        if not config["WORDS"][0]:
            raise SourceConfigError("no words")

    def open(self, config):
        from kube_workqueue.ambassador.sources.listed import ListedSource

        class Lister:
            where = "words"

            def list_all(self):
                return [(w.upper(), "-") for w in config["WORDS"]]

            def describe(self, name, meta):
                return {"name": name, "version": "1"}

            def changes(self, stop):
                return None

        return ListedSource(Lister())

    def describe(self, config, name, meta):
        return {"name": name, "version": "1"}


def test_a_third_party_source_comes_by_entry_point(monkeypatch):
    point = importlib.metadata.EntryPoint(
        name="words", value="tests.ambassador.test_registry:UPPER", group=registry.ENTRY_POINT_GROUP
    )
    monkeypatch.setattr(registry, "_third_party", lambda: [point])  # (what entry_points reads)
    spec = resolve("words://a,b")
    assert spec.kind == "words" and spec.config["SOURCE_TYPE"] == "words"
    assert registry.source_type("words").shown(spec.config) == "words a,b"
    source = registry.open_source(spec.config)
    source.start()
    try:
        assert source.page(None, None)[0] == ["A", "B"]
    finally:
        source.stop()
    with pytest.raises(SourceConfigError, match="unknown source scheme 'nope'.*words://"):
        resolve("nope://x")


UPPER = Upper()


@pytest.mark.parametrize("url", ["http://[::1", "s3://[bucket/", "redis://]x/0?set=k"])
def test_a_url_urllib_cannot_split_is_one_line_not_a_traceback(url):
    """`http://[::1` made urlsplit raise ValueError from `workqueue run`'s secret check: the
    scheme is still read, and resolving says the source is not a URL (without repeating it)."""
    from kube_workqueue.ambassador.sources.registry import scheme_of, typed_secret

    assert scheme_of(url) == url.split("://")[0]
    assert typed_secret(url) is None
    with pytest.raises(SourceConfigError, match="^the source is not a URL: Invalid IPv6 URL$"):
        resolve(url, {})


def test_a_source_whose_client_is_missing_names_its_extra():
    """Without a source's client library each source says which extra installs it - NATS named
    a module instead (`No module named 'nats.js'`). One process, each client hidden in turn."""
    import subprocess
    import sys

    script = """
import contextlib, io, sys
from kube_workqueue.manager.cli.main import main
for module, url in [("nats", "nats://127.0.0.1:9/S"), ("confluent_kafka", "kafka://127.0.0.1:9/t"),
                    ("redis", "redis://127.0.0.1:9/0?stream=s"), ("boto3", "s3://bucket-a/in/")]:
    sys.modules[module] = None
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main(["ambassador", "--source", url])
        except SystemExit:
            pass
    print(err.getvalue().strip())
    del sys.modules[module]
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.stdout.splitlines() == [
        f"workqueue ambassador: error: this source needs {module}: pip install "
        f"'kube-workqueue[{extra}]'"
        for module, extra in (("nats", "nats"), ("confluent_kafka", "kafka"), ("redis", "redis"),
                              ("boto3", "s3"))
    ], done.stdout + done.stderr  # fmt: skip
