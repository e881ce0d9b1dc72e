"""The ffmpeg thumbnailer end to end on real videos, and its worker contract on its own."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import MAKE_VIDEOS, THUMBNAIL, mean_brightness, workqueue


def test_workqueue_run_thumbnails_a_folder_and_names_the_corrupt_video(
    tmp_path, sample_videos, ffmpeg_env
):
    out = tmp_path / "thumbs"
    env = dict(ffmpeg_env, OUTPUT_DIR=str(out))
    r = workqueue(
        "run",
        sample_videos,
        "--suffix",
        ".mp4",
        "--state-dir",
        tmp_path / "state",
        "--max-attempts",
        "1",
        "--",
        THUMBNAIL,
        env=env,
        timeout=180,
    )
    assert r.returncode == 1, r.stderr
    assert "5 items: 4 succeeded, 1 failed" in r.stdout
    assert "failed: broken.mp4" in r.stdout and "not a readable video" in r.stdout
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == [f"sample-{i:03d}.png" for i in range(4)]
    for png in out.glob("*.png"):
        assert mean_brightness(png, ffmpeg_env) > 40, f"{png.name} looks black"


def run_thumbnail(item: dict | None, env, tmp_path):
    env = dict(env)
    if item is not None:
        item_file = tmp_path / "item.json"
        item_file.write_text(json.dumps(item))
        env["WORK_ITEM_FILE"] = str(item_file)
    else:
        env.pop("WORK_ITEM_FILE", None)
    return subprocess.run([str(THUMBNAIL)], env=env, capture_output=True, text=True, timeout=60)


def test_a_video_with_a_black_leader_gets_a_picture_not_black(tmp_path, ffmpeg_env):
    video = tmp_path / "leader.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "color=c=black:s=160x120:r=25:d=1.2",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=s=160x120:r=25:d=1.8",
            "-filter_complex",
            "[0:v][1:v]concat=n=2:v=1[v]",
            "-map",
            "[v]",
            "-pix_fmt",
            "yuv420p",
            str(video),
        ],
        check=True,
        env=ffmpeg_env,
    )
    env = dict(ffmpeg_env, OUTPUT_DIR=str(tmp_path / "out"))
    r = run_thumbnail({"name": "leader.mp4", "path": str(video)}, env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert mean_brightness(tmp_path / "out" / "leader.png", ffmpeg_env) > 40


def test_the_worker_contract_errors_are_one_line(tmp_path, ffmpeg_env):
    env = dict(ffmpeg_env, OUTPUT_DIR=str(tmp_path / "out"))
    r = run_thumbnail(None, env, tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == "thumbnail: WORK_ITEM_FILE is not set"
    r = run_thumbnail({"nopath": 1}, env, tmp_path)
    assert r.returncode == 2 and "has no 'path'" in r.stderr
    r = run_thumbnail({"path": str(tmp_path / "missing.mp4")}, env, tmp_path)
    assert r.returncode == 1 and "video not found" in r.stderr
    no_out = {k: v for k, v in env.items() if k != "OUTPUT_DIR"}
    r = run_thumbnail({"path": "x"}, no_out, tmp_path)
    assert r.returncode == 2 and "OUTPUT_DIR is not set" in r.stderr
    assert all("Traceback" not in x for x in (r.stdout, r.stderr))
    item = {"path": str(tmp_path / "missing.mp4")}
    for setting, value, code, words in [
        ("FFMPEG", "/nonexistent", 127, "FFMPEG=/nonexistent is not an executable file"),
        ("THUMB_WIDTH", "abc", 2, "THUMB_WIDTH='abc': give a whole number"),
        ("THUMB_FRAMES", "0", 2, "THUMB_FRAMES='0'"),
    ]:
        r = run_thumbnail(item, dict(env, **{setting: value}), tmp_path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == code and len(lines) == 1 and words in lines[0], r.stderr
    shown = subprocess.run([str(THUMBNAIL), "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: workqueue-thumbnail")
    extra = subprocess.run([str(THUMBNAIL), "a.mp4"], capture_output=True, text=True, timeout=60)
    assert extra.returncode == 2 and "takes no arguments" in extra.stderr


def test_sample_maker_makes_real_videos(tmp_path, ffmpeg_env):
    subprocess.run(
        [sys.executable, str(MAKE_VIDEOS), str(tmp_path), "--count", "2", "--seconds", "1"],
        check=True,
        env=ffmpeg_env,
        capture_output=True,
    )
    probe = subprocess.run(
        ["ffmpeg", "-hide_banner", "-i", str(tmp_path / "sample-001.mp4")],
        capture_output=True,
        text=True,
        env=ffmpeg_env,
    )
    assert "Video: h264" in probe.stderr and "Duration: 00:00:01.00" in probe.stderr


def test_the_thumbnailer_finds_its_ffmpeg_or_says_how_to_get_one(tmp_path, sample_videos):
    item = tmp_path / "item.json"
    item.write_text(
        json.dumps({"name": "sample-000.mp4", "path": str(sample_videos / "sample-000.mp4")})
    )
    bare = {
        "PATH": str(tmp_path / "empty"),
        "WORK_ITEM_FILE": str(item),
        "OUTPUT_DIR": str(tmp_path),
    }
    # no ffmpeg on PATH and (-S: no site-packages) no imageio-ffmpeg either
    r = subprocess.run([sys.executable, "-S", THUMBNAIL], env=bare, capture_output=True, text=True)
    assert r.returncode == 127
    assert r.stderr.strip().splitlines() == [
        "thumbnail: ffmpeg not found: install it (e.g. apt-get install ffmpeg), or pip install "
        "imageio-ffmpeg into the Python that runs this worker, or set FFMPEG to its path"
    ]
    # no ffmpeg on PATH, but this Python has the imageio-ffmpeg wheel: it uses that binary
    r = subprocess.run([sys.executable, THUMBNAIL], env=bare, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sample-000.png").exists()


def _shape(text: str) -> list[str]:
    """Lines with their figures, paths and names made alike: what the README must match."""
    import re

    out = []
    for line in text.strip().splitlines():
        line = re.sub(r"/\S+", "PATH", line)
        line = re.sub(r"sample-\d+", "sample-N", line)
        # a duration's unit follows its size: 245 ms here is 1.2 s on a loaded machine
        line = re.sub(r"\d+(\.\d+)?\s?(ms|s|min|h)\b", "DURATION", line)
        line = re.sub(r"\d+(\.\d+)?", "N", line)
        out.append(line.rstrip())
    return out


def test_the_status_the_example_readme_prints_is_what_the_command_prints(
    tmp_path, sample_videos, ffmpeg_env
):
    from .conftest import REPO

    readme = (REPO / "examples" / "thumbnailer" / "README.md").read_text()
    block = readme.split("$ workqueue status --recent 3\n", 1)[1].split("$ workqueue retry", 1)[0]
    state = tmp_path / "state"
    env = dict(ffmpeg_env, OUTPUT_DIR=str(tmp_path / "thumbs"))
    workqueue("run", sample_videos, "--state-dir", state, "--max-attempts", "1", "--",
              THUMBNAIL, env=env, timeout=180)  # fmt: skip
    printed = workqueue("status", "--state-dir", state, "--recent", "3").stdout
    assert _shape(printed) == _shape(block)
