"""Fixtures: a served folder and a Flask test client over a real FilesystemSource."""

from __future__ import annotations

import pytest

from kube_workqueue.ambassador import create_app


@pytest.fixture
def videos(tmp_path):
    root = tmp_path / "videos"
    root.mkdir()
    return root


@pytest.fixture
def make_client():
    apps = []

    def make(root, **config):
        settings = {"ROOT": str(root), "SETTLE": 0, **config}
        app = create_app(settings)
        apps.append(app)
        return app.test_client()

    yield make
    for app in apps:
        app.extensions["workqueue.source"].stop()
