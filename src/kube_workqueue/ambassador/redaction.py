"""Secrets never printed, where the ambassador once kept it: now `safelog.redaction`, which the
manager imports too (this name stays for imports written before the move)."""

from kube_workqueue.safelog.redaction import (  # noqa: F401
    HIDDEN,
    RedactingFilter,
    redact_text,
    redact_url,
)
