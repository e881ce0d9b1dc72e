"""Placement on a shared ledger, with real managers on a real PostgreSQL, judged by the
workers' own marks and the ledger's rows: an item that needs something runs only on a manager
that offers it - while none does it waits and `status` says for what, and when the one that
does is killed with -9 mid-work its items go only to another that offers it."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import wait_until

from .conftest import spawn_workqueue, workqueue
from .test_shared_ledger import env_with, folder, rows, run_args, status_json

NEEDS = ["--needs", "render-*=gpu"]


def ran_under(url: str, state) -> set[str]:
    """The items whose (last) run was the manager of `state`'s."""
    return {n for n, (_, _, log) in rows(url).items() if log and log.startswith(str(state))}


def test_an_item_runs_only_where_its_need_is_offered_and_waits_saying_why(
    tmp_path, postgres, marker_worker
):
    renders = [f"render-{i}.txt" for i in range(4)]
    plain = [f"plain-{i}.txt" for i in range(4)]
    items = folder(tmp_path, renders + plain)
    cpu, gpu = tmp_path / "state-cpu", tmp_path / "state-gpu"
    env = env_with(SLEEP=0.2)

    first = spawn_workqueue(
        *run_args(
            items,
            cpu,
            postgres,
            marker_worker,
            *NEEDS,
            "--offers",
            "arch=amd64",
            "--wait-for",
            "10m",
        ),
        env=env,
    )  # fmt: skip  (the gpu manager comes: it waits for it)
    try:
        wait_until(lambda: sorted(marker_worker.ended()) == sorted(plain), timeout=60)
        shown = status_json(postgres)
        cpu_id = (cpu / "manager-id").read_text().strip()
        assert shown["manager_offers"] == {cpu_id: {"arch": "amd64"}}
        reasons = {i["name"]: i["reason"] for i in shown["items"] if i["state"] == "pending"}
        assert reasons == {
            name: f"waiting for a manager that offers gpu (none of {cpu_id} does)"
            for name in renders
        }  # fmt: skip
        second = spawn_workqueue(*run_args(items, gpu, postgres, marker_worker, *NEEDS,
                                           "--offers", "gpu=a100"), env=env)  # fmt: skip
        for run in (first, second):
            _, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
    finally:
        for run in (first,):
            if run.poll() is None:
                run.kill()
    assert Counter(marker_worker.ended()) == Counter(renders + plain)  # each once
    assert ran_under(postgres, gpu) >= set(renders)  # every render on the gpu manager
    assert not ran_under(postgres, cpu) & set(renders)


def test_a_killed_managers_items_go_only_to_a_manager_that_offers_their_need(
    tmp_path, postgres, marker_worker
):
    renders = [f"render-{i}.txt" for i in range(4)]
    items = folder(tmp_path, renders)
    victim_state, cpu, rescuer = (tmp_path / s for s in ("gpu-a", "cpu", "gpu-b"))
    env = env_with(SLEEP=1)
    quick = ["--lease", "2s", "--parallelism", "2", *NEEDS]

    victim = spawn_workqueue(*run_args(items, victim_state, postgres, marker_worker, *quick,
                                       "--offers", "gpu=a100"), env=env)  # fmt: skip
    try:
        wait_until(lambda: sum(r[0] == "running" for r in rows(postgres).values()) == 2,
                   timeout=60)  # fmt: skip
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
    bystander = spawn_workqueue(*run_args(items, cpu, postgres, marker_worker, *quick), env=env)
    try:
        # the dead manager's claims go back to the line; the bystander cannot take them
        wait_until(lambda: not any(r[0] == "running" for r in rows(postgres).values()),
                   timeout=60)  # fmt: skip
        # (the two it ran are failed attempts now, to be retried: by a manager that may)
        assert {r[0] for r in rows(postgres).values()} <= {"pending", "failed"}, rows(postgres)
        rescue = spawn_workqueue(*run_args(items, rescuer, postgres, marker_worker, *quick,
                                           "--offers", "gpu=h100"), env=env)  # fmt: skip
        for run in (rescue, bystander):
            _, err = run.communicate(timeout=180)
            assert run.returncode == 0, err
    finally:
        if bystander.poll() is None:
            bystander.kill()
    assert Counter(marker_worker.ended()) == Counter(renders)  # each ended once
    assert ran_under(postgres, rescuer) == set(renders)
    assert not ran_under(postgres, cpu)


