"""The API-server stand-in's own tests: its fixtures come from `tests.support.cluster`."""

from tests.support.cluster import apiserver, cluster, kube  # noqa: F401  (fixtures)
