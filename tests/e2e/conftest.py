"""Fixtures for end-to-end runs: real processes, real videos, a real ambassador on loopback."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
THUMBNAIL = REPO / "worker-images" / "thumbnailer" / "thumbnail"
MAKE_VIDEOS = REPO / "examples" / "thumbnailer" / "make_videos.py"


def workqueue(*args, env=None, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        **kw,
    )


def spawn_workqueue(*args, env=None, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kube_workqueue.manager.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


@pytest.fixture
def marker_worker(tmp_path):
    """A shell worker that appends one JSON line per invocation - {"event", "pid", "data"} - to
    markers.jsonl, sleeping $SLEEP seconds in between and failing when the item's name contains
    "fail". It reads the item only from $WORK_ITEM_FILE."""
    markers = tmp_path / "markers.jsonl"
    script = tmp_path / "marker-worker.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'MARKERS="{markers}"\n'
        'data=$(cat "$WORK_ITEM_FILE")\n'
        'printf \'{"event":"start","pid":%s,"data":%s}\\n\' "$$" "$data" >> "$MARKERS"\n'
        'sleep "${SLEEP:-0}"\n'
        'case "$data" in *\'"name":"\'*fail*\'","path"\'*)\n'
        '  echo "failing on purpose" >&2; exit 7;;\n'
        "esac\n"
        'printf \'{"event":"end","pid":%s,"data":%s}\\n\' "$$" "$data" >> "$MARKERS"\n'
    )
    script.chmod(0o755)

    class Worker:
        path = script

        @staticmethod
        def events():
            if not markers.exists():
                return []
            return [json.loads(line) for line in markers.read_text().splitlines() if line]

        @staticmethod
        def ended():
            return [e["data"]["name"] for e in Worker.events() if e["event"] == "end"]

        @staticmethod
        def started():
            return [e["data"]["name"] for e in Worker.events() if e["event"] == "start"]

    return Worker


@pytest.fixture(scope="session")
def ffmpeg_env(tmp_path_factory):
    """An environment whose PATH has an `ffmpeg` (imageio-ffmpeg's binary when none is there)."""
    import shutil

    env = dict(os.environ)
    if shutil.which("ffmpeg") is None:
        import imageio_ffmpeg

        bin_dir = tmp_path_factory.mktemp("ffmpeg-bin")
        (bin_dir / "ffmpeg").symlink_to(imageio_ffmpeg.get_ffmpeg_exe())
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="session")
def sample_videos(tmp_path_factory, ffmpeg_env):
    """Four real 1-2 s videos and one corrupt file, made once for the session."""
    out = tmp_path_factory.mktemp("videos")
    subprocess.run(
        [
            sys.executable,
            str(MAKE_VIDEOS),
            str(out),
            "--count",
            "4",
            "--seconds",
            "1-2",
            "--corrupt",
        ],
        check=True,
        env=ffmpeg_env,
        capture_output=True,
    )
    old = 1_000_000_000  # at rest long ago: no settling wait
    for p in out.iterdir():
        os.utime(p, (old, old))
    return out


def mean_brightness(png: Path, env) -> float:
    """Mean grey level (0-255) of an image, decoded by ffmpeg."""
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(png), "-f", "rawvideo", "-pix_fmt", "gray", "-"],
        capture_output=True,
        check=True,
        env=env,
    ).stdout
    return sum(raw) / len(raw)


def ledger_states(state_dir) -> dict[str, str]:
    with sqlite3.connect(state_dir / "ledger.sqlite3") as db:
        return dict(db.execute("SELECT name, state FROM items"))


def manager_args(source_url, worker, state_dir, *extra, once=True) -> list:
    """`workqueue manager` arguments for the local backend with `worker` (a path or an object
    with `.path`)."""
    worker_path = str(getattr(worker, "path", worker))
    args = ["manager", "--source", source_url, "--backend", "local"]
    args += ["--worker-cmd", worker_path, "--state-dir", state_dir]
    return [*args, *(["--once"] if once else []), *extra]


def manager_once(server, worker, state_dir, *extra, env=None, cwd=None):
    return workqueue(*manager_args(server.url, worker, state_dir, *extra), env=env, cwd=cwd)
