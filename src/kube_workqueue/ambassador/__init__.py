"""The source ambassador: a small versioned HTTP API listing work items (Burns'
source-ambassador contract, *Designing Distributed Systems*, "Work Queue Systems").

`create_app(config=None)` builds the Flask app; `workqueue ambassador` serves it with gunicorn.
Nothing here imports `manager`. The import of the app is lazy so that the server can prepare
prometheus-client's multiprocess mode before anything imports prometheus-client.
"""

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(name)
