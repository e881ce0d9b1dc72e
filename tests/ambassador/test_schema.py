"""schemathesis against the served OpenAPI document: every documented response conforms, and no
generated input (names, paging tokens, limits, methods) makes the server answer 500."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from kube_workqueue.ambassador import create_app

# made at import (the parametrized cases need the app to be collected), so every process that
# collects this module - each xdist worker, a collect-only run - makes one: each removes its own
_root = Path(tempfile.mkdtemp(prefix="wq-schema-"))
atexit.register(shutil.rmtree, _root, ignore_errors=True)
for _name in ["a.mp4", "b.mp4", "ünï cødé.mp4", "c.MP4"]:
    (_root / _name).write_bytes(b"x")
APP = create_app({"ROOT": str(_root), "SETTLE": 0})

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", APP)
WATCHED: set[str] = set()  # the watch requests already made


@pytest.fixture(scope="module", autouse=True)
def _stop_source():
    yield
    APP.extensions["workqueue.source"].stop()


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_documented_contract(case):
    if case.query and str(case.query.get("watch", "")).lower() in ("true", "1"):
        case.query["timeoutSeconds"] = 1  # a watch is a stream: end it so the call returns
        asked = repr(sorted(case.query.items(), key=str))
        if asked in WATCHED:  # the same stream of the same unchanging folder: checked already
            return
        WATCHED.add(asked)  # (hypothesis repeats one watch request ~20 times: a second each)
    response = case.call()
    assert response.status_code < 500, response.text
    case.validate_response(response)


def test_the_documents_continue_pattern_is_the_one_the_code_checks():
    from kube_workqueue.ambassador.api import CONTINUE_PATTERN
    from kube_workqueue.ambassador.openapi import openapi_document

    params = openapi_document()["paths"]["/api/v1/items"]["get"]["parameters"]
    (token,) = [p for p in params if p["name"] == "continue"]
    assert token["schema"]["pattern"] == CONTINUE_PATTERN
