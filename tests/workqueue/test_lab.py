"""The lab runs as a real CLI command and its counters add up."""

from __future__ import annotations

import io

from kube_workqueue.manager.cli import main
from kube_workqueue.manager.views.lab import LabConfig, run_lab


def test_lab_counters_are_consistent():
    out = io.StringIO()
    r = run_lab(LabConfig(rate=5000, keys=5, duration=1.0, workers=3, work_ms=2, seed=7), out)
    assert r["enqueued"] >= 4000
    # every generator add reached the queue; re-adds come only from rate-limited retries
    assert r["enqueued"] <= r["adds_total"] <= r["enqueued"] + r["rate_limited"]
    assert r["dedup_noop"] + r["rwp_marked"] <= r["adds_total"]
    assert r["processed"] > 0
    assert abs(r["adds_absorbed"] - (r["dedup_noop"] + r["rwp_marked"]) / r["adds_total"]) < 1e-9
    final = [line for line in out.getvalue().splitlines() if "adds-absorbed=" in line]
    assert final and f"enqueued={r['enqueued']:,}" in final[0]


def test_slow_mode_shows_the_redelivery_trio(capsys):
    assert (
        main(
            [
                "lab",
                "--slow",
                "--duration",
                "1.5",
                "--keys",
                "1",
                "--rate",
                "20",
                "--fail-rate",
                "0",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    for tag in (
        "[ENQUEUE]",
        "[REQUEUE-WHILE-PROCESSING]",
        "[DEDUP]",
        "[REDELIVERY]",
        "Get seq=",
        "Done seq=",
    ):
        assert tag in text, tag


def test_bad_flag_is_one_line_and_exit_2(capsys):
    try:
        main(["lab", "--rate", "-3"])
    except SystemExit as exc:
        assert exc.code == 2
    err = capsys.readouterr().err
    assert "must be > 0" in err and "Traceback" not in err
