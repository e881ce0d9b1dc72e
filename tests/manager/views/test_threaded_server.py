"""ThreadedServer: a waitress server in a thread of this process, stopped promptly and safely."""

from __future__ import annotations

import time

import requests

from kube_workqueue.manager.views.threaded_server import ThreadedServer


def _hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


def test_it_serves_then_stops_at_once_and_a_second_stop_is_harmless():
    server = ThreadedServer.serve(_hello, "127.0.0.1", 0, threads=2, name="test-serve")
    with requests.Session() as session:  # a keep-alive connection the stop must close
        assert session.get(f"http://127.0.0.1:{server.port}/", timeout=5).text == "hello"
        server.stop()
    assert not server.thread.is_alive()
    server.stop()  # nothing left to close: no error


def test_the_loop_running_the_stop_before_its_own_pull_writes_closes_nothing_under_it():
    """waitress pulls the trigger itself (after a response): its loop may run the stop's thunk
    before the stop's own write. That write must still find the pipe open."""
    server = ThreadedServer.serve(_hello, "127.0.0.1", 0, threads=2, name="test-race")
    trigger = server._server.trigger
    write = trigger._physical_pull

    def pulled_by_waitress_first():
        write()  # a pull of waitress's own: the loop wakes and runs the queued thunk now
        time.sleep(0.2)  # ... before the stop's write below
        write()  # the stop's own write: EBADF (or a reused descriptor) if the pipe were closed

    trigger._physical_pull = pulled_by_waitress_first
    server.stop()  # raised OSError: [Errno 9] Bad file descriptor before the fix
    assert not server.thread.is_alive()
