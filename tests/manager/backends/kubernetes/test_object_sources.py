"""The cloud object stores through the chart and the Kubernetes backend: the chart's ambassador
command line, as rendered for `source.type: gcs` and `azure`, run for real against the store's
emulator (its client pointed there by its own standard setting), and the Kubernetes manager on
the API-server stand-in running one Job per object - each once, and after a restart of both,
only what is new."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.e2e.conftest import workqueue
from tests.support.buckets import AZURE_ACCOUNT
from tests.support.servers import free_port

from .test_log_sources import start_charted_ambassador


def chart_values(kind: str, bucket: str) -> dict:
    if kind == "gcs":
        return {"source": {"type": "gcs", "gcs": {"bucket": bucket, "prefix": "in/",
                                                  "pollIntervalSeconds": 0.5}}}  # fmt: skip
    # (the Secret's connection string is this process's environment, as envFrom would give it)
    azure = {"account": AZURE_ACCOUNT, "container": bucket, "prefix": "in/",
             "pollIntervalSeconds": 0.5, "credentialsSecret": "azurite"}  # fmt: skip
    return {"source": {"type": "azure", "azure": azure}}


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_the_charted_bucket_source_runs_each_object_once_on_the_cluster(
    kind, request, monkeypatch, cluster, marker_worker
):
    store = request.getfixturevalue("gcs_emulator" if kind == "gcs" else "azurite")
    for key, value in store.env.items():
        monkeypatch.setenv(key, value)
    bucket = store.bucket("in/clip-0.mp4", "in/clip 1.mp4", "in/clip-2.mp4", "in/notes.txt")
    values = chart_values(kind, bucket)
    for attempt in range(2):
        port = free_port()
        args = cluster.args(f"http://127.0.0.1:{port}", marker_worker, "--once",
                            "--parallelism", "2")  # fmt: skip
        ambassador = start_charted_ambassador(values, port)
        try:
            done = workqueue(*args, timeout=180)
            assert done.returncode == 0, done.stderr
        finally:
            ambassador.terminate()
            ambassador.wait(30)
        if attempt == 0:
            assert "3 items: 3 succeeded" in done.stdout, done.stdout
            store.put(bucket, "in/clip-3.mp4", b"new")  # while no ambassador runs
            store.delete(bucket, "in/clip-0.mp4")  # gone from the bucket: nothing to run
    assert Counter(marker_worker.started()) == Counter(
        ["clip-0.mp4", "clip 1.mp4", "clip-2.mp4", "clip-3.mp4"]
    )
