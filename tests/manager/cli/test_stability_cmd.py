"""`workqueue stability` as a user runs it: table, JSON, measured mode, plot, bad input."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from kube_workqueue.manager.backends.local.ledger import SqliteLedger


def stability(*args):
    return subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "stability", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_table_reads_the_verdict():
    r = stability("--interarrival", "60s", "--service", "120s", "--parallelism", "3")
    assert r.returncode == 0
    assert "STABLE" in r.stdout and "40.0 s" in r.stdout and "recommended P      3" in r.stdout


def test_json_for_the_quiz():
    r = stability("--interarrival", "60s", "--service", "120s", "--parallelism", "3", "--json")
    body = json.loads(r.stdout)
    assert body["verdict"] == "stable" and body["effective_service_seconds"] == 40
    assert body["recommended_parallelism"] == 3


def test_arrivals_form_and_backlog():
    body = json.loads(
        stability("--arrivals", "1440/day", "--service", "30s", "--backlog", "100", "--json").stdout
    )
    assert body["interarrival_seconds"] == 60 and body["drain_seconds"] == pytest.approx(6000)


@pytest.mark.parametrize(
    "args",
    [
        ("--service", "10s"),
        ("--interarrival", "10s"),
        ("--interarrival", "ten", "--service", "1s"),
        ("--interarrival", "10s", "--service", "1s", "--parallelism", "0"),
        ("--interarrival", "10s", "--service", "1s", "--target-utilization", "1.5"),
        ("--interarrival", "10s", "--arrivals", "1/s", "--service", "1s"),
        ("--from-state", "/nonexistent"),
    ],
)
def test_bad_input_is_one_line_exit_2(args):
    r = stability(*args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def make_ledger(state, arrivals, service):
    with SqliteLedger(str(state)).open() as ledger:
        ledger.see([f"item-{i}" for i in range(len(arrivals))])
        with sqlite3.connect(state / "ledger.sqlite3") as db:
            for i, t in enumerate(arrivals):
                db.execute(
                    "UPDATE items SET first_seen=?, started=?, finished=?, "
                    "state='succeeded' WHERE name=?",
                    (t, t + 1, t + 1 + service[i % len(service)], f"item-{i}"),
                )


def test_measured_from_a_ledger(tmp_path):
    arrivals = [1_000_000 + 10 * i for i in range(50)]
    make_ledger(tmp_path, arrivals, [4, 6])
    r = stability("--from-state", tmp_path, "--parallelism", "1", "--json")
    body = json.loads(r.stdout)
    assert body["interarrival_seconds"] == pytest.approx(10)
    assert body["service_seconds"] == pytest.approx(5)
    assert body["measured"]["cv_interarrival"] == pytest.approx(0)
    assert body["measured"]["cv_service"] == pytest.approx(0.2)
    text = stability("--from-state", tmp_path).stdout
    assert "M/M/c assumes" in text and "interarrival cv 0.00" in text


def test_measured_window_only_counts_recent_items(tmp_path):
    arrivals = [1_000_000 + 100 * i for i in range(20)] + [2_000_000 + 5 * i for i in range(20)]
    make_ledger(tmp_path, arrivals, [1])
    body = json.loads(stability("--from-state", tmp_path, "--window", "10m", "--json").stdout)
    assert body["interarrival_seconds"] == pytest.approx(5)
    assert body["measured"]["arrivals"] == 20


def test_a_burst_is_reported_as_a_backlog(tmp_path):
    make_ledger(tmp_path, [1_000_000.0 + 0.01 * i for i in range(10)], [2])
    body = json.loads(stability("--from-state", tmp_path, "--parallelism", "2", "--json").stdout)
    assert body["measured"]["burst"] is True
    assert body["backlog"] == 10 and body["drain_seconds"] == pytest.approx(10)


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "latency.png"
    r = stability("--interarrival", "60s", "--service", "120s", "--plot", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
