"""The items API served in the test's own process, for tests whose subject is the manager.

A real `workqueue ambassador` is a gunicorn master, two workers and a snapshot publisher:
about 0.75 s of CPU to start and stop (`bench/startup.py`), paid again by every test that only
needs a source to read from - 67 of them in the Kubernetes backend's tests alone, a twentieth
of the suite's CPU. Here the same application serves instead: its configuration made by the
ambassador's own command-line parser and `app_config` from the same flags, `create_app` with
its source running in this process, behind a threaded WSGI server on loopback. The manager
is still a real process reading real HTTP; what is left out is what the ambassador's own tests
are about - gunicorn, the guarded worker, the publisher shared by the workers - and those keep
the real process (`tests.support.servers.Server`).

Caller's duty: `stop()` (the fixture does it), which also stops the source's threads. A test
module or package whose subject is not the ambassador takes the fixture by importing it:
`from tests.support.in_process_ambassador import in_process_ambassador_server` (named as the
process-backed one in `tests/conftest.py`, so the tests read the same either way).
"""

from __future__ import annotations

import argparse
import threading

import pytest
import requests

from kube_workqueue.ambassador.app import create_app
from kube_workqueue.ambassador.server import add_parser, app_config

from .servers import ambassador_flags, ambassadors, wait_until


def _parsed(argv: list[str]) -> argparse.Namespace:
    """`argv` as `workqueue ambassador` parses it (a mistake raises, as the command exits)."""
    parser = argparse.ArgumentParser(prog="workqueue")
    add_parser(parser.add_subparsers(), ValueError)
    return parser.parse_args(["ambassador", *argv])


class InProcessAmbassador:
    """The ambassador's application on 127.0.0.1:`port` (the face of `servers.Server`: `url`,
    `port`, `wait_ready()`, `stop()`), its source given as the command takes it."""

    def __init__(self, root, port: int, extra: tuple[str, ...]) -> None:
        from werkzeug.serving import WSGIRequestHandler, make_server

        config = app_config(_parsed(ambassador_flags(root, port, extra)))
        self.app = create_app(config)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

        class Handler(WSGIRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as gunicorn serves the manager

            def log_request(self, *args, **kwargs) -> None:  # no line a request
                pass

        self.http = make_server("127.0.0.1", port, self.app, threaded=True,
                                request_handler=Handler)  # fmt: skip
        self.http.daemon_threads = True  # a watch stream still open never holds the stop
        self._thread = threading.Thread(target=self.http.serve_forever, name="items-api",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def wait_ready(self, timeout: float = 20) -> None:
        """Until /readyz answers 200 (the source's first listing is in)."""

        def up() -> bool:
            try:
                return requests.get(self.url + "/readyz", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        wait_until(up, timeout=timeout)

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.app.extensions["workqueue.source"].stop()
        self._thread.join(10)


@pytest.fixture(name="ambassador_server")
def in_process_ambassador_server():
    """`ambassador_server(root, *flags, port=None)` as `tests/conftest.py` has it, served here."""
    yield from ambassadors(InProcessAmbassador)
