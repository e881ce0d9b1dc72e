"""The source client's retries and error messages (unit tests of the HTTP client: `responses`)."""

from __future__ import annotations

import pytest
import responses

from kube_workqueue.manager.sources.http import SourceClient, SourceProtocolError, SourceUnavailable

BASE = "http://source.test"


def client(**kw):
    return SourceClient(BASE, sleep=lambda s: None, **kw)


@responses.activate
def test_list_follows_continue_tokens():
    responses.get(
        f"{BASE}/api/v1/items",
        json={
            "kind": "ItemList",
            "apiVersion": "v1",
            "items": ["a", "b"],
            "metadata": {"continue": "Yg"},
        },
        match=[responses.matchers.query_param_matcher({"limit": "10000"})],
    )
    responses.get(
        f"{BASE}/api/v1/items",
        json={"kind": "ItemList", "apiVersion": "v1", "items": ["c"], "metadata": {}},
        match=[responses.matchers.query_param_matcher({"limit": "10000", "continue": "Yg"})],
    )
    names_only = client()
    names_only.full_view = False  # a source known not to serve view=full
    assert names_only.list_items() == ["a", "b", "c"]


def _full(items, metadata=None):
    return {"kind": "ItemList", "apiVersion": "v1", "items": items, "metadata": metadata or {}}


@responses.activate
def test_the_full_view_brings_the_data_and_get_item_uses_it_once():
    a, b = {"name": "a", "version": "s-1"}, {"name": "b", "version": "s-2"}
    responses.get(
        f"{BASE}/api/v1/items",
        json=_full([{"name": "a", "data": a}], {"continue": "n.YQ"}),
        match=[responses.matchers.query_param_matcher({"limit": "10000", "view": "full"})],
    )
    responses.get(
        f"{BASE}/api/v1/items",
        json=_full([{"name": "b", "data": b}]),
        match=[
            responses.matchers.query_param_matcher(
                {"limit": "10000", "view": "full", "continue": "n.YQ"}
            )
        ],
    )
    c = client()
    assert c.list_items() == ["a", "b"] and c.full_view is True
    assert c.get_item("a") == a  # no request: it came with the listing
    assert len(responses.calls) == 2
    responses.get(f"{BASE}/api/v1/items/a", json={"kind": "Item", "data": {"name": "a"}})
    assert c.get_item("a") == {"name": "a"}  # used once: the next look asks the source
    assert len(responses.calls) == 3


@responses.activate
def test_a_source_without_the_full_view_falls_back_to_names_and_per_item_gets():
    responses.get(
        f"{BASE}/api/v1/items",
        status=400,
        json={"kind": "Status", "code": 400, "message": "unknown query parameter: view"},
        match=[responses.matchers.query_param_matcher({"limit": "10000", "view": "full"})],
    )
    responses.get(
        f"{BASE}/api/v1/items",
        json=_full(["a"]),
        match=[responses.matchers.query_param_matcher({"limit": "10000"})],
    )
    responses.get(f"{BASE}/api/v1/items/a", json={"kind": "Item", "data": {"name": "a"}})
    c = client()
    assert c.list_items() == ["a"] and c.full_view is False
    assert c.get_item("a") == {"name": "a"}
    c.list_items()  # not asked for the full view again
    views = [call.request.url for call in responses.calls if "view=full" in call.request.url]
    assert len(views) == 1


@responses.activate
def test_a_source_that_ignores_the_view_parameter_is_taken_as_names_only():
    responses.get(f"{BASE}/api/v1/items", json=_full(["a", "b"]))
    c = client()
    assert c.list_items() == ["a", "b"] and c.full_view is False


@responses.activate
def test_5xx_and_connection_errors_are_retried_then_reported_in_one_line():
    responses.get(f"{BASE}/api/v1/items", status=503)
    responses.get(f"{BASE}/api/v1/items", status=500)
    responses.get(f"{BASE}/api/v1/items", json={"kind": "ItemList", "items": ["a"]})
    assert client(retries=3).list_items() == ["a"]
    responses.reset()
    responses.get(f"{BASE}/api/v1/items", status=502)
    with pytest.raises(SourceUnavailable) as exc:
        client(retries=2).list_items()
    assert str(exc.value) == f"source {BASE} unreachable (HTTP 502)"
    assert len(responses.calls) == 3


def test_unreachable_source_names_the_url():
    c = SourceClient("http://127.0.0.1:9", retries=1, sleep=lambda s: None, timeout=1)
    with pytest.raises(SourceUnavailable, match="127.0.0.1:9 unreachable"):
        c.list_items()


