"""A WSGI app served by waitress from a thread of this process, and stopped promptly.

The manager serves two things from its own threads: its stats endpoint (`--metrics-port`) and,
for `workqueue run`, the ambassador of the folder it runs. Gunicorn cannot run inside another
program (it forks and takes over signals); waitress is a production WSGI server that lives in
threads and keeps connections alive.

Stopping: waitress's loop runs until its socket map is empty. Closing the listener, every open
(keep-alive) connection and the trigger from the loop's own thread - a thunk run when the
trigger is pulled - wakes the loop at once; closing them from another thread would leave it
asleep in select() for up to a second (its loop timeout). The trigger (and the listener, whose
close closes it) go last, and only once the write that pulled it has returned: waitress pulls
it too (after a response), so the loop may run the thunk between the thunk's queueing and the
pull's write - and a pipe closed under that write would be a write to a closed, or worse a
reused, descriptor (seen once in CI as EBADF). For the same reason the request threads are
ended first: a thread answering a request pulls the trigger once its response is ready. `stop`
is idempotent.
"""

from __future__ import annotations

import threading


class ThreadedServer:
    def __init__(self, server, *, name: str) -> None:
        """Serve a waitress server (made by `waitress.create_server`) from a new thread."""
        self._server = server
        self.port = int(server.effective_port)
        self.thread = threading.Thread(target=server.run, name=name, daemon=True)
        self.thread.start()
        self._stopping = threading.Lock()
        self._stopped = False

    @classmethod
    def serve(cls, app, host: str, port: int, *, threads: int, name: str) -> ThreadedServer:
        """Bind and start serving `app`; raises OSError when the address cannot be bound."""
        from waitress import create_server

        return cls(create_server(app, host=host, port=port, threads=threads, ident=name), name=name)

    def stop(self) -> None:
        with self._stopping:
            if self._stopped:
                return
            self._stopped = True
        server = self._server
        # the request threads first: one still answering pulls the trigger when it is done,
        # and must not find it closed (EBADF, and waitress's traceback in the log)
        server.task_dispatcher.shutdown()
        pulled = threading.Event()  # the pull's write has returned: the pipe may be closed

        def close_all() -> None:
            last = (server, server.trigger)  # closing the listener closes the trigger too
            for dispatcher in list(server._map.values()):
                if dispatcher not in last:
                    dispatcher.close()
            pulled.wait(timeout=5)
            for dispatcher in last:
                dispatcher.close()

        try:
            server.trigger.pull_trigger(close_all)
        finally:
            pulled.set()
        self.thread.join(timeout=5)
        if self.thread.is_alive():  # the loop did not run the thunk: close from here
            close_all()
            self.thread.join(timeout=5)
