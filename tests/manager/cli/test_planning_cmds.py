"""`workqueue simulate`, `workqueue plan` and `workqueue stability --model/--check` as a user runs
them: figures, JSON keys, plots, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def workqueue(*args):
    return subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_error(r):
    assert r.returncode == 2, r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_simulate_json_uses_the_calculators_names():
    r = workqueue(
        "simulate", "--interarrival", "60s", "--service", "2m", "--parallelism", "3",
        "--items", "20000", "--seed", "1", "--json",
    )  # fmt: skip
    body = json.loads(r.stdout)
    for key in (
        "mean_wait_seconds",
        "p95_wait_seconds",
        "p99_wait_seconds",
        "mean_latency_seconds",
        "utilization",
        "max_backlog",
    ):
        assert isinstance(body[key], int | float)
    lo, hi = body["mean_wait_ci95"]
    assert lo <= body["mean_wait_seconds"] <= hi
    again = json.loads(
        workqueue(
            "simulate", "--interarrival", "60s", "--service", "2m", "--parallelism", "3",
            "--items", "20000", "--seed", "1", "--json",
        ).stdout
    )  # fmt: skip
    assert again == body  # deterministic for a seed


def test_simulate_bursts_with_a_plot(tmp_path):
    out = tmp_path / "backlog.png"
    r = workqueue(
        "simulate", "--burst", "100/10m", "--service", "3s", "--service-dist", "lognormal",
        "--service-cv", "0.4", "--items", "1000", "--plot", out,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "max 99 waiting" in r.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args",
    [
        ("simulate", "--service", "1s"),
        ("simulate", "--interarrival", "1s"),
        ("simulate", "--interarrival", "1s", "--service", "1s", "--service-dist", "lognormal"),
        ("simulate", "--burst", "lots", "--service", "1s"),
        ("simulate", "--interarrival", "1s", "--service", "1s", "--items", "1"),
        ("simulate", "--interarrival", "1s", "--service", "1s", "--parallelism", "10000000"),
        ("simulate", "--interarrival", "1s", "--service", "1s", "--plot", "/nonexistent/p.png"),
        ("plan", "--deadline", "1h"),
        ("plan", "--items", "10", "--deadline", "1h"),
        ("plan", "--items", "10", "--service", "1s", "--deadline", "soon"),
        ("plan", "--items", "10", "--source", "http://x", "--service", "1s", "--deadline", "1h"),
        ("plan", "/nonexistent", "--service", "1s", "--deadline", "1h"),
        ("stability", "--interarrival", "1s", "--service", "1s", "--model", "ggc"),
        ("stability", "--interarrival", "1s", "--service", "1s", "--parallelism", "99999999999"),
        ("stability", "--interarrival", "1s", "--service", "1s", "--plot", "/nonexistent/p.png"),
    ],
)
def test_bad_input_is_one_line_exit_2(args):
    one_line_error(workqueue(*args))


def test_plan_a_folder(tmp_path):
    folder = tmp_path / "videos"
    folder.mkdir()
    for i in range(30):
        (folder / f"clip-{i}.mp4").touch()
    (folder / "notes.txt").touch()
    (folder / ".hidden.mp4").touch()
    r = workqueue(
        "plan", folder, "--service", "10s", "--service-cv", "0", "--deadline", "1m",
        "--cost-per-hour", "2", "--json",
    )  # fmt: skip
    body = json.loads(r.stdout)
    assert body["items"] == 30 and body["recommended_parallelism"] == 5  # 6 rounds of 10 s
    assert body["drain_seconds"] == 60 and body["worker_hours"] == pytest.approx(5 * 60 / 3600)
    assert body["cost"] == pytest.approx(body["worker_hours"] * 2)
    text = workqueue("plan", "--items", "30", "--service", "10s", "--deadline", "2m").stdout
    assert "recommended parallelism" in text and "meets" in text


def test_plan_with_service_times_measured_in_a_ledger(tmp_path):
    from .test_stability_cmd import make_ledger

    make_ledger(tmp_path, [1_000_000 + 10 * i for i in range(20)], [4, 6])
    body = json.loads(
        workqueue(
            "plan", "--items", "100", "--from-state", tmp_path, "--deadline", "10m", "--json"
        ).stdout
    )
    assert body["service_seconds"] == pytest.approx(5) and body["service_cv"] == pytest.approx(0.2)
    assert body["meets_deadline"] and body["recommended_parallelism"] >= 1


def test_stability_says_which_model_and_checks_it():
    r = workqueue(
        "stability", "--interarrival", "60s", "--service", "120s", "--parallelism", "3",
        "--model", "ggc", "--arrival-cv", "1", "--service-cv", "0", "--check",
        "--check-items", "20000", "--json",
    )  # fmt: skip
    body = json.loads(r.stdout)
    assert body["model"] == "ggc" and "asked for" in body["model_reason"]
    mmc = json.loads(
        workqueue(
            "stability", "--interarrival", "60s", "--service", "120s", "--parallelism", "3",
            "--json",
        ).stdout
    )  # fmt: skip
    assert mmc["model"] == "mmc"
    assert body["mean_wait_seconds"] == pytest.approx(mmc["mean_wait_seconds"] / 2)
    check = body["check"]
    assert check["items"] == 20000 and "mean_wait_ci95" in check
    text = workqueue(
        "stability", "--interarrival", "60s", "--service", "120s", "--parallelism", "3", "--check",
        "--check-items", "20000",
    ).stdout  # fmt: skip
    assert "M/M/c (Erlang C): the CVs were not both measured" in text
    assert "check:" in text and "simulated (20,000 items, seed 1)" in text


def test_plan_counts_a_group_limit_as_a_floor_under_every_drain(tmp_path):
    for i in range(40):
        (tmp_path / f"acme-{i}.mp4").write_bytes(b"")
    for i in range(200):
        (tmp_path / f"other-{i}.mp4").write_bytes(b"")
    common = (tmp_path, "--service", "30s", "--service-cv", "0", "--group", "^([a-z]+)-",
              "--json")  # fmt: skip
    free = json.loads(workqueue("plan", *common, "--deadline", "15m").stdout)
    assert free["meets_deadline"] and free["capped_by"] is None
    capped = json.loads(workqueue("plan", *common, "--deadline", "15m", "--limit", "acme=2").stdout)
    # 40 items of 30 s two at a time: 10 minutes at best, whatever the parallelism
    assert capped["capped_by"] == {"group": "acme", "limit": 2, "drain_seconds_at_confidence": 600}
    assert capped["meets_deadline"] and all(d["bound_seconds"] >= 600 for d in capped["drains"])
    short = workqueue("plan", *common[:-1], "--deadline", "9m", "--limit", "acme=2")
    assert short.returncode == 0
    assert "no parallelism meets the deadline at 95% confidence: group acme, capped at 2 at " \
        "once (--limit), takes up to 10.0 min alone" in short.stdout  # fmt: skip
    one_line_error(workqueue("plan", "--items", "5", "--service", "30s", "--deadline", "1h",
                             "--limit", "acme=2"))  # fmt: skip
