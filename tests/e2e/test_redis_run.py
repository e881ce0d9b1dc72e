"""`workqueue run redis://…` end to end against a real redis-server: each member of the set run
once by a real worker process, with its data from the hash; a rerun starts nothing again."""

from __future__ import annotations

import json

from tests.support.stores import unique

from .conftest import workqueue


def test_workqueue_run_works_through_a_redis_set(tmp_path, redis_store):
    r, key, data = redis_store.client(), unique("set"), unique("hash")
    r.sadd(key, "job-1", "job 2", "job-3")
    r.hset(data, mapping={"job-1": '{"frames": 10}', "job 2": '{"frames": 20}'})
    out = tmp_path / "seen.jsonl"
    worker = tmp_path / "worker.sh"
    worker.write_text(f'#!/bin/sh\ncat "$WORK_ITEM_FILE" >> "{out}"\necho >> "{out}"\n')
    worker.chmod(0o755)
    command = ("run", f"{redis_store.url}?set={key}&data={data}", "--state-dir",
               tmp_path / "state", "--", worker)  # fmt: skip
    first = workqueue(*command, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "3 items: 3 succeeded" in first.stdout
    seen = {d["name"]: d for d in map(json.loads, filter(None, out.read_text().splitlines()))}
    assert sorted(seen) == ["job 2", "job-1", "job-3"]
    assert seen["job-1"]["frames"] == 10 and "frames" not in seen["job-3"]
    again = workqueue(*command, timeout=120)
    assert "0 succeeded, 3 already done" in again.stdout, again.stdout
    assert len(list(filter(None, out.read_text().splitlines()))) == 3  # nothing ran twice