@responses.activate
def test_an_answer_that_is_not_the_api_is_a_protocol_error():
    responses.get(f"{BASE}/api/v1/items", body="<html>hello</html>")
    with pytest.raises(SourceProtocolError, match="did not answer JSON"):
        client().list_items()
    responses.reset()
    responses.get(f"{BASE}/api/v1/items", json={"kind": "Something"})
    with pytest.raises(SourceProtocolError, match="did not answer a ItemList"):
        client().list_items()
    responses.reset()
    responses.get(f"{BASE}/api/v1/items", status=401)
    with pytest.raises(SourceProtocolError, match="HTTP 401"):
        client().list_items()


@responses.activate
def test_get_item_quotes_the_name_and_404_means_gone():
    name = "a b/ü $(x).mp4"
    responses.get(
        f"{BASE}/api/v1/items/a%20b/%C3%BC%20%24%28x%29.mp4",
        json={"kind": "Item", "apiVersion": "v1", "data": {"name": name}},
    )
    assert client().get_item(name) == {"name": name}
    responses.get(
        f"{BASE}/api/v1/items/gone.mp4",
        status=404,
        json={"kind": "Status", "code": 404, "reason": "NotFound"},
    )
    assert client().get_item("gone.mp4") is None


def test_a_url_without_scheme_is_refused():
    with pytest.raises(SourceProtocolError, match="http://"):
        SourceClient("localhost:8080")


@responses.activate
def test_a_source_without_a_watch_stream_says_so():
    from kube_workqueue.manager.sources.http import WatchUnsupported

    responses.get(f"{BASE}/api/v1/items", status=400, json={"kind": "Status"})
    with pytest.raises(WatchUnsupported):
        list(client().watch())
    responses.reset()
    responses.get(f"{BASE}/api/v1/items", json={"kind": "ItemList", "items": ["a"]})
    with pytest.raises(WatchUnsupported):
        list(client().watch())


@responses.activate
def test_the_watch_stream_yields_events():
    body = '{"type":"ADDED","item":"a"}\n\n{"type":"DELETED","item":"a"}\n'
    responses.get(f"{BASE}/api/v1/items", body=body, content_type="application/x-ndjson")
    assert list(client().watch()) == [
        {"type": "ADDED", "item": "a"},
        {"type": "DELETED", "item": "a"},
    ]


def test_environment_settings_are_resolved_once_for_the_source_url(monkeypatch, tmp_path):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "ca.pem"))
    (tmp_path / ".netrc").write_text("machine source.test login ann password s3cret\n")
    (tmp_path / ".netrc").chmod(0o600)
    monkeypatch.setenv("NETRC", str(tmp_path / ".netrc"))

    remote = SourceClient(BASE).session
    assert remote.proxies.get("http") == "http://proxy.test:3128"
    assert remote.verify == str(tmp_path / "ca.pem")
    assert remote.auth == ("ann", "s3cret")
    assert remote.trust_env is False  # nothing is looked up again per call

    loopback = SourceClient("http://127.0.0.1:8080").session
    assert "http" not in loopback.proxies  # NO_PROXY honoured
    assert loopback.auth is None


@responses.activate
def test_the_settings_reach_every_call(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    responses.get(f"{BASE}/api/v1/items/a", json={"kind": "Item", "data": {"name": "a"}})
    c = client()
    monkeypatch.delenv("HTTP_PROXY")  # resolved at construction, not per call
    assert c.get_item("a") == {"name": "a"}
    assert responses.calls[0].request.req_kwargs["proxies"]["http"] == "http://proxy.test:3128"


@responses.activate
def test_every_version_compared_means_every_listing_brings_data_and_else_names_only():
    """`--on-change rerun` (keep_data_of(None)) compares each listed item's version with the one
    it ran at: every listing brings the data, however little work the last one brought (a
    listing of names only would leave the versions of an older listing to compare). Told what
    to keep, listings are names only."""
    a = {"name": "a", "version": "s-1"}
    full = responses.get(f"{BASE}/api/v1/items", json=_full([{"name": "a", "data": a}]),
                         match=[responses.matchers.query_param_matcher(
                             {"limit": "10000", "view": "full"})])  # fmt: skip
    names = responses.get(
        f"{BASE}/api/v1/items",
        json=_full(["a"]),
        match=[responses.matchers.query_param_matcher({"limit": "10000"})],
    )
    rerun = client()
    rerun.keep_data_of(None)
    for _ in range(3):
        rerun.list_items()
        rerun.listed_work(0)  # a trickle, or nothing
    assert full.call_count == 3 and names.call_count == 0 and rerun.peek("a") == a
    kept = client()
    kept.keep_data_of(lambda name: True)
    kept.list_items()
    assert names.call_count == 1 and kept.peek("a") is None
