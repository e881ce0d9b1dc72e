"""The chart's tests reuse the Kubernetes fixtures (the stand-in, the kubelet) and the e2e ones."""

from __future__ import annotations

from ..e2e.conftest import marker_worker  # noqa: F401  (fixtures)
from ..kube.conftest import apiserver, cluster  # noqa: F401
