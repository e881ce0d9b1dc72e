"""What an API answer means: the errors `KubeApi` raises, and the reason each is classified by.

An answer the caller must act on leaves `KubeApi` as a `KubeError` carrying its HTTP status and
a Status reason (AlreadyExists, Conflict, NotFound, ...) that callers compare against; an API
server that kept failing through every retry leaves as `KubeUnavailable`. The reason is the
answer's own when Kubernetes defines it, else the one its HTTP code stands for, as client-go's
IsNotFound and IsConflict read it - so a proxy's or an emulator's answer without a Status body
is acted on like the API server's own.

This module reads the client's exceptions by their attributes only (`status`, `reason`, `body`,
`headers`): `api.py` stays the one module that imports the `kubernetes` client.
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """An API answer the caller must act on: `status` (HTTP), `reason` (Status reason)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message


class KubeUnavailable(KubeError):
    """The API server kept failing (429/5xx/timeouts) through every retry."""


def why(exc: Exception) -> str:
    """A short reason for a failed connection: the innermost cause's words."""
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    return text.split(": ", 1)[-1][:160] if text else type(exc).__name__


def retry_after(exc: Any) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# The Status reasons Kubernetes defines (metav1.StatusReason). An answer whose reason is not one
# of them - a proxy's, an aggregated API's, an HTTP reason phrase - is classified by its HTTP
# code instead, as client-go's errors.IsNotFound / IsConflict do.
KNOWN_REASONS = frozenset(
    {
        "Unauthorized", "Forbidden", "NotFound", "AlreadyExists", "Conflict", "Gone",
        "Invalid", "ServerTimeout", "StoreReadError", "Timeout", "TooManyRequests",
        "BadRequest", "MethodNotAllowed", "NotAcceptable", "RequestEntityTooLarge",
        "UnsupportedMediaType", "InternalError", "Expired", "ServiceUnavailable",
    }
)  # fmt: skip
REASON_BY_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def classify(status: int, reason: str | None, verb: str | None = None) -> str:
    """The reason to act on: the answer's own when Kubernetes defines it, else the one its
    HTTP code stands for ("Unknown" when neither says). A 409 to a create that does not say
    why is AlreadyExists: the API conventions give a create no other conflict
    (https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md,
    "HTTP Status codes"); an emulator such as kmock answers it without a reason."""
    if reason in KNOWN_REASONS:
        return reason
    if status == 409 and verb == "create":
        return "AlreadyExists"
    return REASON_BY_CODE.get(status, "Unknown")


def kube_error(exc: Any, verb: str | None = None) -> KubeError:
    try:
        body = json.loads(exc.body or "{}")
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    status = exc.status or 0
    return KubeError(
        status,
        classify(status, body.get("reason"), verb),
        body.get("message") or str(exc.reason),
    )
