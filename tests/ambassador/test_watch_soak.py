"""A soak of the watch stream, counting every event: several clients follow the stream of a
real two-worker server while thousands of files arrive in bursts, and each must receive an
ADDED event for every file - the check for the silent stall once seen under load (an event the
server yielded that never reached the client). Bounded: 1,500 files, 60 s at most."""

from __future__ import annotations

import json
import threading
import time

import requests

FILES = 1_500
BURST = 150
WATCHERS = 4


def follow(url: str, seen: set[str], opened: threading.Event, errors: list[str]) -> None:
    try:
        with requests.get(
            url + "/api/v1/items?watch=true&timeoutSeconds=60", stream=True, timeout=70
        ) as r:
            opened.set()
            for line in r.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                if event["type"] == "ADDED":
                    seen.add(event["item"])
                    if len(seen) == FILES:
                        return
    except Exception as exc:  # reported by the test, with what was received
        errors.append(repr(exc))
    finally:
        opened.set()


def test_every_watcher_receives_every_event(tmp_path, ambassador_server):
    server = ambassador_server(tmp_path, "--workers", "2")
    received = [set() for _ in range(WATCHERS)]
    errors: list[str] = []
    threads = []
    for seen in received:
        opened = threading.Event()
        t = threading.Thread(target=follow, args=(server.url, seen, opened, errors), daemon=True)
        t.start()
        opened.wait(10)
        threads.append(t)
    names = [f"clip-{i:05d}.mp4" for i in range(FILES)]
    for start in range(0, FILES, BURST):
        for name in names[start : start + BURST]:
            (tmp_path / name).write_bytes(b"x")
        time.sleep(0.05)
    for t in threads:
        t.join(timeout=60)
    missing = [FILES - len(seen) for seen in received]
    assert missing == [0] * WATCHERS, (missing, errors)
    assert all(seen == set(names) for seen in received)
