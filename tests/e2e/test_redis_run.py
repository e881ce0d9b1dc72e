"""`workqueue run redis://…` end to end against a real redis-server: each member of the set run
once by a real worker process, with its data from the hash; a rerun starts nothing again; a
member no client could ask for (not UTF-8, a line break) is said, escaped, and skipped - never
the end of the run."""

from __future__ import annotations

import json

from tests.support.stores import unique

from .conftest import workqueue


def test_workqueue_run_works_through_a_redis_set(tmp_path, redis_store):
    r, key, data = redis_store.client(), unique("set"), unique("hash")
    r.sadd(key, "job-1", "job 2", "job-3", b"poison-\xff", b"two\nlines")  # the last two: skipped
    r.hset(data, mapping={"job-1": '{"frames": 10}', "job 2": '{"frames": 20}'})
    out = tmp_path / "seen"
    out.mkdir()
    worker = tmp_path / "worker.sh"  # one file per run: workers run side by side
    worker.write_text(f'#!/bin/sh\ncp "$WORK_ITEM_FILE" "{out}/$$.json"\n')
    worker.chmod(0o755)
    command = ("run", f"{redis_store.url}?set={key}&data={data}", "--state-dir",
               tmp_path / "state", "--", worker)  # fmt: skip
    first = workqueue(*command, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "3 items: 3 succeeded" in first.stdout
    assert "b'poison-\\xff'" in first.stderr and "is not valid UTF-8" in first.stderr
    assert "'two\\nlines'" in first.stderr and "breaks a line" in first.stderr
    seen = {d["name"]: d for d in (json.loads(p.read_text()) for p in out.iterdir())}
    assert sorted(seen) == ["job 2", "job-1", "job-3"]
    assert seen["job-1"]["frames"] == 10 and "frames" not in seen["job-3"]
    again = workqueue(*command, timeout=120)
    assert "0 succeeded, 3 already done" in again.stdout, again.stdout
    assert len(list(out.iterdir())) == 3  # nothing ran twice