def started_after_listing(url: str) -> dict[str, float]:
    """name -> seconds from its recording to its (last) start, by the managers' clocks."""
    import psycopg

    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT name, started - first_seen FROM workqueue.items").fetchall()
    return {name: waited for name, waited in found if waited is not None}


def test_a_preferred_manager_has_every_item_first_and_the_others_take_it_after_its_spill_over(
    tmp_path, postgres, marker_worker
):
    """--prefers 'spot!=true': a manager on spot nodes takes an item only once it waited
    --spill-after in line; while a preferred manager frees a slot in time, it takes them all."""
    names = [f"clip-{i}.txt" for i in range(4)]
    items = folder(tmp_path, names)
    prefer = ["--prefers", "spot!=true"]
    env = env_with(SLEEP=1)
    steady, spot = tmp_path / "steady", tmp_path / "spot"
    first = spawn_workqueue(*run_args(items, steady, postgres, marker_worker, *prefer,
                                      "--parallelism", "2"), env=env)  # fmt: skip
    second = None
    try:
        wait_until(lambda: len(marker_worker.started()) >= 2, timeout=60)  # two wait for a slot
        second = spawn_workqueue(*run_args(items, spot, postgres, marker_worker, *prefer,
                                           "--spill-after", "20s", "--offers", "spot=true"),
                                 env=env)  # fmt: skip
        for run in (first, second):
            _, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
    finally:
        for run in (first, second):
            if run is not None and run.poll() is None:
                run.kill()
    assert ran_under(postgres, steady) == set(names) and not ran_under(postgres, spot)

    (tmp_path / "later").mkdir()
    late = folder(tmp_path / "later", [f"late-{i}.txt" for i in range(2)])
    alone = workqueue(*run_args(late, spot, postgres, marker_worker, *prefer, "--spill-after",
                                "2s", "--offers", "spot=true"), env=env)  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    waited = started_after_listing(postgres)
    assert all(waited[f"late-{i}.txt"] >= 1.9 for i in range(2)), waited  # its spill-over first


def test_needs_from_the_items_data_in_process_and_over_http_a_rule_first(
    tmp_path, postgres, marker_worker, redis_store, ambassador_server
):
    """`--needs-from-data`: an item no `--needs` rule matches needs what its data's `needs`
    says - read by a manager over the source in process (a Redis set with a data hash) and by
    one over the ambassador's full view. A rule comes first (a tenant's data cannot move its
    item off where the rules pin it); data whose `needs` does not parse waits for a manager
    that offers it - none can - and `status` says so, instead of running anywhere."""
    import json

    from tests.support.stores import unique

    r, key, data = redis_store.client(), unique("set"), unique("hash")
    renders = [f"render-{i}" for i in range(3)]
    plain = [f"plain-{i}" for i in range(3)]
    said = {**{n: {"needs": "gpu"} for n in renders}, **{n: {} for n in plain},
            "pinned-0": {"needs": "gpu"}, "bad-0": {"needs": "gpu>2"}}  # fmt: skip
    r.sadd(key, *said)
    r.hset(data, mapping={n: json.dumps(d) for n, d in said.items()})
    url = f"{redis_store.url}?set={key}&data={data}"
    rule = ["--needs", "pinned-*=arch", "--needs-from-data"]
    cpu, gpu = tmp_path / "state-cpu", tmp_path / "state-gpu"
    server = ambassador_server(url)
    managers = [
        spawn_workqueue("run", url, "--ledger", postgres, "--state-dir", cpu, *rule,
                        "--offers", "arch=amd64", "--", marker_worker.path),
        spawn_workqueue("manager", "--source", server.url, "--backend", "local", "--ledger",
                        postgres, "--state-dir", gpu, "--worker-cmd", marker_worker.path,
                        "--poll-interval", "0.2", *rule, "--offers", "gpu=a100"),
    ]  # fmt: skip
    try:
        runnable = renders + plain + ["pinned-0"]
        wait_until(lambda: sorted(marker_worker.ended()) == sorted(runnable), timeout=90)
        shown = status_json(postgres)
        (bad,) = [i for i in shown["items"] if i["name"] == "bad-0"]
        assert bad["state"] == "pending"
        assert bad["reason"].startswith(
            "waiting for a manager that offers (needs in its data that do not parse) (none of "
        ), bad
    finally:
        for run in managers:
            run.send_signal(signal.SIGTERM)
        logs = "".join(run.communicate(timeout=60)[1] for run in managers)
    assert Counter(marker_worker.ended()) == Counter(runnable)  # each once
    assert ran_under(postgres, gpu) >= set(renders)  # what the data pins, on the gpu manager
    assert ran_under(postgres, cpu) >= {"pinned-0"}  # the rule first
    assert "bad-0: its data's needs 'gpu>2' do not parse" in logs


