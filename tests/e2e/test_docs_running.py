"""The sessions docs/running.md and docs/operations.md show for `run`, `manager`, fetch-run-put,
and `scale`, replayed for real and compared with the page line by line once
what differs from run to run is made alike (folders, times, durations, pids, digests) - so a
page cannot show an attempt count, a counter or a section the program does not print (they
did: "1 attempt(s)" under the default of 3, fetch-run-put examples that failed every item as
typed, a `status | tail -3` that did not end where the page said).

Counts, attempts, names and words are compared as they are: the replays make the same items.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import requests

from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import free_port, wait_until

from .conftest import MAKE_VIDEOS, REPO, spawn_workqueue, workqueue
from .test_docs_sessions import shown_session as shown_blocks

THUMBNAIL = "worker-images/thumbnailer/thumbnail"
FETCH_RUN_PUT = "worker-images/generic/fetch-run-put"


def shown_session(page: str, first: str) -> list[tuple[str, str]]:
    """(command, output) of the page's console block starting with `first`, a command's
    continued lines (a trailing backslash) joined to it."""
    joined = []
    for command, output in shown_blocks(page, first):
        lines = output.splitlines(keepends=True)
        while command.rstrip().endswith("\\") and lines:
            command = command.rstrip()[:-1] + " " + lines.pop(0).strip()
        joined.append((command, "".join(lines)))
    return joined


def alike(text: str, *folders: tuple[str, str]) -> list[str]:
    """`text`'s lines with what differs from run to run made alike."""
    for real, shown in folders:
        text = text.replace(real, shown)
    text = re.sub(r"/tmp/fetch-run-put-[a-z0-9_]+/", "/tmp/fetch-run-put-X/", text)
    text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(,\d+)?", "TIME", text)
    text = re.sub(r"\b\d\d:\d\d:\d\d\b", "HH:MM:SS", text)
    text = re.sub(r"\d+(\.\d+)?( ?)(ms|s|min)\b", r"N\2\3", text)
    text = re.sub(r"\(cv \d+\.\d+\)", "(cv C)", text)
    text = re.sub(r"pid \d+ on \S+", "pid P on H", text)
    text = re.sub(r"-[0-9a-f]{10}\.log", "-HASH.log", text)
    return [line.rstrip() for line in text.strip().splitlines()]


def videos(folder: Path, env: dict, count: int) -> Path:
    """`count` real videos and a corrupt broken.mp4, as the page's folder holds."""
    subprocess.run([sys.executable, str(MAKE_VIDEOS), str(folder), "--count", str(count),
                    "--seconds", "1-1", "--corrupt"], check=True, env=env,
                   capture_output=True, timeout=120)  # fmt: skip
    return folder


def test_the_run_session_prints_what_the_page_shows(tmp_path, ffmpeg_env):
    [(command, shown)] = shown_session("running.md", "OUTPUT_DIR=$PWD/thumbnails workqueue run")
    (tmp_path / "worker-images").symlink_to(REPO / "worker-images")
    videos(tmp_path / "videos", ffmpeg_env, 6)
    argv = shlex.split(command.replace("$PWD", str(tmp_path)))
    env = dict(ffmpeg_env, OUTPUT_DIR=argv[0].split("=", 1)[1])
    done = workqueue(*argv[2:], cwd=tmp_path, env=env, timeout=180)
    assert done.returncode == 1, done.stderr  # broken.mp4 failed
    assert alike(done.stdout, (str(tmp_path), "/tmp/ex")) == alike(shown)


def test_the_bucket_session_runs_as_typed(tmp_path, s3, ffmpeg_env):
    """fetch-run-put, typed as the page types it (relative paths, from the repository), over
    moto's S3 in the place of the page's MinIO."""
    [(command, shown)] = shown_session("running.md", "AWS_ENDPOINT_URL=http://minio:9000")
    folder = videos(tmp_path / "made", ffmpeg_env, 4)
    bucket = s3.client("s3").create_bucket(Bucket="media-in") and "media-in"
    for video in folder.iterdir():
        s3.client("s3").upload_file(str(video), bucket, f"videos/{video.name}")
    argv = shlex.split(command)
    env = dict(ffmpeg_env, **s3.env, AWS_EC2_METADATA_DISABLED="true")
    assert argv[0] == "AWS_ENDPOINT_URL=http://minio:9000"  # the page's MinIO, moto here
    done = workqueue(argv[2], "--state-dir", tmp_path / ".workqueue", *argv[3:], cwd=REPO,
                     env=env, timeout=180)  # fmt: skip
    assert done.returncode == 1, done.stderr
    printed = done.stdout.replace(str(tmp_path / ".workqueue"), ".workqueue")
    assert alike(printed) == alike(shown)
    thumbs = s3.client("s3").list_objects_v2(Bucket=bucket, Prefix="thumbs/")["Contents"]
    assert sorted(o["Key"] for o in thumbs) == [f"thumbs/sample-{i:03d}.png" for i in range(4)]


