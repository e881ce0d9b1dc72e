"""The NATS JetStream source's own part (`ambassador/sources/nats_stream.py`) against a real
nats-server: what a message's fields are (a JSON payload, text, bytes, headers), the keys a
source may be keyed by, and the bad sources, each one line. The behaviour every log source
shares is the contract suite's: test_log_sources.py."""

from __future__ import annotations

import pytest

from kube_workqueue.ambassador.sources.nats_client import config_from_url, overlaps
from kube_workqueue.ambassador.sources.registry import SourceConfigError, resolve
from tests.ambassador.test_redis_source import opened
from tests.support.logs import NatsLog


def test_a_message_s_fields_are_its_payload_s_its_headers_and_its_subject(nats_store):
    log = NatsLog(nats_store)
    p = log.prefix
    nats_store.publish_many([
        (f"{p}.a", {"width": 320, "tags": ["x"], "file": "a.mp4"}, {"Trace": "t1"}),
        (f"{p}.b", "plain text", None),
        (f"{p}.c", b"\xff\x00", None),
    ])  # fmt: skip
    source = opened(log.url(keyed=False))
    try:
        names = source.page(None, None)[0]
        tag = log.tag()  # the stream's identity (its created time), in every name
        assert names == [f"{tag}-000000000001", f"{tag}-000000000002", f"{tag}-000000000003"]
        first, text, raw = (source.get(name) for name in names)
        assert (first["width"], first["tags"], first["file"]) == ("320", '["x"]', "a.mp4")
        assert first["header.Trace"] == "t1" and first["subject"] == f"{p}.a"
        assert text["body"] == "plain text" and raw["body.base64"] == "/wA="
    finally:
        source.stop()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("subject", ["clips.a.mp4", "clips.b.mp4"]), ("subject.last", ["mp4"]),
     ("file", ["a.mp4", "b.mp4"]), ("header.Id", ["one", "two"])],
)  # fmt: skip
def test_a_source_is_keyed_by_the_subject_its_last_token_a_field_or_a_header(
    nats_store, name, expected
):
    log = NatsLog(nats_store)
    nats_store.publish(f"{log.prefix}.clips.a.mp4", {"file": "a.mp4"}, {"Id": "one"})
    nats_store.publish(f"{log.prefix}.clips.b.mp4", {"file": "b.mp4"}, {"Id": "two"})
    url = f"{nats_store.url}/{log.stream}?subject={log.prefix}.>&name={name}"
    source = opened(url)
    try:
        assert source.page(None, None)[0] == expected
    finally:
        source.stop()


def test_a_subject_filter_reads_only_its_subjects(nats_store):
    log = NatsLog(nats_store)
    nats_store.publish(f"{log.prefix}.hd.a.mp4", {})
    nats_store.publish(f"{log.prefix}.sd.b.mp4", {})
    source = opened(f"{nats_store.url}/{log.stream}?subject={log.prefix}.hd.>&name=subject")
    try:
        assert source.page(None, None)[0] == ["a.mp4"]
    finally:
        source.stop()


def test_bad_nats_sources_are_one_line(nats_store):
    log = NatsLog(nats_store)
    with pytest.raises(SourceConfigError, match="no such stream"):
        opened(f"{nats_store.url}/NOPE_{log.stream}")
    with pytest.raises(SourceConfigError, match="matches none of the stream's subjects"):
        opened(f"{nats_store.url}/{log.stream}?subject=elsewhere.>")
    with pytest.raises(SourceConfigError, match="cannot reach the NATS server at 127.0.0.1:1"):
        opened("nats://127.0.0.1:1/S")
    for url, said in [
        ("nats://h:4222/", "a NATS source is"),
        ("nats://h:4222/S?set=x", "a NATS source is"),
        ("nats://h:4222/S.T", "cannot be a stream's name"),
        ("nats://h:4222/S?subject=a.>.b", "is not a subject filter"),
        ("nats://h:port/S", "not a port number"),
    ]:
        with pytest.raises(SourceConfigError, match=said):
            resolve(url)


def test_a_password_in_the_url_stays_in_the_url_and_never_in_what_is_shown():
    config = config_from_url("nats://me:s3cret@h:4222/S?subject=a.*", {})
    assert config["NATS_URL"] == "nats://me:s3cret@h:4222" and config["NATS_SUBJECT"] == "a.*"
    from kube_workqueue.ambassador.sources.nats_stream import SOURCE_TYPE

    assert "s3cret" not in SOURCE_TYPE.shown(config)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [("a.>", "a.b.c", True), ("a.*", "a.b", True), ("a.*", "a.b.c", False), ("a", "a.>", False),
     ("a.b", "a.c", False), (">", "x", True), ("a.*.c", "a.b.*", True)],
)  # fmt: skip
def test_subject_filters_overlap_as_the_server_matches_them(a, b, expected):
    assert overlaps(a, b) is expected and overlaps(b, a) is expected
