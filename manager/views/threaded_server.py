"""A WSGI app served by waitress from a thread of this process, and stopped promptly.

The manager serves two things from its own threads: its stats endpoint (`--metrics-port`) and,
for `workqueue run`, the ambassador of the folder it runs. Gunicorn cannot run inside another
program (it forks and takes over signals); waitress is a production WSGI server that lives in
threads and keeps connections alive.

Stopping: waitress's loop runs until its socket map is empty. Closing the listener, every open
(keep-alive) connection and the trigger from the loop's own thread - a thunk run when the
trigger is pulled - wakes the loop at once; closing them from another thread would leave it
asleep in select() for up to a second (its loop timeout).
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

    @classmethod
    def serve(cls, app, host: str, port: int, *, threads: int, name: str) -> ThreadedServer:
        """Bind and start serving `app`; raises OSError when the address cannot be bound."""
        from waitress import create_server

        return cls(create_server(app, host=host, port=port, threads=threads, ident=name), name=name)

    def stop(self) -> None:
        server = self._server

        def close_all() -> None:
            for dispatcher in list(server._map.values()):
                dispatcher.close()

        server.trigger.pull_trigger(close_all)
        self.thread.join(timeout=5)
        if self.thread.is_alive():  # the loop did not run the thunk: close from here
            close_all()
        server.task_dispatcher.shutdown()
        self.thread.join(timeout=5)
