"""A name resolves inside the root or not at all, and a miss says nothing about what exists."""

from __future__ import annotations

import http.client
import os

import pytest

SECRET = "secret.mp4"


@pytest.fixture
def layout(tmp_path):
    root = tmp_path / "videos"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / SECRET).write_bytes(b"top secret")
    (root / "ok.mp4").write_bytes(b"x")
    (root / "sub").mkdir()
    (root / "sub" / "deep.mp4").write_bytes(b"x")
    os.symlink(outside / SECRET, root / "link.mp4")  # points outside
    os.symlink(root / "ok.mp4", root / "inlink.mp4")  # points inside: still not an item
    os.symlink(outside, root / "escape")  # a directory symlink out of the root
    return root


HOSTILE = [
    "../outside/secret.mp4",
    "..%2Foutside%2Fsecret.mp4",
    "%2e%2e/outside/secret.mp4",
    "%2E%2E%2Foutside%2Fsecret.mp4",
    "..%5Coutside%5Csecret.mp4",
    "..\\outside\\secret.mp4",
    "%252e%252e%252foutside%252fsecret.mp4",
    "%2Fetc%2Fpasswd",
    "//etc/passwd",
    "ok.mp4%00.txt",
    "ok.mp4%00",
    "link.mp4",
    "inlink.mp4",
    "escape/secret.mp4",
    "escape%2Fsecret.mp4",
    "sub/../ok.mp4",
    "./ok.mp4",
    "sub/./deep.mp4",
    "x" * 1000 + ".mp4",
    "%C0%AE%C0%AE/outside/secret.mp4",
]


@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_names_are_404_without_a_hint(layout, make_client, raw, recursive):
    client = make_client(layout, RECURSIVE=recursive)
    r = client.get("/api/v1/items/" + raw)
    assert r.status_code == 404
    body = r.get_json()
    assert body["reason"] == "NotFound"
    assert "top secret" not in r.get_data(as_text=True)
    assert str(layout.parent) not in body["message"]


def test_symlinks_are_never_listed(layout, make_client):
    client = make_client(layout, RECURSIVE=True)
    assert client.get("/api/v1/items").get_json()["items"] == ["ok.mp4", "sub/deep.mp4"]


def test_slashes_only_in_recursive_mode(layout, make_client):
    assert make_client(layout).get("/api/v1/items/sub/deep.mp4").status_code == 404
    assert make_client(layout, RECURSIVE=True).get("/api/v1/items/sub/deep.mp4").status_code == 200


def test_unicode_and_shell_characters_round_trip(tmp_path, make_client):
    root = tmp_path / "v"
    root.mkdir()
    names = ["ünïcødé 視頻.mp4", 'it\'s "quoted" $(rm -rf ~).mp4', "semi;colon&amp.mp4"]
    for name in names:
        (root / name).write_bytes(b"x")
    client = make_client(root)
    assert sorted(client.get("/api/v1/items").get_json()["items"]) == sorted(names)
    from urllib.parse import quote

    for name in names:
        r = client.get("/api/v1/items/" + quote(name))
        assert r.status_code == 200 and r.get_json()["data"]["name"] == name


def test_a_directory_swapped_for_a_symlink_after_the_scan_is_refused(layout, make_client):
    client = make_client(layout, RECURSIVE=True)
    assert client.get("/api/v1/items/sub/deep.mp4").status_code == 200
    sub = layout / "sub"
    (sub / "deep.mp4").unlink()
    sub.rmdir()
    outside = layout.parent / "outside"
    (outside / "deep.mp4").write_bytes(b"other")
    os.symlink(outside, sub)
    assert client.get("/api/v1/items/sub/deep.mp4").status_code == 404


def test_raw_http_traversal_against_a_real_server(layout, ambassador_server):
    base = ambassador_server(layout, "--recursive")
    for raw in [
        "/api/v1/items/../../outside/secret.mp4",
        "/api/v1/items/..%2f..%2foutside",
        "/api/v1/items/%00",
        "/api/v1/items/ok.mp4%00",
        "/api/v1/items/escape/secret.mp4",
    ]:
        conn = http.client.HTTPConnection("127.0.0.1", base.port, timeout=5)
        conn.request("GET", raw)
        r = conn.getresponse()
        body = r.read().decode()
        assert r.status in (400, 404), (raw, r.status)
        assert "top secret" not in body
        conn.close()


def test_every_listed_name_can_be_fetched_so_line_breaks_are_never_items(tmp_path, make_client):
    root = tmp_path / "odd"
    root.mkdir()
    for name in ["new\nline.mp4", "cr\rhere.mp4", "sep\u2028.mp4", "tab\there.mp4", "fine.mp4"]:
        (root / name).write_bytes(b"x")
    client = make_client(root)
    listed = client.get("/api/v1/items").get_json()["items"]
    assert listed == ["fine.mp4", "tab\there.mp4"]
    from urllib.parse import quote

    for name in listed:
        assert client.get("/api/v1/items/" + quote(name)).status_code == 200
    assert client.get("/api/v1/items/new%0Aline.mp4").status_code == 404
