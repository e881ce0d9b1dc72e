"""Work that lives in a bucket, end to end: `workqueue run s3://…` with the generic
fetch-run-put worker wrapping the thumbnailer, against moto's S3 server over HTTP - every video
fetched, thumbnailed and put back, the corrupt one named, nothing run twice; and for each of the
three object stores (S3, Cloud Storage, Azure Blob, on their emulators), `workqueue run` over a
bucket with fetch-run-put reading and writing that store, and fetch-run-put's requests between
keys that are names, never paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.buckets import passed_on

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
        "--max-attempts", "1", *passed_on(s3.env), "--",
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


def upper_script(tmp_path):
    script = tmp_path / "upper"
    script.write_text('#!/bin/sh\ntr a-z A-Z < "$INPUT_FILE" > "$OUTPUT_FILE"\n')
    script.chmod(0o755)
    return script


def test_fetch_run_put_takes_a_request_between_keys(tmp_path, store):
    odd = "in/../odd key.txt" if store.dot_segments else "in/odd + 100% key.txt"
    bucket = store.bucket(odd, body=b"hello")
    script = upper_script(tmp_path)
    item = tmp_path / "item.json"
    output = odd.replace("in/", "out/", 1)
    request = {"input": store.url(bucket, odd), "script": [str(script)],
               "output": store.url(bucket, output)}  # fmt: skip
    item.write_text(json.dumps(request))
    env = {**store.env, "WORK_ITEM_FILE": str(item), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(FETCH_RUN_PUT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert store.read(bucket, output) == b"HELLO"  # the key as written: never resolved as a path

    item.write_text(json.dumps({**request, "input": store.url(bucket, "missing.txt")}))
    missing = subprocess.run(
        [sys.executable, str(FETCH_RUN_PUT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    told = missing.stderr.strip()
    assert told.startswith(f"fetch-run-put: download of {store.scheme}://"), told
    assert "\n" not in told

    item.write_text(json.dumps({**request, "input": f"{store.scheme}://{bucket}"}))
    malformed = subprocess.run(
        [sys.executable, str(FETCH_RUN_PUT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert malformed.returncode == 2 and "location is" in malformed.stderr, malformed.stderr


def test_workqueue_run_puts_each_object_of_a_bucket_through_its_worker_once(tmp_path, store):
    names = ["a.txt", "with space.txt", "ünï.txt"]
    bucket = store.bucket(*(f"in/{n}" for n in names), "in/skip.bin", body=b"hello")
    command = (
        "run", store.url(bucket, "in/"), "--suffix", ".txt", "--state-dir", tmp_path / "state",
        *passed_on(store.env), "--", sys.executable, FETCH_RUN_PUT, "--output",
        store.url(bucket, "out/{stem}.up"),
        upper_script(tmp_path),
    )  # fmt: skip
    env = {**os.environ, **store.env}
    first = workqueue(*command, env=env, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "3 items: 3 succeeded" in first.stdout, first.stdout
    for name in names:
        assert store.read(bucket, f"out/{name[:-4]}.up") == b"HELLO"
    again = workqueue(*command, env=env, timeout=120)  # nothing new in the bucket: nothing runs
    assert again.returncode == 0 and "0 succeeded, 3 already done" in again.stdout, again.stdout
