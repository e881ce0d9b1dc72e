"""The log configuration, where the ambassador once kept it: now `safelog.logs`, which the
manager imports too (this name stays for imports written before the move)."""

from kube_workqueue.safelog.logs import (  # noqa: F401
    LEVELS,
    TEXT_FORMAT,
    JsonFormatter,
    TextFormatter,
    for_terminals,
    logging_config,
)
