"""The OpenAPI 3 document of everything the ambassador serves (`/api/v1/openapi.json`).

The document is a data file, `openapi.json` beside this module (shipped in the package): the
contract schemathesis checks the server against (tests/ambassador/test_schema.py) - every
documented response must conform, and no generated input may cause a 500 - and that a test
holds to the code's own patterns (the `continue` token's is `api.CONTINUE_PATTERN`).
"""

from __future__ import annotations

import functools
import json
from importlib import resources


@functools.lru_cache(maxsize=1)
def _document_text() -> str:
    return resources.files(__package__).joinpath("openapi.json").read_text(encoding="utf-8")


def openapi_document() -> dict:
    """The document, a fresh copy each time (callers may change theirs)."""
    return json.loads(_document_text())
