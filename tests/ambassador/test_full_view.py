"""`?view=full` (item data with the listing, same paging) and item versions (by size and
mtime, or by content), through Flask's test client over a real folder."""

from __future__ import annotations

import json
import os
import time


def test_the_full_view_equals_the_per_item_answers_and_pages_the_same(videos, make_client):
    for name in ["a.mp4", "b.mp4", "c.mp4"]:
        (videos / name).write_bytes(name.encode())
    client = make_client(videos)
    full = client.get("/api/v1/items?view=full").get_json()
    assert [i["name"] for i in full["items"]] == ["a.mp4", "b.mp4", "c.mp4"]
    for item in full["items"]:
        single = client.get(f"/api/v1/items/{item['name']}").get_json()["data"]
        assert item["data"] == single
    first = client.get("/api/v1/items?view=full&limit=2").get_json()
    assert [i["name"] for i in first["items"]] == ["a.mp4", "b.mp4"]
    token = first["metadata"]["continue"]
    names_page = client.get("/api/v1/items?limit=2").get_json()
    assert names_page["metadata"]["continue"] == token  # the same tokens as the names view
    rest = client.get(f"/api/v1/items?view=full&limit=2&continue={token}").get_json()
    assert [i["name"] for i in rest["items"]] == ["c.mp4"]
    assert client.get("/api/v1/items").get_json()["items"] == ["a.mp4", "b.mp4", "c.mp4"]
    bad = client.get("/api/v1/items?view=everything")
    assert bad.status_code == 400 and "view must be one of names, full" in bad.get_json()["message"]


def test_watch_events_carry_data_with_the_full_view(videos, make_client):
    (videos / "a.mp4").write_bytes(b"x")
    client = make_client(videos)
    r = client.get("/api/v1/items?watch=true&timeoutSeconds=1&view=full")
    events = [json.loads(line) for line in r.get_data(as_text=True).splitlines() if line]
    assert events[0]["type"] == "ADDED" and events[0]["data"]["name"] == "a.mp4"
    assert events[0]["data"]["version"].startswith("s-")


def version(client, name):
    return client.get(f"/api/v1/items/{name}").get_json()["data"]["version"]


def test_a_stat_version_changes_with_new_bytes_or_a_new_mtime(videos, make_client):
    path = videos / "a.mp4"
    path.write_bytes(b"first")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    client = make_client(videos)
    v1 = version(client, "a.mp4")
    assert version(client, "a.mp4") == v1  # stable
    path.write_bytes(b"other")  # same size, new mtime
    os.utime(path, (1_000_000_100, 1_000_000_100))
    v2 = version(client, "a.mp4")
    assert v2 != v1
    os.utime(path, (1_000_000_200, 1_000_000_200))  # the same bytes copied again: new mtime
    assert version(client, "a.mp4") != v2


def test_a_content_version_follows_the_bytes_not_the_mtime(videos, make_client):
    path = videos / "a.mp4"
    path.write_bytes(b"first")
    client = make_client(videos, VERSION_BY="content")
    v1 = version(client, "a.mp4")
    assert v1.startswith("c-")
    time.sleep(0.01)
    os.utime(path, (2_000_000_000, 2_000_000_000))  # copied again, same bytes
    assert version(client, "a.mp4") == v1
    path.write_bytes(b"second")
    assert version(client, "a.mp4") != v1


def test_a_page_from_a_name_starts_at_it_or_after_it(videos, make_client):
    """`startAt` (additive to v1): the page begins at the name when it is an item, else at the
    first name after it."""
    for name in ("a.mp4", "b.mp4", "c.mp4", "d.mp4"):
        (videos / name).write_bytes(b"x")
    client = make_client(videos)

    def page(**query):
        body = client.get("/api/v1/items", query_string=query).get_json()
        return [i["name"] if isinstance(i, dict) else i for i in body["items"]], body["metadata"]

    assert page(startAt="b.mp4", limit=2)[0] == ["b.mp4", "c.mp4"]
    names, meta = page(startAt="b.mp4", limit=1, view="full")
    assert names == ["b.mp4"] and meta["remainingItemCount"] == 2
    assert page(startAt="b.mp5", view="full")[0] == ["c.mp4", "d.mp4"]  # not an item: after it
    assert page(startAt="z")[0] == []
    full = client.get("/api/v1/items", query_string={"startAt": "c.mp4", "view": "full"})
    one = client.get("/api/v1/items/c.mp4").get_json()["data"]
    assert full.get_json()["items"][0]["data"] == one
    # a continue token pages on from its own name: startAt starts the first page only
    on = client.get("/api/v1/items", query_string={"startAt": "a.mp4", "continue": "n.Yy5tcDQ"})
    assert on.get_json()["items"] == ["d.mp4"]
