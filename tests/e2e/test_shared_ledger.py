"""Many managers, one queue: local managers sharing a ledger in a real PostgreSQL.

Every item ends exactly once whatever happens to a manager or to the database, and every
manager gets work: two and three `workqueue run`s on one folder; one of them killed with -9
while its workers run (its items finish on the other within the lease, none twice); the
database stopped and started while work runs; a queue's SQLite ledger moved in first; the
queue commands on the shared ledger."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from tests.support.servers import wait_until

from .conftest import REPO, spawn_workqueue, workqueue


def folder(tmp_path: Path, names: list[str]) -> Path:
    items = tmp_path / "items"
    items.mkdir(exist_ok=True)
    for name in names:
        (items / name).write_text(name)
    return items


def run_args(items: Path, state: Path, url: str, worker, *extra) -> list:
    return ["run", items, "--suffix", ".txt", "--settle", "0", "--ledger", url,
            "--state-dir", state, *extra, "--", worker.path]  # fmt: skip


def env_with(**values) -> dict:
    return {**os.environ, **{k: str(v) for k, v in values.items()}}


def rows(url: str) -> dict[str, tuple]:
    """name -> (state, attempts, log_path) as the shared ledger has them."""
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('workqueue.items')").fetchone()[0] is None:
            return {}  # no manager has made the schema yet
        found = conn.execute(
            "SELECT name, state, attempts, log_path FROM workqueue.items"
        ).fetchall()
    return {name: tuple(rest) for name, *rest in found}


def ends_by_name(worker) -> Counter:
    return Counter(worker.ended())


def by_manager(url: str, states: list[Path]) -> list[int]:
    """How many items each state directory's manager ran to success."""
    done = [r for r in rows(url).values() if r[0] == "succeeded"]
    return [sum(1 for r in done if r[2] and r[2].startswith(str(s))) for s in states]


@pytest.mark.parametrize("managers", [2, 3])
def test_managers_sharing_a_ledger_run_every_item_exactly_once_and_all_work(
    tmp_path, postgres, marker_worker, managers
):
    names = [f"item-{i:02}.txt" for i in range(8 * managers)]
    items = folder(tmp_path, names)
    states = [tmp_path / f"state-{i}" for i in range(managers)]
    env = env_with(SLEEP=0.3)
    runs = [spawn_workqueue(*run_args(items, s, postgres, marker_worker, "--parallelism", 2),
                            env=env) for s in states]  # fmt: skip
    outs = [run.communicate(timeout=180) for run in runs]
    for run, (_, err) in zip(runs, outs, strict=True):
        assert run.returncode == 0, err
    assert ends_by_name(marker_worker) == Counter(names)  # each once
    assert sorted(marker_worker.started()) == sorted(names)  # and never started twice
    shares = by_manager(postgres, states)
    assert sum(shares) == len(names) and all(shares), shares  # every manager worked
    for out, share in zip(outs, shares, strict=True):
        assert f"{share} succeeded" in out[0]
        assert "done by other managers" in out[0]


def test_a_manager_killed_mid_run_has_its_items_finished_by_the_other_once(
    tmp_path, postgres, marker_worker
):
    names = [f"item-{i:02}.txt" for i in range(10)]
    items = folder(tmp_path, names)
    first, second = tmp_path / "state-a", tmp_path / "state-b"
    env = env_with(SLEEP=1)
    lease = ["--lease", "2s", "--parallelism", "2"]
    victim = spawn_workqueue(*run_args(items, first, postgres, marker_worker, *lease), env=env)
    try:
        wait_until(lambda: sum(1 for r in rows(postgres).values() if r[0] == "running") == 2,
                   timeout=60)  # fmt: skip
        held = [n for n, r in rows(postgres).items() if r[0] == "running"]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
    survivor = spawn_workqueue(*run_args(items, second, postgres, marker_worker, *lease), env=env)
    out, err = survivor.communicate(timeout=180)
    assert survivor.returncode == 0, err
    assert ends_by_name(marker_worker) == Counter(names)  # every item ended once, none twice
    final = rows(postgres)
    for name in held:  # the killed manager's: its workers ended with it, run here again
        state, attempts, log_path = final[name]
        assert state == "succeeded" and log_path.startswith(str(second)), final[name]
        assert attempts == 2  # the attempt that died with its manager counts
    assert "did not beat for 2s of a working database" in err  # (it says whose claims it took)
    assert all(r[0] == "succeeded" for r in final.values())


