"""Items that change: `--on-change rerun` runs a finished item again when its version changes
(new bytes; or, with the default stat version, the same bytes copied again), `--version-by
content` tells the two apart, the default `ignore` runs nothing twice, and `status NAME` shows
the versions an item ran at. Real `workqueue run` processes over a real folder."""

from __future__ import annotations

import json
import os
import shutil

from .conftest import workqueue


def run(videos, state, worker, *extra):
    r = workqueue("run", videos, "--state-dir", state, "--settle", "0", *extra, "--", worker)
    assert r.returncode == 0, r.stderr
    return r


def started(marker_worker) -> list[str]:
    return sorted(marker_worker.started())


def write(path, data: bytes, mtime: int) -> None:
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def test_new_bytes_run_again_under_rerun_and_not_by_default(tmp_path, marker_worker):
    videos = tmp_path / "videos"
    videos.mkdir()
    write(videos / "a.mp4", b"first", 1_000_000_000)
    write(videos / "b.mp4", b"same", 1_000_000_000)
    state = tmp_path / "state"
    run(videos, state, marker_worker.path)
    write(videos / "a.mp4", b"second upload", 1_000_000_500)  # replaced with new content
    r = run(videos, state, marker_worker.path)  # default: ignore
    assert "2 already done" in r.stdout and started(marker_worker) == ["a.mp4", "b.mp4"]
    r = run(videos, state, marker_worker.path, "--on-change", "rerun")
    assert "1 succeeded, 1 already done" in r.stdout, r.stdout
    assert started(marker_worker) == ["a.mp4", "a.mp4", "b.mp4"]
    r = run(videos, state, marker_worker.path, "--on-change", "rerun")  # nothing changed since
    assert "2 already done" in r.stdout
    detail = json.loads(workqueue("status", "a.mp4", "--state-dir", state, "--json").stdout)
    versions = [v["version"] for v in detail["versions"]]
    assert len(versions) == 2 and versions[0] != versions[1]
    assert [v["state"] for v in detail["versions"]] == ["succeeded", "succeeded"]
    text = workqueue("status", "a.mp4", "--state-dir", state).stdout
    assert text.count("ran at version") == 2


def test_the_same_bytes_copied_again_rerun_by_stat_but_not_by_content(tmp_path, marker_worker):
    for version_by, runs_again in (("stat", True), ("content", False)):
        videos = tmp_path / f"videos-{version_by}"
        videos.mkdir()
        write(videos / "a.mp4", b"bytes", 1_000_000_000)
        state = tmp_path / f"state-{version_by}"
        flags = ("--version-by", version_by, "--on-change", "rerun")
        run(videos, state, marker_worker.path, *flags)
        before = len(marker_worker.started())
        copy = tmp_path / "copy.mp4"
        shutil.copyfile(videos / "a.mp4", copy)
        os.replace(copy, videos / "a.mp4")  # the same bytes, a new mtime and inode
        os.utime(videos / "a.mp4", (1_000_000_900, 1_000_000_900))
        run(videos, state, marker_worker.path, *flags)
        assert (len(marker_worker.started()) > before) == runs_again, version_by
