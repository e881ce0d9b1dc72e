"""The API's shapes and errors, through Flask's test client over a real folder."""

from __future__ import annotations

import pytest

from kube_workqueue.ambassador.api import encode_continue

STATUS_KEYS = {"kind", "apiVersion", "status", "code", "reason", "message"}


def assert_status(response, code, reason):
    assert response.status_code == code
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == STATUS_KEYS
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure" and body["code"] == code and body["reason"] == reason
    return body


def test_list_shape_sorted_and_filtered(videos, make_client):
    for name in ["b.mp4", "a.MP4", "c.mkv", ".hidden.mp4", "d.mp4.part", "e.mp4~"]:
        (videos / name).write_bytes(b"x")
    (videos / "dir.mp4").mkdir()
    client = make_client(videos)
    body = client.get("/api/v1/items").get_json()
    version = body["metadata"]["resourceVersion"]
    assert version.isdigit()
    assert body == {
        "kind": "ItemList",
        "apiVersion": "v1",
        "items": ["a.MP4", "b.mp4"],
        "metadata": {"resourceVersion": version},
    }


def test_several_suffixes(videos, make_client):
    for name in ["a.mp4", "b.mov", "c.txt"]:
        (videos / name).write_bytes(b"x")
    client = make_client(videos, SUFFIXES=[".mp4", "mov"])
    assert client.get("/api/v1/items").get_json()["items"] == ["a.mp4", "b.mov"]


def test_item_shape(videos, make_client):
    (videos / "a.mp4").write_bytes(b"12345")
    client = make_client(videos)
    r = client.get("/api/v1/items/a.mp4")
    assert r.status_code == 200
    body = r.get_json()
    assert body["kind"] == "Item" and body["apiVersion"] == "v1"
    data = body["data"]
    assert data["name"] == "a.mp4"
    assert data["path"] == str(videos / "a.mp4")
    assert data["size"] == 5
    assert data["contentType"] == "video/mp4"
    assert data["modified"].endswith("Z") and "T" in data["modified"]


def test_paging_with_limit_and_continue(videos, make_client):
    for i in range(7):
        (videos / f"{i}.mp4").write_bytes(b"x")
    client = make_client(videos)
    seen, token = [], None
    while True:
        url = "/api/v1/items?limit=3" + (f"&continue={token}" if token else "")
        body = client.get(url).get_json()
        seen += body["items"]
        token = body["metadata"].get("continue")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == 7 - len(seen)
    assert seen == [f"{i}.mp4" for i in range(7)]


def test_a_continue_token_survives_changes_to_the_folder(videos, make_client):
    for name in ["a.mp4", "c.mp4", "e.mp4"]:
        (videos / name).write_bytes(b"x")
    client = make_client(videos)
    token = client.get("/api/v1/items?limit=1").get_json()["metadata"]["continue"]
    source = client.application.extensions["workqueue.source"]
    (videos / "a.mp4").unlink()
    (videos / "b.mp4").write_bytes(b"x")
    source.snapshot.forget(["a.mp4"])  # what the refresher will do; not waiting for it
    source.snapshot.observe("b.mp4", 1, 1)
    source.snapshot.promote_settled()
    body = client.get(f"/api/v1/items?continue={token}").get_json()
    assert body["items"] == ["b.mp4", "c.mp4", "e.mp4"]
    assert set(body["metadata"]) == {"resourceVersion"}  # the last page: no continue


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=-1",
        "limit=abc",
        "limit=100001",
        "continue=!!!",
        "continue=abcde",
        "continue=garbage",  # not a token this server could have issued
        "watch=maybe",
        "bogus=1",
        "timeoutSeconds=0&watch=true",
    ],
)
def test_bad_parameters_are_400(videos, make_client, query):
    client = make_client(videos)
    assert_status(client.get(f"/api/v1/items?{query}"), 400, "BadRequest")


def test_unknown_item_and_route_are_404(videos, make_client):
    client = make_client(videos)
    assert_status(client.get("/api/v1/items/nope.mp4"), 404, "NotFound")
    assert_status(client.get("/api/v2/items"), 404, "NotFound")
    assert_status(client.get("/"), 404, "NotFound")


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
def test_wrong_method_is_405(videos, make_client, method):
    (videos / "a.mp4").write_bytes(b"x")
    client = make_client(videos)
    for url in ["/api/v1/items", "/api/v1/items/a.mp4"]:
        r = getattr(client, method)(url)
        assert_status(r, 405, "MethodNotAllowed")
        assert "GET" in r.headers["Allow"]