def test_a_run_no_live_manager_may_finish_says_why_and_ends(tmp_path, postgres, marker_worker):
    """Items that need what nobody offers kept `workqueue run` waiting until killed, with one
    line about items "out of the line": now it says each cause and ends after --wait-for with
    exit 4, the items left waiting in the ledger (nothing ran, nothing was lost)."""
    renders = [f"render-{i}.txt" for i in range(3)]
    items = folder(tmp_path, [*renders, "plain.txt"])
    done = workqueue(*run_args(items, tmp_path / "state", postgres, marker_worker, *NEEDS,
                               "--wait-for", "1s"), timeout=120)  # fmt: skip
    assert done.returncode == 4, (done.stdout, done.stderr)
    assert "4 items: 1 succeeded, 0 failed, 3 not run (nothing may run them here)" in done.stdout
    assert "not run: 3 items need gpu, which no live manager offers" in done.stdout
    assert "the run ends in 1.0 s unless that changes (--wait-for)" in done.stderr
    assert marker_worker.ended() == ["plain.txt"]
    assert {name: row[0] for name, row in rows(postgres).items() if name in renders} == \
        dict.fromkeys(renders, "pending")  # fmt: skip


def test_a_live_manager_that_offers_the_need_keeps_a_run_waiting_and_it_says_so(
    tmp_path, postgres, marker_worker
):
    """While another live manager offers what the items left need, a run that cannot run them
    itself waits however long that takes - past its --wait-for - and says why; it ends when
    they are done there, exit 0. The gpu manager's workers wait on a gate the test opens only
    once the run has said so (a machine slow to start the run cannot have it all done first)."""
    renders = [f"render-{i}.txt" for i in range(3)]
    items = folder(tmp_path, renders)
    gate = tmp_path / "gate"
    gated = tmp_path / "gated-worker.sh"
    gated.write_text(f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.05; done\n'
                     f'exec "{marker_worker.path}"\n')  # fmt: skip
    gated.chmod(0o755)
    gpu_worker = SimpleNamespace(path=gated)
    gpu = spawn_workqueue(*run_args(items, tmp_path / "gpu", postgres, gpu_worker, *NEEDS,
                                    "--offers", "gpu=a100", "--parallelism", "1"))  # fmt: skip
    said, cpu = tmp_path / "cpu-run.err", None
    try:
        wait_until(lambda: any(r[0] == "running" for r in rows(postgres).values()), timeout=60)
        with open(said, "w") as err:
            cpu = subprocess.Popen(
                [sys.executable, "-m", "kube_workqueue.manager.cli",
                 *map(str, run_args(items, tmp_path / "cpu", postgres, marker_worker, *NEEDS,
                                    "--wait-for", "1s"))],
                stdout=subprocess.PIPE, stderr=err, text=True,
            )  # fmt: skip
        wait_until(lambda: "which another live manager offers: it runs them" in said.read_text()
                   or cpu.poll() is not None, timeout=120)  # fmt: skip
        assert cpu.poll() is None, said.read_text()  # past its --wait-for of 1 s, still waiting
        gate.touch()
        out, _ = cpu.communicate(timeout=120)
        assert cpu.returncode == 0, said.read_text()
        assert "not run" not in out
        _, err = gpu.communicate(timeout=120)
        assert gpu.returncode == 0, err
    finally:
        gate.touch()
        for run in (gpu, cpu):
            if run is not None and run.poll() is None:
                run.kill()
                run.wait()
    assert Counter(marker_worker.ended()) == Counter(renders)  # each once, all on the gpu one
