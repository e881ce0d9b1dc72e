"""Every source behind the same API: a real `workqueue ambassador` (the snapshot publisher and
gunicorn's workers) over a bucket and over a Redis set - listing, paging, `view=full`, item data,
the watch stream, `/readyz` - and the bad sources refused at start with one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import quote

import pytest
import requests

from tests.support.servers import wait_until
from tests.support.stores import unique


def listing(server, **params):
    return requests.get(f"{server.url}/api/v1/items", params=params, timeout=10).json()


def item(server, name):
    return requests.get(f"{server.url}/api/v1/items/{quote(name)}", timeout=10)


def test_a_bucket_is_served_like_a_folder(s3, ambassador_server):
    bucket = s3.bucket(*(f"in/{n}" for n in ("a.mp4", "b c.mp4", "c+d.mp4", "skip.txt")))
    server = ambassador_server(f"s3://{bucket}/in/", "--poll-interval", "0.2", "--workers", "2")
    body = listing(server)
    assert body["items"] == ["a.mp4", "b c.mp4", "c+d.mp4"]
    page = listing(server, limit=2)
    assert page["items"] == ["a.mp4", "b c.mp4"] and page["metadata"]["remainingItemCount"] == 1
    rest = listing(server, limit=2, **{"continue": page["metadata"]["continue"]})
    assert rest["items"] == ["c+d.mp4"]
    data = item(server, "c+d.mp4").json()["data"]
    assert data["key"] == "in/c+d.mp4" and data["url"] == f"s3://{bucket}/in/c+d.mp4"
    full = listing(server, view="full")["items"]
    assert [(i["name"], i["data"]["version"]) for i in full] == [
        (n, item(server, n).json()["data"]["version"]) for n in body["items"]
    ]
    assert item(server, "skip.txt").status_code == 404
    assert item(server, "../in/a.mp4").status_code == 404

    watch = requests.get(
        f"{server.url}/api/v1/items", params={"watch": "1", "timeoutSeconds": 20}, stream=True,
        timeout=30,
    )  # fmt: skip
    lines = watch.iter_lines()
    assert {json.loads(next(lines))["item"] for _ in range(3)} == set(body["items"])
    version = body["metadata"]["resourceVersion"]
    s3.client().put_object(Bucket=bucket, Key="in/a.mp4", Body=b"new bytes")  # overwritten
    s3.client().put_object(Bucket=bucket, Key="in/new.mp4", Body=b"x")
    event = json.loads(next(line for line in lines if line.strip()))
    assert event == {"type": "ADDED", "item": "new.mp4"}
    watch.close()
    wait_until(
        lambda: item(server, "a.mp4").json()["data"]["version"] != full[0]["data"]["version"]
    )
    assert int(listing(server)["metadata"]["resourceVersion"]) > int(version)


def test_a_redis_set_is_served_and_readyz_follows_the_server(redis_store, ambassador_server):
    r, key, data = redis_store.client(), unique("set"), unique("hash")
    r.sadd(key, "one", "two")
    r.hset(data, "one", '{"input": "s3://b/one"}')
    server = ambassador_server(f"{redis_store.url}?set={key}&data={data}")
    assert listing(server)["items"] == ["one", "two"]
    assert item(server, "one").json()["data"]["input"] == "s3://b/one"
    r.sadd(key, "three")
    wait_until(lambda: "three" in listing(server)["items"])
    assert requests.get(f"{server.url}/readyz", timeout=5).status_code == 200


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("s3://no-such-bucket-at-all/", "the bucket does not exist"),
        ("s3://", "an S3 source is s3://bucket/prefix/"),
        ("redis://127.0.0.1:9/0?set=k", "cannot reach the server"),
        ("gopher://host/", "unknown source scheme 'gopher'"),
        ("/no/such/folder", "not a folder: /no/such/folder"),
    ],
)
def test_bad_sources_are_one_line_and_exit_2(s3, source, said):
    done = subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli",
         "ambassador", "--source", source, "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_key_with_dot_segments_is_fetched_by_its_name(s3, ambassador_server):
    from kube_workqueue.manager.sources.http import SourceClient

    keys = ["in/../up.mp4", "in/x/./y.mp4", "in/ok.mp4"]
    bucket = s3.bucket(*keys)
    server = ambassador_server(f"s3://{bucket}/in/", "--recursive")
    names = listing(server)["items"]
    assert names == ["../up.mp4", "ok.mp4", "x/./y.mp4"]
    client = SourceClient(server.url)
    for name in names:
        assert client.get_item(name)["key"] == f"in/{name}"


def refused(url: str):
    """The answer when it is a 503, else None (a Response is falsy when it is an error)."""
    answer = requests.get(url, timeout=5)
    return [answer] if answer.status_code == 503 else None


def test_a_source_that_fails_later_is_an_outage_not_an_empty_listing(ambassador_server):
    from kube_workqueue.manager.ports import SourceUnavailable
    from kube_workqueue.manager.sources.http import SourceClient
    from tests.support.stores import RedisServer

    redis_server = RedisServer()
    try:
        key = unique("set")
        redis_server.client().sadd(key, "a", "b")
        server = ambassador_server(f"{redis_server.url}?set={key}", "--poll-interval", "0.2")
        client = SourceClient(server.url, retries=0)
        assert client.list_items() == ["a", "b"]
        redis_server.process.kill()
        redis_server.process.wait()
        wait_until(lambda: requests.get(f"{server.url}/readyz", timeout=5).status_code == 503)
        # every gunicorn worker reads the publisher's heartbeat within half a second
        (answer,) = wait_until(lambda: refused(f"{server.url}/api/v1/items"))
        assert answer.json()["message"].startswith("the source is unavailable: redis set")

        def outage() -> bool:  # the manager holds; it never sees "no items"
            try:
                assert client.list_items() == ["a", "b"]  # a worker that has not looked yet
            except SourceUnavailable:
                return True
            return False

        wait_until(outage)
    finally:
        redis_server.stop()


def test_a_sorted_set_served_carries_priorities_in_every_view(redis_store, ambassador_server):
    r, key = redis_store.client(), unique("zset")
    r.zadd(key, {"a": 0, "b": 7, "c": -1})
    server = ambassador_server(f"{redis_store.url}?zset={key}", "--poll-interval", "0.2")
    whole = listing(server)
    assert whole["items"] == ["a", "b", "c"] and whole["priorities"] == {"b": 7, "c": -1}
    first = requests.get(f"{server.url}/api/v1/items", params={"limit": 2}, timeout=5).json()
    assert first["items"] == ["a", "b"] and first["priorities"] == {"b": 7}  # the page's own
    full = requests.get(f"{server.url}/api/v1/items", params={"view": "full"}, timeout=5).json()
    assert [i["data"]["priority"] for i in full["items"]] == [0, 7, -1]
    with requests.get(
        f"{server.url}/api/v1/items", params={"watch": "true", "timeoutSeconds": 1},
        stream=True, timeout=10,
    ) as stream:  # fmt: skip
        events = [json.loads(line) for line in stream.iter_lines() if line]
    assert [(e["item"], e.get("priority")) for e in events] == [("a", None), ("b", 7), ("c", -1)]
    with requests.get(
        f"{server.url}/api/v1/items", params={"watch": "true", "timeoutSeconds": 30},
        stream=True, timeout=40,
    ) as stream:  # fmt: skip
        lines = (json.loads(line) for line in stream.iter_lines() if line)
        assert [next(lines)["item"] for _ in range(3)] == ["a", "b", "c"]
        r.zadd(key, {"a": 20})  # a new priority: the item is ADDED again, with it
        assert next(lines) == {"type": "ADDED", "item": "a", "priority": 20}
    assert listing(server)["priorities"] == {"a": 20, "b": 7, "c": -1}
