"""The multiworker facade: a pipeline of reusable steps behind one worker interface, run as
consecutive local processes on real videos."""

from __future__ import annotations

import json
import os
import subprocess

from .conftest import REPO, mean_brightness, workqueue

MULTIWORKER = REPO / "worker-images" / "multiworker" / "multiworker"
PIPELINE = REPO / "examples" / "multiworker" / "pipeline.json"


def test_the_example_pipeline_thumbnails_and_makes_sheets(tmp_path, sample_videos, ffmpeg_env):
    out = tmp_path / "out"
    env = dict(ffmpeg_env, OUTPUT_DIR=str(out), PIPELINE_FILE=str(PIPELINE))
    r = workqueue(
        "run",
        sample_videos,
        "--state-dir",
        tmp_path / "state",
        "--max-attempts",
        "1",
        "--",
        MULTIWORKER,
        env=env,
        timeout=180,
    )
    assert r.returncode == 1, r.stderr
    assert "5 items: 4 succeeded, 1 failed" in r.stdout
    assert "multiworker: step 'probe' failed with exit code 1" in r.stdout
    for i in range(4):
        assert (out / f"sample-{i:03d}.png").exists()
        sheet = out / f"sample-{i:03d}-sheet.png"
        assert mean_brightness(sheet, ffmpeg_env) > 40
    assert not list(out.glob("broken*"))


def run_multiworker(tmp_path, pipeline, env=None, item=None):
    item_file = tmp_path / "item.json"
    item_file.write_text(json.dumps(item or {"name": "x", "path": "/nonexistent"}))
    full_env = dict(os.environ, WORK_ITEM_FILE=str(item_file), **(env or {}))
    if pipeline is not None:
        full_env["PIPELINE"] = json.dumps(pipeline)
    return subprocess.run(
        [str(MULTIWORKER)], env=full_env, capture_output=True, text=True, timeout=60
    )


def test_steps_share_a_work_dir_and_run_in_order_until_one_fails(tmp_path):
    log = tmp_path / "order.log"
    step = tmp_path / "step.sh"
    step.write_text(
        '#!/bin/sh\necho "$STEP_NAME" >> "$LOG"\n'
        'ls "$WORK_DIR" >> "$LOG"\ntouch "$WORK_DIR/$STEP_NAME"\n'
        '[ "$STEP_NAME" != boom ] || exit 5\n'
    )
    step.chmod(0o755)
    pipeline = {
        "steps": [{"name": n, "command": [str(step)]} for n in ["one", "two", "boom", "never"]]
    }
    r = run_multiworker(tmp_path, pipeline, env={"LOG": str(log)})
    assert r.returncode == 5
    assert r.stderr.strip() == "multiworker: step 'boom' failed with exit code 5"
    assert log.read_text().split() == ["one", "two", "one", "boom", "one", "two"]


def test_a_given_work_dir_is_kept_and_a_made_one_removed(tmp_path):
    step = tmp_path / "step.sh"
    step.write_text('#!/bin/sh\necho "$WORK_DIR" > "$RESULT"\ntouch "$WORK_DIR/made"\n')
    step.chmod(0o755)
    pipeline = {"steps": [{"name": "s", "command": [str(step)]}]}
    result = tmp_path / "result"
    shared = tmp_path / "shared"
    assert (
        run_multiworker(
            tmp_path, pipeline, env={"RESULT": str(result), "WORK_DIR": str(shared)}
        ).returncode
        == 0
    )
    assert (shared / "made").exists()
    assert run_multiworker(tmp_path, pipeline, env={"RESULT": str(result)}).returncode == 0
    assert not os.path.exists(result.read_text().strip())


def test_bad_pipelines_are_one_line_errors(tmp_path):
    cases = [
        (None, "set PIPELINE"),
        ({"nosteps": 1}, "is not a pipeline"),
        ({"steps": []}, "has no steps"),
        ({"steps": [{"name": "a", "command": "echo hi"}]}, "a list of strings"),
        ({"steps": [{"name": "a", "command": ["no-such-step-xyz"]}]}, "not found"),
    ]
    for pipeline, message in cases:
        env = {} if pipeline is not None else {"PIPELINE_FILE": ""}
        r = run_multiworker(tmp_path, pipeline, env=env)
        assert r.returncode == 2, (pipeline, r.stderr)
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
