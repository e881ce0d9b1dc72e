"""The backend registry: every named backend has the same face, and loading one for its flags
does not import the Kubernetes client."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from kube_workqueue.manager import backends
from kube_workqueue.manager.declared import flags

FACE = [
    name
    for name, value in vars(backends.BackendPackage).items()
    if callable(value) and not name.startswith("_")
]


@pytest.mark.parametrize("name", backends.NAMES)
def test_every_backend_has_the_face(name):
    backend = backends.load(name)
    assert {"setup", "queue_ops", "measured_record"} <= set(FACE)
    for attribute in FACE:  # every function of the face the registry declares
        assert callable(getattr(backend, attribute)), attribute
    for options in (backend.Options, backend.Queue):
        assert dataclasses.is_dataclass(options) and flags(options)
    queue_flags = {f.metadata["flag"] for f in flags(backend.Queue)}
    assert queue_flags <= {f.metadata["flag"] for f in flags(backend.Options)}


def test_the_default_is_a_backend_and_every_backend_is_offered_by_every_command():
    from kube_workqueue.manager.cli.main import build_parser, subcommand_parser

    assert backends.DEFAULT in backends.NAMES
    parser = build_parser()
    for command in ("manager", "status", "retry", "pause", "resume", "stability", "plan"):
        (choice,) = [a for a in subcommand_parser(parser, command)._actions
                     if "--backend" in a.option_strings]  # fmt: skip
        assert set(choice.choices) == set(backends.NAMES) and choice.default == backends.DEFAULT


def test_the_kubernetes_face_does_not_import_the_client():
    code = (
        "import sys; from kube_workqueue.manager import backends; "
        "backends.load('kubernetes').Options; print('kubernetes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
