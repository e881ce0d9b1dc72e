"""Log lines as JSON objects, one per line, for log pipelines (`--log-format json`).

Shared by the ambassador's gunicorn (through `logging_config`) and by the manager's commands:
a package of its own (`safelog`), so that neither imports the other for it.
Each line: {"time": ISO 8601 UTC with milliseconds, "level", "logger", "message"}, plus
"exception" with the formatted traceback when one is logged.
"""

from __future__ import annotations

import json
import logging
import time

LEVELS = ("debug", "info", "warning", "error")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def for_terminals(text: str) -> str:
    """`text` with its control and format characters shown escaped (`\x1b`), newlines and tabs
    kept: an item named `esc\x1b[2J…` must not clear a terminal or retitle it (as `ls` and
    `git` escape such names)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


class TextFormatter(logging.Formatter):
    """Lines for people: the message's control characters escaped (`for_terminals`). JSON
    lines keep them exact (JSON escapes them itself)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = for_terminals(record.message)
        return super().formatMessage(record)


def logging_config(log_format: str = "text", level: str = "info") -> dict:
    """A `logging.config.dictConfig` that sends every logger to stderr in `log_format`."""
    formatter = (
        {"()": f"{__name__}.JsonFormatter"}
        if log_format == "json"
        else {"()": f"{__name__}.TextFormatter", "format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"main": formatter},
        # secrets in URLs are hidden in every line, whoever logged it (`redaction.py`)
        "filters": {"redact": {"()": "kube_workqueue.safelog.redaction.RedactingFilter"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "main",
                "filters": ["redact"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            "gunicorn.error": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
            "gunicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
            "werkzeug": {"level": "WARNING"},  # no line per in-process request
            # libraries' INFO is for their authors ("Found credentials in environment
            # variables" on every S3 run): theirs from WARNING up, unless debugging
            **{
                name: {"level": "WARNING" if level.upper() != "DEBUG" else "DEBUG"}
                for name in ("botocore", "boto3", "urllib3", "redis", "kubernetes")
            },
        },
    }
