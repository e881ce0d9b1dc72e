"""Tenants end to end on the local backend (`workqueue run`), judged by the workers' own marks:
a group's limit is never passed and is reached, a rate never has more starts in a period than
it allows, fair share lets a small tenant in ahead of a big one's backlog, and `status` says
which group holds a waiting item - as docs/tenants.md shows it. (The shared ledger's:
tests/fleet/test_fleet_tenants.py; Kubernetes': tests/manager/backends/kubernetes/
test_tenants.py.)"""

from __future__ import annotations

import json

import jsonschema
import requests

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.e2e.test_docs_sessions import shown_session
from tests.e2e.test_status import SCHEMA
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.marks import (
    busiest_window,
    grouped_folder,
    marking_worker,
    most_at_once,
    read_marks,
)
from tests.support.servers import free_port, wait_until
from tests.support.stores import unique

STARTUP_SLACK = 0.3  # how much a worker's process start may shift its start mark


def folders(tmp_path, **groups: int):
    return grouped_folder(tmp_path / "in", groups)


def group_of(name: str) -> str:
    return name.split("/")[0]


def run(tmp_path, source, *flags, sleep=0.2):
    worker, marks = marking_worker(tmp_path, sleep)
    done = workqueue(
        "run", source, "--suffix", ".txt", "--recursive", "--settle", "0",
        "--state-dir", tmp_path / "state", "--group", "^([^/]+)/", *flags, "--", worker,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return read_marks(marks)


def test_limits_hold_each_group_and_are_reached(tmp_path):
    source = folders(tmp_path, api=8, db=8, other=3)
    marks = run(tmp_path, source, "--parallelism", "8", "--limit", "api=2", "--limit", "*=3")
    most = most_at_once(marks, group_of)
    assert most["api"] == 2 and most["db"] == 3 and most["other"] == 3, most
    assert sum(e == "end" for e, _, _ in marks) == 19  # every item ran, once


def test_a_rate_never_allows_more_starts_in_a_period(tmp_path):
    source = folders(tmp_path, acme=7, free=3)
    marks = run(tmp_path, source, "--parallelism", "4", "--rate", "acme=3/1s", sleep=0.05)
    acme = [at for event, at, name in marks if event == "start" and group_of(name) == "acme"]
    assert len(acme) == 7
    # tokens come back a period after each start; a start is counted when the manager starts
    # the work, the worker marks it once its process runs: a worker's clock may see a start
    # up to its start-up time early or late (a cold first batch is the slowest)
    assert busiest_window(acme, 1.0 - STARTUP_SLACK) == 3
    assert acme[-1] - acme[0] >= 2.0 - STARTUP_SLACK


def test_fair_share_lets_the_small_tenant_in_ahead_of_the_backlog(tmp_path):
    orders = {}
    for flags in (["--fair"], []):
        where = tmp_path / (flags[0][2:] if flags else "fifo")
        where.mkdir()
        source = folders(where, big=10, small=2)
        marks = run(where, source, "--parallelism", "1", *flags, sleep=0.01)
        orders[bool(flags)] = [group_of(name) for event, _, name in marks if event == "start"]
    assert orders[True][:4].count("small") == 2, orders[True]
    assert orders[False][:10] == ["big"] * 10  # without --fair: the backlog first


def test_status_names_the_group_that_holds_a_waiting_item(tmp_path):
    source = folders(tmp_path, api=3)
    worker, marks = marking_worker(tmp_path, 30)
    state = tmp_path / "state"
    port = free_port()
    manager = spawn_workqueue(
        "run", source, "--suffix", ".txt", "--recursive", "--settle", "0", "--state-dir", state,
        "--group", "^([^/]+)/", "--limit", "api=1", "--parallelism", "3",
        "--metrics-port", port, "--", worker,
    )  # fmt: skip
    try:
        wait_until(lambda: len(read_marks(marks)) == 1, timeout=60)

        def view():
            done = workqueue("status", "--state-dir", state, "--json")
            return json.loads(done.stdout) if done.returncode == 0 else {}

        wait_until(lambda: view().get("groups"), timeout=60)
        body = view()
        assert body["groups"]["api"] == {
            "waiting": 2, "running": 1, "limit": 1, "rate": None, "weight": 1.0,
            "held": "group api at its limit 1/1",
        }  # fmt: skip
        waiting = [i for i in body["items"] if i["state"] == "pending"]
        assert {i["group"] for i in waiting} == {"api"}
        assert all(i["reason"] == "waiting: group api at its limit 1/1" for i in waiting)
        jsonschema.validate(body, SCHEMA)
        text = workqueue("status", "--state-dir", state).stdout
        assert "  api: 1 running, 2 waiting (limit 1); held: group api at its limit 1/1" in text
        # what docs/tenants.md shows of it
        (_, grouped), (_, shown_json) = shown_session("tenants.md", "workqueue status")
        assert grouped in text and json.loads(shown_json) == body["groups"]
        metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        for line in ['workqueue_group_running{group="api"} 1.0',
                     'workqueue_group_waiting{group="api"} 2.0',
                     'workqueue_group_held{group="api"} 1.0',
                     'workqueue_group_limit{group="api"} 1.0',
                     'workqueue_group_started_total{group="api"} 1.0']:  # fmt: skip
            assert line in metrics.splitlines(), line
        page = requests.get(f"http://127.0.0.1:{port}/", timeout=10).text  # the dashboard
        assert '<section id="groups">' in page and "group api at its limit 1/1" in page
        assert "<th>group</th>" in page  # the waiting items' group column
        assert len(read_marks(marks)) == 1  # the workers' word: still only the one
    finally:
        manager.kill()
        manager.wait()


def test_bad_tenancy_flags_are_one_line_and_exit_2(tmp_path):
    cases = {
        ("--group", "(["): "argument --group: not a regular expression",
        ("--group", "^[a-z]+"): "argument --group: wants a capture group",
        ("--limit", "acme"): "argument --limit: wants GLOB=N",
        ("--rate", "acme=5/fortnight"): "argument --rate: not a period",
        ("--weight", "acme=0"): "argument --weight: wants a number > 0",
        ("--weight", "acme=2"): "--weight divides fair shares: give --fair with it",
    }
    for flags, message in cases.items():
        done = workqueue("run", tmp_path, *flags, "--", "true")
        assert done.returncode == 2, (flags, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) <= 2, done.stderr  # usage + the one line


def test_a_limit_of_zero_holds_a_group_until_scale_frees_it(tmp_path):
    source = folders(tmp_path, api=6, web=2)
    worker, marks = marking_worker(tmp_path, 0.3)
    state = tmp_path / "state"
    manager = spawn_workqueue(
        "run", source, "--suffix", ".txt", "--recursive", "--settle", "0", "--state-dir", state,
        "--group", "^([^/]+)/", "--limit", "api=0", "--parallelism", "4", "--wait-for", "10m",
        "--", worker,
    )  # fmt: skip
    try:

        def groups():
            done = workqueue("status", "--state-dir", state, "--json")
            return json.loads(done.stdout).get("groups", {}) if done.returncode == 0 else {}

        wait_until(
            lambda: groups().get("api", {}).get("waiting") == 6 and not groups().get("web"),
            timeout=60,
        )  # fmt: skip  (web ran, api held)
        assert groups()["api"]["held"] == "group api is held (its limit is 0)"
        assert {group_of(n) for _, _, n in read_marks(marks)} == {"web"}
        done = workqueue("scale", "--state-dir", state, "--limit", "api=2")
        assert done.returncode == 0, done.stderr
        assert "group limits api=2 (none asked before)" in done.stdout
        [(_, shown)] = shown_session("tenants.md", "workqueue scale")  # as docs/tenants.md
        assert done.stdout.replace(str(state), ".workqueue") == shown
        _, err = manager.communicate(timeout=120)
        assert manager.returncode == 0, err
        # while only the held group was left, the run said why it waited (once), not nothing
        assert err.count("held by a limit of 0 (api)") == 1, err
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.wait()
    found = read_marks(marks)
    assert most_at_once(found, group_of)["api"] == 2
    assert sum(e == "end" and group_of(n) == "api" for e, _, n in found) == 6


def test_groups_from_the_sources_data_a_redis_hash_in_process_and_over_http(
    tmp_path, redis_store, ambassador_server
):
    r, key, data = redis_store.client(), unique("set"), unique("hash")
    names = [f"job-{i}" for i in range(8)]
    r.sadd(key, *names)
    r.hset(data, mapping={n: json.dumps({"group": "acme" if i < 6 else "other"})
                          for i, n in enumerate(names)})  # fmt: skip
    url = f"{redis_store.url}?set={key}&data={data}"
    tenant = {n: "acme" if i < 6 else "other" for i, n in enumerate(names)}
    # in process (`workqueue run`)
    worker, marks = marking_worker(tmp_path, 0.3)
    done = workqueue("run", url, "--state-dir", tmp_path / "state", "--parallelism", "6",
                     "--limit", "acme=2", "--", worker, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert most_at_once(read_marks(marks), tenant.get) == {"acme": 2, "other": 2}
    # over HTTP (the ambassador's full view: data.group), by a manager with no --group
    server = ambassador_server(url)
    there = tmp_path / "http"
    there.mkdir()
    worker, marks = marking_worker(there, 0.3)
    done = workqueue("manager", "--source", server.url, "--once", "--state-dir",
                     there / "state", "--parallelism", "6", "--limit", "acme=2",
                     "--worker-cmd", worker, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert most_at_once(read_marks(marks), tenant.get) == {"acme": 2, "other": 2}