def test_the_database_stopped_and_started_mid_run_loses_nothing_and_runs_nothing_twice(
    tmp_path, own_postgres, marker_worker
):
    url = own_postgres.database()
    names = [f"item-{i:02}.txt" for i in range(8)]
    items = folder(tmp_path, names)
    states = [tmp_path / "state-a", tmp_path / "state-b"]
    env = env_with(SLEEP=2)
    runs = [spawn_workqueue(*run_args(items, s, url, marker_worker, "--parallelism", 2,
                                      "--lease", "5s"), env=env) for s in states]  # fmt: skip
    try:
        wait_until(lambda: len(marker_worker.started()) >= 3, timeout=60)
        running = set(marker_worker.started()) - set(marker_worker.ended())
        own_postgres.stop()
        # running work finishes while the database is down; its ends wait for it
        wait_until(lambda: running <= set(marker_worker.ended()), timeout=60)
        own_postgres.start()
        outs = [run.communicate(timeout=180) for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
    for run, (_, err) in zip(runs, outs, strict=True):
        assert run.returncode == 0, err
    assert any("does not answer" in err for _, err in outs)
    assert ends_by_name(marker_worker) == Counter(names)
    assert sorted(marker_worker.started()) == sorted(names)  # nothing started twice
    assert all(r[0] == "succeeded" and r[1] == 1 for r in rows(url).values())


def test_a_local_ledger_moved_into_a_shared_one_keeps_what_ran(tmp_path, postgres, marker_worker):
    items = folder(tmp_path, ["a.txt", "b.txt", "fail-c.txt"])
    state = tmp_path / "state"
    local = ["run", items, "--suffix", ".txt", "--settle", "0", "--state-dir", state,
             "--max-attempts", "1", "--", marker_worker.path]  # fmt: skip
    assert workqueue(*local).returncode == 1  # fail-c failed
    assert workqueue("pause", "--state-dir", state).returncode == 0
    moved = workqueue("ledger", "migrate", "--state-dir", state, "--to", postgres)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith("moved 3 items (0 earlier runs) from ")
    assert rows(postgres)["a.txt"][:2] == ("succeeded", 1)
    status = json.loads(workqueue("status", "--ledger", postgres, "--json").stdout)
    assert status["counts"]["succeeded"] == 2 and status["counts"]["failed"] == 1
    assert status["paused_since"] is not None  # the pause came over too
    again = workqueue("ledger", "migrate", "--state-dir", state, "--to", postgres)
    assert "3 it knew already kept as it had them" in again.stdout
    assert workqueue("resume", "--ledger", postgres).returncode == 0
    (items / "d.txt").write_text("d")
    shared = workqueue(*run_args(items, tmp_path / "s2", postgres, marker_worker,
                                 "--max-attempts", "1"))  # fmt: skip
    assert shared.returncode == 1  # fail-c is still failed, out of attempts
    assert Counter(marker_worker.ended()) == Counter(["a.txt", "b.txt", "d.txt"])  # a, b once
    retried = workqueue("retry", "--failed", "--ledger", postgres)
    assert retried.returncode == 0 and "fail-c.txt" in retried.stdout
    assert rows(postgres)["fail-c.txt"][:2] == ("pending", 0)


def test_migrating_is_refused_while_a_manager_holds_the_folder_or_an_item_runs(tmp_path, postgres):
    state = tmp_path / "state"
    state.mkdir()
    refused = workqueue("ledger", "migrate", "--state-dir", state, "--to", "mysql://x/y")
    assert refused.returncode == 2 and "not a PostgreSQL URL" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_queue_commands_on_a_shared_ledger(tmp_path, postgres, marker_worker):
    items = folder(tmp_path, ["a.txt", "fail-b.txt"])
    first = workqueue(*run_args(items, tmp_path / "s1", postgres, marker_worker,
                                "--max-attempts", "1"))  # fmt: skip
    assert first.returncode == 1
    text = workqueue("status", "--ledger", postgres)
    assert text.returncode == 0 and "fail-b.txt" in text.stdout
    assert "postgresql://" in text.stdout  # where the queue is, shown
    assert workqueue("pause", "--ledger", postgres).returncode == 0
    assert workqueue("scale", "--parallelism", "5", "--ledger", postgres).returncode == 0
    with psycopg.connect(postgres) as conn:
        paused, parallelism = conn.execute(
            "SELECT paused_since, parallelism FROM workqueue.queue"
        ).fetchone()
    assert paused is not None and parallelism == 5
    detail = workqueue("status", "fail-b.txt", "--ledger", postgres)
    assert detail.returncode == 0 and "failed" in detail.stdout
    planned = workqueue("stability", "--from-state", "--ledger", postgres)  # measured there
    assert planned.returncode == 0 and "2 finished runs" in planned.stdout, planned.stderr
    bad = workqueue("status", "--ledger", "postgresql://u:s3cret@127.0.0.1:1/q")
    assert bad.returncode != 0 and "s3cret" not in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr


def test_a_parallelism_asked_of_a_shared_queue_is_the_whole_queues(
    tmp_path, postgres, marker_worker
):
    """`workqueue scale` on a shared ledger: that many run at once across every manager, not
    that many on each."""
    names = [f"item-{i:02}.txt" for i in range(8)]
    items = folder(tmp_path, names)
    assert workqueue("scale", "--parallelism", "2", "--ledger", postgres).returncode == 0
    env = env_with(SLEEP=0.3)
    runs = [spawn_workqueue(*run_args(items, tmp_path / f"s{i}", postgres, marker_worker,
                                      "--parallelism", 4), env=env) for i in range(2)]  # fmt: skip
    for run in runs:
        _, err = run.communicate(timeout=180)
        assert run.returncode == 0, err
    running, most = 0, 0
    for event in marker_worker.events():  # appended as each worker starts and ends
        running += 1 if event["event"] == "start" else -1
        most = max(most, running)
    assert most == 2  # the queue's two, shared: never four, nor eight
    assert Counter(marker_worker.ended()) == Counter(names)


def status_json(url: str) -> dict:
    """`workqueue status --json` of the shared ledger, held to its published schema."""
    import jsonschema

    done = workqueue("status", "--json", "--ledger", url)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    jsonschema.validate(shown, json.loads((REPO / "docs" / "status.schema.json").read_text()))
    return shown


def test_a_drained_manager_finishes_what_it_holds_and_the_other_takes_the_rest(
    tmp_path, postgres, marker_worker
):
    """`workqueue drain`: from the moment it returns the manager claims nothing (its runs end
    as they would, counted by the workers' own marks), another manager takes every other item
    once, status says draining then drained - and a restart of it stays drained until
    --undo."""
    names = [f"item-{i:02}.txt" for i in range(8)]
    items = folder(tmp_path, names)
    first, second = tmp_path / "state-a", tmp_path / "state-b"
    env = env_with(SLEEP=0.3)
    # A's items are slow (3 s): alone, it is still running them when the drain lands however
    # long that takes to start - with B's speed it could finish all 8 and leave first
    a = spawn_workqueue(*run_args(items, first, postgres, marker_worker, "--parallelism", 2),
                        env=env_with(SLEEP=3))  # fmt: skip
    wait_until(lambda: len(marker_worker.started()) >= 1, timeout=60)
    a_id = (first / "manager-id").read_text().strip()
    said = workqueue("drain", a_id, "--ledger", postgres)
    assert said.returncode == 0 and f"manager {a_id} is draining" in said.stdout, said.stderr
    where = said.stdout.split(": manager ")[0]
    shown = next(line for line in (REPO / "docs" / "sharing.md").read_text().splitlines()
                 if line.startswith("postgresql://***@db:5432/queue: manager "))  # fmt: skip
    shown = shown.replace("postgresql://***@db:5432/queue", where).replace("1f3a9c2e", a_id)
    assert said.stdout.strip() == shown  # the docs' session, as it prints
    (drain,) = status_json(postgres)["draining_managers"]
    assert drain["id"] == a_id
    # the queue's parallelism no longer counts the drained one's slots: they take nothing new
    assert status_json(postgres)["forecast"]["parallelism"] == 0
    with psycopg.connect(postgres) as conn:  # one snapshot: what A ran and what it holds
        done_or_held = conn.execute(
            "SELECT count(*) FROM workqueue.items WHERE owner = %s OR (state = 'succeeded' "
            "AND log_path LIKE %s)", (a_id, f"{first}%")
        ).fetchone()[0]  # fmt: skip
    text = workqueue("status", "--ledger", postgres).stdout
    assert f"manager {a_id}: draining" in text or f"manager {a_id}: drained" in text, text
    b = spawn_workqueue(*run_args(items, second, postgres, marker_worker, "--parallelism", 2),
                        env=env)  # fmt: skip
    for run in (a, b):
        _, err = run.communicate(timeout=180)
        assert run.returncode == 0, err
    assert ends_by_name(marker_worker) == Counter(names)  # each once
    ran_a, ran_b = by_manager(postgres, [first, second])
    # nothing claimed after the drain: A ran at most what it had run or held then
    assert ran_a <= done_or_held and ran_a + ran_b == len(names), (ran_a, ran_b, done_or_held)
    (drained,) = status_json(postgres)["draining_managers"]
    assert drained["holding"] == 0
    assert f"manager {a_id}: drained" in workqueue("status", "--ledger", postgres).stdout

    # a restart of the drained manager takes nothing, and says so; --undo gives it work
    (items / "late.txt").write_text("late")
    again = spawn_workqueue(
        *run_args(items, first, postgres, marker_worker, "--wait-for", "10m"), env=env
    )  # fmt: skip  (the drain is undone: it waits for it)
    wait_until(lambda: "late.txt" in rows(postgres), timeout=60)  # listed, not taken
    assert rows(postgres)["late.txt"][0] == "pending"
    assert status_json(postgres)["draining_managers"][0]["holding"] == 0
    undo = workqueue("drain", a_id, "--undo", "--ledger", postgres)
    assert undo.returncode == 0 and "takes work again" in undo.stdout
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert "is drained: it takes nothing new" in err
    assert "draining_managers" not in status_json(postgres)
    assert Counter(marker_worker.ended())["late.txt"] == 1


def test_drain_names_a_manager_of_a_shared_ledger(tmp_path, postgres, marker_worker):
    """A stopped manager is drained ahead of its restart (it takes nothing when it starts, and
    a run of it says so and ends); an --undo of an id nothing drains is one line, exit 2."""
    items = folder(tmp_path, ["a.txt"])
    assert workqueue(*run_args(items, tmp_path / "s", postgres, marker_worker)).returncode == 0
    stopped = (tmp_path / "s" / "manager-id").read_text().strip()
    ahead = workqueue("drain", stopped, "--ledger", postgres)
    assert ahead.returncode == 0 and "is not running now" in ahead.stdout, ahead
    assert "drained ahead of its start" in ahead.stdout
    (items / "b.txt").write_text("b")
    held = workqueue(*run_args(items, tmp_path / "s", postgres, marker_worker, "--wait-for", "1s"))
    assert held.returncode == 4, (held.stdout, held.stderr)
    assert "1 item waits for a manager that takes new items: this one is drained" in held.stdout
    typo = workqueue("drain", "--undo", "nobody", "--ledger", postgres)
    assert typo.returncode == 2 and "no manager 'nobody'" in typo.stderr, typo
    assert "\n" not in typo.stderr.strip()
    assert workqueue("drain", "--undo", stopped, "--ledger", postgres).returncode == 0
    again = workqueue(*run_args(items, tmp_path / "s", postgres, marker_worker))
    assert again.returncode == 0 and "1 succeeded" in again.stdout, again.stdout
    local = workqueue("drain", "nobody", "--state-dir", tmp_path / "s")
    assert local.returncode == 2 and "drain names a manager of a shared --ledger" in local.stderr


def test_drain_true_at_start_takes_nothing_and_drain_false_gives_work_again(
    tmp_path, postgres, marker_worker
):
    """`--drain true|false` (a WorkQueue's `drain`): written before the manager's first claim."""
    names = ["a.txt", "b.txt"]
    items = folder(tmp_path, names)
    state = tmp_path / "state"
    drained = spawn_workqueue(*run_args(items, state, postgres, marker_worker, "--drain", "true"))
    wait_until(lambda: sorted(rows(postgres)) == names, timeout=60)  # listed, recorded
    wait_until(lambda: "draining_managers" in status_json(postgres), timeout=30)
    manager_id = (state / "manager-id").read_text().strip()
    assert status_json(postgres)["draining_managers"] == [
        {"id": manager_id, "since_seconds": pytest.approx(0, abs=120), "holding": 0}
    ]
    assert {state for state, *_ in rows(postgres).values()} == {"pending"}
    assert marker_worker.started() == []
    drained.send_signal(signal.SIGTERM)  # a --once run alone and drained would wait for others
    _, err = drained.communicate(timeout=60)
    # declared, it is undone where it was declared (an operator's WorkQueue: its spec.drain) -
    # `workqueue drain --undo` would last only until the next start declares it again
    assert "started with --drain true - a WorkQueue's spec.drain: set it false" in err, err
    again = workqueue(*run_args(items, state, postgres, marker_worker, "--drain", "false"))
    assert again.returncode == 0, again.stderr
    assert Counter(marker_worker.ended()) == Counter(names)
    assert "draining_managers" not in status_json(postgres)
    bad = workqueue(*run_args(items, state, postgres, marker_worker, "--drain", "maybe"))
    assert bad.returncode == 2 and "--drain: true or false, not 'maybe'" in bad.stderr