def test_the_input_root_session_runs_as_typed(tmp_path, ffmpeg_env):
    [(command, shown)] = shown_session("running.md",
                                       "workqueue run /srv/videos --suffix .mp4 -- "
                                       "worker-images/generic/fetch-run-put")  # fmt: skip
    assert not shown.strip()  # the page shows the command alone
    folder = videos(tmp_path / "srv" / "videos", ffmpeg_env, 2)
    thumbs = tmp_path / "srv" / "thumbs"
    typed = command.replace("/srv/", f"{tmp_path}/srv/")
    argv = shlex.split(typed)
    done = workqueue(argv[1], "--state-dir", tmp_path / "state", *argv[2:], cwd=REPO,
                     env=ffmpeg_env, timeout=180)  # fmt: skip
    assert done.returncode == 1 and "3 items: 2 succeeded, 1 failed" in done.stdout, done.stdout
    assert sorted(p.name for p in thumbs.iterdir()) == ["sample-000.png", "sample-001.png"]
    assert folder.exists()


def test_the_manager_session_logs_and_counts_what_the_page_shows(tmp_path, ffmpeg_env,
                                                                 ambassador_server):  # fmt: skip
    session = shown_session("running.md", "workqueue manager --source http://127.0.0.1:18090")
    (command, log), (curl, counters) = session
    folder = videos(tmp_path / "videos", ffmpeg_env, 6)
    served = ambassador_server(folder)
    port = free_port()
    argv = shlex.split(command.replace("http://127.0.0.1:18090", served.url)
                       .replace("9090", str(port)))  # fmt: skip
    (tmp_path / "worker-images").symlink_to(REPO / "worker-images")
    env = dict(ffmpeg_env, OUTPUT_DIR=str(tmp_path / "thumbnails"))
    manager = spawn_workqueue(*argv[1:], "--state-dir", tmp_path / ".workqueue", cwd=tmp_path,
                              env=env)  # fmt: skip
    try:

        def failed_for_good() -> bool:
            said = workqueue("status", "--state-dir", tmp_path / ".workqueue", "--json")
            if said.returncode != 0:
                return False
            body = json.loads(said.stdout)
            broken = [i for i in body["items"] if i["name"] == "broken.mp4"]
            return (
                body["counts"]["succeeded"] == 6
                and broken
                and broken[0]["state"] == "failed"
                and broken[0]["attempts"] == 2
                and "eta_seconds" not in broken[0]
            )

        wait_until(failed_for_good, timeout=120)
        metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        manager.send_signal(signal.SIGTERM)
        _, err = manager.communicate(timeout=60)
    wanted = re.compile(r"^workqueue_(depth|adds_total|retries)")
    got = [line for line in metrics.splitlines() if wanted.match(line)]
    assert got == counters.strip().splitlines(), got
    lines = [
        line
        for line in alike(err, (str(tmp_path), "/tmp/ex"), (served.url, "http://127.0.0.1:18090"))
        if "broken.mp4" in line or "manager: source" in line
    ]
    assert lines == alike(log), err
    assert "http://127.0.0.1:18090" in lines[0]


def test_the_scale_session_filters_the_waiting_section_it_shows(tmp_path):
    """operations.md's `scale --parallelism 0`: its `status | grep -A2 '^waiting'` is the
    waiting section, each item's reason the page's (a `tail -3` was the recent section)."""
    session = dict(shown_session("operations.md", "workqueue run videos --parallelism 1 -- "
                                 "./w.sh &"))  # fmt: skip
    command = next(c for c in session if c.startswith("workqueue status | grep"))
    shown = alike(session[command])
    folder = tmp_path / "videos"
    folder.mkdir()
    for i in (5, 6):
        (folder / f"v{i}.mp4").write_bytes(b"x")
    state = tmp_path / ".workqueue"
    first = workqueue("run", folder, "--settle", "0", "--state-dir", state, "--", "true")
    assert first.returncode == 0, first.stderr
    for i in (5, 6):  # again, with nothing to start them: what asked parallelism 0 shows
        (folder / f"v{i}.mp4").write_bytes(b"xx")
    workqueue("scale", "--parallelism", "0", "--state-dir", state)
    run = spawn_workqueue("run", folder, "--settle", "0", "--on-change", "rerun", "--state-dir",
                          state, "--", "true")  # fmt: skip
    try:

        def filtered() -> list[str]:
            said = workqueue("status", "--state-dir", state).stdout
            grep = subprocess.run(
                shlex.split(command.split("|", 1)[1].split("#")[0]),
                input=said,
                capture_output=True,
                text=True,
                timeout=30,
            )
            return alike(grep.stdout)

        wait_until(lambda: filtered() == shown, timeout=60)
    finally:
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=60)