def test_health_ready_openapi(videos, make_client):
    client = make_client(videos)
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    doc = client.get("/api/v1/openapi.json").get_json()
    assert doc["openapi"].startswith("3.")
    assert {"/api/v1/items", "/api/v1/items/{name}", "/healthz", "/readyz", "/metrics"} <= set(
        doc["paths"]
    )


def test_readyz_fails_when_the_root_goes_away(tmp_path, make_client):
    root = tmp_path / "gone"
    root.mkdir()
    client = make_client(root)
    root.rmdir()
    assert_status(client.get("/readyz"), 503, "ServiceUnavailable")


def test_metrics_count_requests_by_route(videos, make_client):
    (videos / "a.mp4").write_bytes(b"x")
    client = make_client(videos)
    client.get("/api/v1/items")
    client.get("/api/v1/items/a.mp4")
    client.get("/api/v1/items/nope.mp4")
    text = client.get("/metrics").get_data(as_text=True)
    assert 'ambassador_requests_total{code="200",method="GET",route="/api/v1/items"} 1.0' in text
    assert (
        'ambassador_requests_total{code="404",method="GET",route="/api/v1/items/<path:name>"} 1.0'
        in text
    )
    assert "ambassador_listing_duration_seconds_count 1.0" in text
    assert "ambassador_items 1.0" in text


def test_full_listing_is_cached_per_version(videos, make_client):
    (videos / "a.mp4").write_bytes(b"x")
    client = make_client(videos)
    first = client.get("/api/v1/items").get_data()
    source = client.application.extensions["workqueue.source"]
    source.snapshot.observe("b.mp4", 1, 1)
    source.snapshot.promote_settled()
    second = client.get("/api/v1/items").get_json()
    assert b"a.mp4" in first and second["items"] == ["a.mp4", "b.mp4"]


def test_the_whole_listing_is_answered_before_flask_as_flask_would(videos, make_client):
    """`full_listing.shortcut`: the bare GET never reaches the Flask view (here made to fail),
    answers what a page of everything answers, and is counted as the route would count it;
    anything else - a query string, HEAD - is Flask's."""
    for name in ["b.mp4", "a.mp4"]:
        (videos / name).write_bytes(b"x")
    client = make_client(videos)
    through_flask = client.get("/api/v1/items?limit=100000")
    app = client.application

    def view_not_reached():
        raise AssertionError("the Flask view was asked")

    app.view_functions["items.list_items"] = view_not_reached
    whole = client.get("/api/v1/items")
    assert whole.status_code == 200 and whole.mimetype == "application/json"
    assert whole.get_data() == through_flask.get_data()
    assert whole.headers["Content-Length"] == str(len(whole.get_data()))
    assert client.get("/api/v1/items?limit=5").status_code == 500  # Flask's: the view
    assert client.head("/api/v1/items").status_code == 500
    text = client.get("/metrics").get_data(as_text=True)
    assert 'ambassador_requests_total{code="200",method="GET",route="/api/v1/items"} 2.0' in text
    assert "ambassador_listing_duration_seconds_count 4.0" in text  # the 500s were lists too


def test_the_whole_listing_says_503_while_the_source_cannot_be_read(tmp_path, make_client):
    root = tmp_path / "gone"
    root.mkdir()
    (root / "a.mp4").write_bytes(b"x")
    client = make_client(root)
    assert client.get("/api/v1/items").status_code == 200
    (root / "a.mp4").unlink()
    root.rmdir()
    body = assert_status(client.get("/api/v1/items"), 503, "ServiceUnavailable")
    assert body["message"].startswith("the source is unavailable")


def test_continue_token_round_trips_any_name():
    from kube_workqueue.ambassador.api import decode_continue

    for name in ["a.mp4", "ünï cødé/視頻.mp4", "", "x" * 300]:
        token = encode_continue(name)
        assert "=" not in token and "/" not in token
        assert decode_continue(token) == (name or None)
