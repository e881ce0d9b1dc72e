"""/metrics under several gunicorn workers merges their multiprocess files: a file a worker has
made and not yet sized (it is empty for a moment, or for good when the worker was killed then)
must not fail the whole merge (prometheus/client_python#1199)."""

from __future__ import annotations

import os
import subprocess
import sys

from kube_workqueue.ambassador.metrics import merged_metrics

WRITE = (
    "from prometheus_client import Counter\n"
    "Counter('ambassador_test_things', 'things', ['kind']).labels('a').inc(3)\n"
)


def test_an_empty_metrics_file_is_left_out_and_the_others_are_merged(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):  # two workers' files
        subprocess.run([sys.executable, "-c", WRITE], env=env, check=True, timeout=60)
    assert len(list(tmp_path.glob("counter_*.db"))) == 2
    (tmp_path / "counter_4194304.db").touch()  # made, not sized: its worker was killed then
    text = merged_metrics(str(tmp_path)).decode()
    assert 'ambassador_test_things_total{kind="a"} 6.0' in text


def test_no_files_is_no_figures(tmp_path):
    assert "ambassador_test_things" not in merged_metrics(str(tmp_path)).decode()
