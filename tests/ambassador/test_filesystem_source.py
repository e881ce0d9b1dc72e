"""The folder as a source: events and polling keep the snapshot current; settling holds back
copies in progress. Real files, real watchfiles; each test runs in both modes."""

from __future__ import annotations

import os
import time

import pytest

from kube_workqueue.ambassador.sources import FilesystemSource

from ..conftest import wait_until


@pytest.fixture(params=["events", "polling"])
def start_source(request):
    sources = []

    def start(root, **kwargs):
        if request.param == "polling":
            kwargs.update(force_polling=True, poll_interval=0.1)
        source = FilesystemSource(str(root), kwargs.pop("suffixes", [".mp4"]), **kwargs)
        source.start()
        sources.append(source)
        return source

    yield start
    for source in sources:
        source.stop()


def names(source):
    return source.page(None, None)[0]


def test_the_first_scan_lists_files_at_rest(tmp_path, start_source):
    (tmp_path / "a.mp4").write_bytes(b"x")
    old = time.time() - 60
    os.utime(tmp_path / "a.mp4", (old, old))
    source = start_source(tmp_path, settle=5)
    assert names(source) == ["a.mp4"]


def test_new_and_removed_files_are_seen(tmp_path, start_source):
    source = start_source(tmp_path, settle=0)
    assert names(source) == []
    (tmp_path / "a.mp4").write_bytes(b"x")
    wait_until(lambda: names(source) == ["a.mp4"])
    (tmp_path / "a.mp4").unlink()
    wait_until(lambda: names(source) == [])


def test_a_rename_from_part_is_an_arrival(tmp_path, start_source):
    # ".part" is one of the suffixes: only the copy-in-progress rule keeps the copy out
    source = start_source(tmp_path, settle=0, suffixes=[".mp4", ".part"])
    (tmp_path / "a.mp4.part").write_bytes(b"x" * 100)
    (tmp_path / "sentinel.mp4").write_bytes(b"x")
    wait_until(lambda: "sentinel.mp4" in names(source))  # the folder was looked at since
    assert "a.mp4.part" not in names(source)
    os.rename(tmp_path / "a.mp4.part", tmp_path / "a.mp4")
    wait_until(lambda: names(source) == ["a.mp4", "sentinel.mp4"])


def test_a_growing_file_waits_until_it_holds_still(tmp_path, start_source):
    source = start_source(tmp_path, settle=1.5)
    path = tmp_path / "growing.mp4"
    with open(path, "wb") as f:
        for _ in range(8):  # writes for ~1.6 s, never pausing anywhere near the settle time
            f.write(b"x" * 1000)
            f.flush()
            time.sleep(0.2)
            assert names(source) == [], "listed while still being written"
    wait_until(lambda: names(source) == ["growing.mp4"], timeout=5)


def test_recursive_mode_follows_new_and_removed_directories(tmp_path, start_source):
    source = start_source(tmp_path, settle=0, recursive=True)
    (tmp_path / "day1").mkdir()
    (tmp_path / "day1" / "a.mp4").write_bytes(b"x")
    wait_until(lambda: names(source) == ["day1/a.mp4"])
    (tmp_path / "day1" / "a.mp4").unlink()
    (tmp_path / "day1").rmdir()
    wait_until(lambda: names(source) == [])


def test_flat_mode_ignores_subdirectories(tmp_path, start_source):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.mp4").write_bytes(b"x")
    source = start_source(tmp_path, settle=0)
    (tmp_path / "sub" / "b.mp4").write_bytes(b"x")
    (tmp_path / "top.mp4").write_bytes(b"x")
    wait_until(lambda: names(source) == ["top.mp4"])
    time.sleep(0.3)
    assert names(source) == ["top.mp4"]


def test_a_missing_root_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        FilesystemSource(str(tmp_path / "nope")).start()


def test_events_mode_is_reported(tmp_path):
    source = FilesystemSource(str(tmp_path))
    source.start()
    try:
        wait_until(lambda: source.mode == "events")
    finally:
        source.stop()


def test_a_name_that_is_not_utf8_is_skipped_aloud_and_events_go_on(tmp_path, start_source, caplog):
    caplog.set_level("WARNING", logger="kube_workqueue.ambassador.sources.filesystem")
    os.close(os.open(os.fsencode(tmp_path) + b"/at-start\xff.mp4", os.O_CREAT | os.O_WRONLY))
    source = start_source(tmp_path, settle=0)
    os.close(os.open(os.fsencode(tmp_path) + b"/later\xfe.mp4", os.O_CREAT | os.O_WRONLY))
    (tmp_path / "good.mp4").write_bytes(b"x")
    wait_until(lambda: names(source) == ["good.mp4"])
    wait_until(lambda: caplog.text.count("not valid UTF-8") == 2)
    assert "b'at-start\\xff.mp4'" in caplog.text and "b'later\\xfe.mp4'" in caplog.text
    mode = source.mode
    (tmp_path / "next.mp4").write_bytes(b"x")  # still followed by events (or the poller)
    wait_until(lambda: names(source) == ["good.mp4", "next.mp4"])
    assert source.mode == mode and "file events unavailable" not in caplog.text
