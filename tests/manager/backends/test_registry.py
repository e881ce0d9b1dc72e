"""The backend registry: every named backend has the same face, and loading one for its flags
does not import the Kubernetes client."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from manager import backends
from manager.declared import flags


@pytest.mark.parametrize("name", backends.NAMES)
def test_every_backend_has_the_face(name):
    backend = backends.load(name)
    for attribute in ("setup", "status", "retry"):
        assert callable(getattr(backend, attribute))
    for options in (backend.Options, backend.Queue):
        assert dataclasses.is_dataclass(options) and flags(options)
    queue_flags = {f.metadata["flag"] for f in flags(backend.Queue)}
    assert queue_flags <= {f.metadata["flag"] for f in flags(backend.Options)}


def test_the_default_is_local_and_both_are_offered():
    assert backends.DEFAULT == "local" and set(backends.NAMES) == {"local", "kubernetes"}


def test_the_kubernetes_face_does_not_import_the_client():
    code = (
        "import sys; from manager import backends; backends.load('kubernetes').Options; "
        "print('kubernetes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
