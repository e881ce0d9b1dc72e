"""The wheel stands alone: installed into a clean venv (tests/release/conftest.py), run from a
folder outside the repository with nothing of the checkout on any path, it does what the
README's local tour does - `workqueue run` thumbnails a folder of real videos with the wheel's
own `workqueue-thumbnail`, nothing runs twice, `status` and `stability` answer - and the
ambassador serves a folder over HTTP to a manager whose workers are the wheel's `fetch-run-put`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import textwrap

import requests

from tests.e2e.test_docs_sessions import shown_session
from tests.support.servers import free_port, wait_until

from .conftest import VERSION


def test_the_commands_and_only_the_wheels_own_names(installed, outside):
    r = installed.run("workqueue", "--version", cwd=outside)
    assert r.returncode == 0 and r.stdout.strip() == f"workqueue {VERSION}", r.stderr
    probe = textwrap.dedent("""
        import importlib, json, kube_workqueue.manager as m
        absent = []
        for name in ("manager", "ambassador", "safelog", "workers", "clouds"):
            try:
                importlib.import_module(name)
            except ModuleNotFoundError:
                absent.append(name)
        print(json.dumps({"file": m.__file__, "absent": absent}))
    """)
    r = installed.run(installed.bin / "python", "-c", probe, cwd=outside)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert found["file"].startswith(f"{installed.venv}/lib/")
    assert found["absent"] == ["manager", "ambassador", "safelog", "workers", "clouds"]
    for worker in ("fetch-run-put", "workqueue-thumbnail"):
        assert (installed.bin / worker).exists(), worker
        r = installed.run(worker, cwd=outside)  # no WORK_ITEM_FILE: one line, not a traceback
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (worker, r.stderr)
        assert "Traceback" not in r.stderr


def counts(installed, cwd) -> dict:
    r = installed.run("workqueue", "status", "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["counts"]


def test_the_local_tour_from_the_wheel(installed, outside, sample_videos):
    videos = outside / "videos"
    shutil.copytree(sample_videos, videos)
    thumbnails = outside / "thumbnails"
    tour = ("workqueue", "run", "videos", "--suffix", ".mp4", "--parallelism", "2",
            "--max-attempts", "1", "--", "workqueue-thumbnail")  # fmt: skip
    r = installed.run(*tour, cwd=outside, OUTPUT_DIR=str(thumbnails), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr  # the corrupt video fails, alone
    assert r.stdout.startswith("workqueue: 5 items: 4 succeeded, 1 failed"), r.stdout
    assert "failed: broken.mp4" in r.stdout
    made = sorted(p.name for p in thumbnails.iterdir())
    assert made == [f"sample-{i:03d}.png" for i in range(4)]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in thumbnails.iterdir())
    before = counts(installed, outside)
    assert before["succeeded"] == 4 and before["failed"] == 1

    again = installed.run(*tour, cwd=outside, OUTPUT_DIR=str(thumbnails), timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr  # still one failed item
    assert counts(installed, outside) == before
    record = json.loads(installed.run("workqueue", "status", "--json", cwd=outside).stdout)
    attempts = {i["name"]: i["attempts"] for i in record["items"]}
    assert attempts == {v.name: 1 for v in videos.iterdir()}  # nothing ran twice

    stability = installed.run("workqueue", "stability", "--interarrival", "60s", "--service",
                              "120s", "--parallelism", "3", cwd=outside)  # fmt: skip
    assert stability.returncode == 0, stability.stderr
    assert "verdict            STABLE" in stability.stdout


def test_the_ambassador_serves_a_manager_whose_workers_are_fetch_run_put(installed, outside):
    inbox = outside / "inbox"
    inbox.mkdir()
    for name in ("a.txt", "b.txt", "c d.txt"):
        (inbox / name).write_text(f"contents of {name}\n")
    upper = outside / "upper.sh"
    upper.write_text('#!/bin/sh\ntr a-z A-Z < "$INPUT_FILE" > "$OUTPUT_FILE"\n')
    upper.chmod(0o755)
    out = outside / "out"
    out.mkdir()

    port = free_port()
    ambassador = installed.spawn("workqueue", "ambassador", "--root", inbox, "--suffix", ".txt",
                                 "--settle", "0", "--host", "127.0.0.1", "--port", port,
                                 cwd=outside)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:

        def ready():
            assert ambassador.poll() is None, ambassador.communicate()
            try:
                return requests.get(f"{url}/readyz", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        wait_until(ready, timeout=60)
        listed = requests.get(f"{url}/api/v1/items", timeout=10).json()
        assert sorted(listed["items"]) == ["a.txt", "b.txt", "c d.txt"]
        one = requests.get(f"{url}/api/v1/items/c%20d.txt", timeout=10)
        assert one.status_code == 200 and one.json()["data"]["name"] == "c d.txt"

        worker = f"fetch-run-put --input-root {inbox} --output file://{out}/{{stem}}.up {upper}"
        r = installed.run("workqueue", "manager", "--source", url, "--once", "--parallelism", "2",
                          "--worker-cmd", worker, "--state-dir", outside / "state",
                          cwd=outside, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        ambassador.terminate()
        ambassador.wait(30)
    results = {p.name: p.read_text() for p in out.iterdir()}
    assert results == {
        "a.up": "CONTENTS OF A.TXT\n",
        "b.up": "CONTENTS OF B.TXT\n",
        "c d.up": "CONTENTS OF C D.TXT\n",
    }


def test_the_install_pages_session_is_what_the_wheel_answers(installed, outside):
    """docs/install.md's console session, replayed with the installed wheel: every command that
    shows output prints exactly that; the ones that only set up (venv, pip install) install
    the distribution under its name."""
    session = shown_session("install.md", "python3 -m venv")
    assert any(c.startswith("pip install 'kube-workqueue[") for c, _ in session)
    replayed = 0
    for command, shown in session:
        if not shown:
            continue
        r = installed.run(*shlex.split(command), cwd=outside)
        assert r.returncode == 0, (command, r.stderr)
        assert r.stdout == shown, command
        replayed += 1
    assert replayed >= 2
