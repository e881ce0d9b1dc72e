"""The installed layout: the repository's top-level packages go under one parent, `kube_workqueue`
(a namespace package), so the wheel claims no top-level name another distribution uses (there are
published distributions called `manager` and `workqueue`). The checkout keeps its layout; the
mapping below is the only place that knows both. Everything else is in pyproject.toml.

Folders without an `__init__.py` (the dashboard's `static/`) are listed as packages too, so the
configuration names every folder Python could import and setuptools has nothing to guess; their
files ship through pyproject's package-data.
"""

from setuptools import find_namespace_packages, setup

PARENT = "kube_workqueue"
PARTS = ("manager", "ambassador", "safelog", "workers")

setup(
    packages=[
        f"{PARENT}.{name}"
        for name in find_namespace_packages(
            include=[f"{p}{s}" for p in PARTS for s in ("", ".*")], exclude=["*.__pycache__"]
        )
    ],
    package_dir={f"{PARENT}.{part}": part for part in PARTS},
)
