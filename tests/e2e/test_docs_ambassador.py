"""The ambassador session `docs/sources.md` shows, replayed against a real ambassador over a
real folder: each `curl` the page shows is asked again and its answer compared with the one the
page prints - the same bytes, once the port, the folder, the listing's version, a file's time
and its version digest (which differ from run to run) are made alike. So the page cannot drift
from what the API answers (it had: an item's `version` was missing from the page)."""

from __future__ import annotations

import http.client
import re
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHOWN_ROOT = "/tmp/vids"


def shown_session() -> list[tuple[str, str]]:
    """(command, output) of the page's first console block: the folder ambassador's."""
    page = (REPO / "docs" / "sources.md").read_text()
    block = re.search(r"```console\n(\$ workqueue ambassador --root .*?)```", page, re.DOTALL)
    assert block, "docs/sources.md no longer shows the folder ambassador's session"
    parts = re.split(r"^\$ (.*)\n", block.group(1), flags=re.MULTILINE)[1:]
    return list(zip(parts[0::2], parts[1::2], strict=True))


def get(port: int, path: str) -> str:
    """The body of GET `path`, sent as it is (as `curl --path-as-is`: no `..` taken out)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        return connection.getresponse().read().decode()
    finally:
        connection.close()


def alike(text: str, root: str, port: int) -> str:
    text = text.replace(root, SHOWN_ROOT).replace(f":{port}", ":8080")
    text = re.sub(r'"resourceVersion":"\d+"', '"resourceVersion":"N"', text)
    text = re.sub(r'"modified":"[^"]+"', '"modified":"T"', text)
    return re.sub(r'"version":"s-[0-9a-f]{16}"', '"version":"s-V"', text)


def test_the_sources_page_shows_what_the_ambassador_answers(tmp_path, ambassador_server):
    root = tmp_path / "vids"
    root.mkdir()
    (root / "a.mp4").write_bytes(b"\0" * 1048576)
    (root / "b.MP4").write_bytes(b"\0" * 10)
    server = ambassador_server(root, "--suffix", ".mp4")
    session = shown_session()
    assert session[0][0].startswith("workqueue ambassador --root /tmp/vids")
    checked = 0
    for command, output in session[1:]:
        path = re.search(r"'?localhost:8080([^' ]*)'?", command).group(1)
        if "watch=true" in path:
            touch = threading.Timer(1.0, (root / "c.mp4").write_bytes, args=(b"x",))
            touch.start()  # `# then: touch /tmp/vids/c.mp4`
            started = time.monotonic()
            answer = get(server.port, path)
            touch.join()
            assert time.monotonic() - started < 20
        else:
            answer = get(server.port, path) + "\n"
        got = alike(answer, str(root), server.port)
        assert got.strip() == alike(output, SHOWN_ROOT, 8080).strip(), command
        checked += 1
    assert checked == 5
