"""Work that lives in a bucket, end to end: `workqueue run s3://…` with the generic
fetch-run-put worker wrapping the thumbnailer, against moto's S3 server over HTTP - every video
fetched, thumbnailed and put back, the corrupt one named, nothing run twice."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import REPO, THUMBNAIL, workqueue

FETCH_RUN_PUT = REPO / "worker-images" / "generic" / "fetch-run-put"


def test_workqueue_run_thumbnails_a_bucket(tmp_path, s3, sample_videos, ffmpeg_env):
    bucket = s3.bucket()
    videos = sorted(p.name for p in sample_videos.iterdir() if p.suffix == ".mp4")
    spaced = videos[-1]  # a real video, uploaded under a key with a space
    for name in videos:
        key = f"in/{name}" if name != spaced else f"in/with space {name}"
        s3.client().upload_file(str(sample_videos / name), bucket, key)
    env = dict(ffmpeg_env, **s3.env)
    command = (
        "run", f"s3://{bucket}/in/", "--suffix", ".mp4", "--state-dir", tmp_path / "state",
        "--max-attempts", "1", "--",
        sys.executable, FETCH_RUN_PUT, "--output", f"s3://{bucket}/thumbs/{{stem}}.png",
        sys.executable, THUMBNAIL,
    )  # fmt: skip
    first = workqueue(*command, env=env, timeout=240)
    assert first.returncode == 1, first.stderr
    assert f"{len(videos)} items: {len(videos) - 1} succeeded, 1 failed" in first.stdout
    assert "failed: broken.mp4" in first.stdout
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix="thumbs/")["Contents"]
    thumbs = sorted(o["Key"] for o in listed)
    expected = sorted(
        f"thumbs/{'with space ' if n == spaced else ''}{n[:-4]}.png"
        for n in videos
        if n != "broken.mp4"
    )
    assert thumbs == expected
    png = s3.client().get_object(Bucket=bucket, Key=thumbs[0])["Body"].read()
    assert png.startswith(b"\x89PNG")

    again = workqueue(*command, env=env, timeout=120)  # the same bucket: nothing runs again
    assert f"0 succeeded, {len(videos) - 1} already done, 1 failed" in again.stdout, again.stdout
    assert "attempt 2" not in again.stdout


def test_fetch_run_put_takes_a_request_between_buckets(tmp_path, s3):
    bucket = s3.bucket()
    s3.client().put_object(Bucket=bucket, Key="in/../odd key.txt", Body=b"hello")
    script = tmp_path / "upper"
    script.write_text('#!/bin/sh\ntr a-z A-Z < "$INPUT_FILE" > "$OUTPUT_FILE"\n')
    script.chmod(0o755)
    item = tmp_path / "item.json"
    item.write_text(
        json.dumps(
            {
                "input": f"s3://{bucket}/in/../odd key.txt",
                "script": [str(script)],
                "output": f"s3://{bucket}/out/../odd key.txt",
            }
        )  # fmt: skip
    )
    env = {**s3.env, "WORK_ITEM_FILE": str(item), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(FETCH_RUN_PUT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    body = s3.client().get_object(Bucket=bucket, Key="out/../odd key.txt")["Body"].read()
    assert body == b"HELLO"  # the key as written: never resolved as a path

    item.write_text(json.dumps({"input": f"s3://{bucket}/missing.txt", "script": [str(script)],
                                "output": f"s3://{bucket}/out/x"}))  # fmt: skip
    missing = subprocess.run(
        [sys.executable, str(FETCH_RUN_PUT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("fetch-run-put: download of s3://") and "\n" not in (
        missing.stderr.strip()
    )
