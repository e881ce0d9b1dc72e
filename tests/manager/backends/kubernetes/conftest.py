"""The Kubernetes backend's tests run against the API-server stand-in (`tests.support.cluster`)
and, end to end, with the e2e fixtures (videos, a marker worker, ffmpeg)."""

from tests.e2e.conftest import ffmpeg_env, marker_worker, sample_videos  # noqa: F401  (fixtures)
from tests.support.cluster import apiserver, cluster, kube  # noqa: F401  (fixtures)

# The items API served in the test's process: the subject here is the Kubernetes backend,
# which reads it over real HTTP as it would a real one (`tests.support.in_process_ambassador`).
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401
