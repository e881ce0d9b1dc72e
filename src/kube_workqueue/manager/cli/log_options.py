"""`--log-format text|json` and `--log-level` on every long-running command.

The manager (`manager`, `run`) logs through Python's logging; the ambassador's gunicorn is
configured with the same format and level (`safelog.logs`). JSON lines carry time, level,
logger and message, for log pipelines that parse them; text lines are for people. Like every
flag, both may come from the environment (WORKQUEUE_LOG_FORMAT, WORKQUEUE_LOG_LEVEL).
"""

from __future__ import annotations

from kube_workqueue.safelog.logs import LEVELS, logging_config

# command -> its default level: the ambassador is quiet unless something is wrong
LONG_RUNNING = {"manager": "info", "run": "info", "ambassador": "warning", "operator": "info"}


def add_log_options(p, *, default: str) -> None:
    group = p.add_argument_group("logging")
    group.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines for people (text, the default) or one JSON object per line",
    )
    group.add_argument(
        "--log-level",
        choices=LEVELS,
        default=default,
        help=f"least severe level (default {default})",
    )


def setup_logging(log_format: str = "text", level: str = "info") -> None:
    """Every logger to stderr in `log_format` at `level` (set once, before a command runs)."""
    import logging.config  # 20 ms of imports (handlers, sockets): only when logging is set up

    logging.config.dictConfig(logging_config(log_format, level))
