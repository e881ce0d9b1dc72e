"""The ambassador's private folders (`private_folders.py`): those of an ambassador killed with
SIGKILL are removed by the next one that starts; a live ambassador's - or its workers' - and
anything not made held by this code are never touched."""

from __future__ import annotations

import os
import subprocess
import sys

from kube_workqueue.ambassador.private_folders import (
    HELD_MARK,
    PREFIXES,
    make_held,
    remove_left_behind,
)
from tests.support.servers import Server, free_port

SNAPSHOT, METRICS = PREFIXES


def ours(tmp) -> set[str]:
    return {n for n in os.listdir(tmp) if n.startswith(PREFIXES)}


def test_a_killed_ambassadors_folders_go_at_the_next_start_and_no_live_ones(tmp_path):
    root, tmp = tmp_path / "root", tmp_path / "tmp"
    root.mkdir()
    tmp.mkdir()
    (root / "a.mp4").write_bytes(b"x")
    older = tmp / f"{SNAPSHOT}of-an-older-release"  # made before folders were held: no mark
    older.mkdir()
    (older / "current").write_text("1 names-000000000001\n")
    outside = tmp_path / "outside"  # a link named as ours: never followed, never removed
    outside.mkdir()
    (outside / HELD_MARK).touch()
    (outside / "precious").write_text("keep")
    (tmp / f"{METRICS}a-link").symlink_to(outside)
    before = ours(tmp)

    killed = Server(root, free_port(), (), tmpdir=tmp)
    killed.wait_ready()
    killed_folders = ours(tmp) - before
    assert sorted(p for n in killed_folders for p in PREFIXES if n.startswith(p)) == sorted(
        PREFIXES
    )  # its snapshot's and its metrics' folders
    live = Server(root, free_port(), (), tmpdir=tmp)
    servers = [live]
    try:
        live.wait_ready()
        live_folders = ours(tmp) - before - killed_folders
        killed.kill_9()  # the whole ambassador at once: nothing tidies up
        assert killed_folders <= ours(tmp)  # left behind

        started = Server(root, free_port(), (), tmpdir=tmp)
        servers.append(started)
        started.wait_ready()  # (the folders are looked at before it serves)
        left = ours(tmp)
        assert not killed_folders & left  # gone
        assert live_folders <= left  # a live ambassador's, and its workers', stay
        assert len(left - before - live_folders) == 2  # the new one's own
        assert older.is_dir() and (older / "current").exists()
        assert (tmp / f"{METRICS}a-link").is_symlink()
        assert (outside / "precious").read_text() == "keep"
    finally:
        for server in servers:
            server.stop()
    assert ours(tmp) == before  # each stopped one removed its own


def test_a_folder_is_held_while_any_process_sharing_its_lock_lives(tmp_path, monkeypatch):
    """As gunicorn's workers share their master's lock: the folder stays while the last of
    them lives, and goes once it is gone."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # (read again from TMPDIR)
    path, fd = make_held(SNAPSHOT)
    assert os.path.dirname(path) == str(tmp_path)
    assert remove_left_behind(str(tmp_path)) == []  # its maker lives
    worker = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE, pass_fds=(fd,))  # fmt: skip
    try:
        os.close(fd)  # the maker is gone; a worker holding the same lock is not
        assert remove_left_behind(str(tmp_path)) == []
        assert os.path.isdir(path)
    finally:
        worker.stdin.close()
        worker.wait(30)
    assert remove_left_behind(str(tmp_path)) == [path]
    assert not os.path.exists(path)


def test_only_a_held_real_folder_named_as_ours_is_removed(tmp_path):
    unmarked = tmp_path / f"{SNAPSHOT}unmarked"  # its maker may be about to mark it
    unmarked.mkdir()
    marked_file = tmp_path / f"{METRICS}a-file"  # not a folder
    marked_file.write_text("x")
    other = tmp_path / "someone-elses"  # not our name, though held and free
    other.mkdir()
    (other / HELD_MARK).touch()
    fake_mark = tmp_path / f"{SNAPSHOT}mark-is-a-folder"
    (fake_mark / HELD_MARK).mkdir(parents=True)
    left = tmp_path / f"{SNAPSHOT}left"
    (left / "deeper").mkdir(parents=True)
    (left / HELD_MARK).touch()
    (left / "deeper" / "names-000000000001").write_text("a\0b\0")
    assert remove_left_behind(str(tmp_path)) == [str(left)]
    assert sorted(os.listdir(tmp_path)) == sorted(
        p.name for p in (unmarked, marked_file, other, fake_mark)
    )
