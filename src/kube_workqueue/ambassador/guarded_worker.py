"""The ambassador's gunicorn worker: gthread, except that a request's head is read by the event
loop - against a deadline and size limits - before a thread is given to it.

Why not gunicorn's own settings. gthread hands a connection to a pool thread as soon as it has
*some* data, and the thread then reads the rest of the head from a blocking socket with no
deadline (`ThreadWorker.handle` -> `next(conn.parser)`; gunicorn 27 defers only a connection
that sent *nothing* within 5 s, holding a thread for those 5 s). A client that sends a request
line and one header and then nothing holds a thread for as long as it likes: measured on
today's main, 2,300 such sockets made lists time out for 45 s. `limit_request_line` bounds a
line but is checked by that same thread, after the bytes arrived (a 4 MB line took 14 s to be
refused with the limit off, and the worker kept the 100 MB it grew to); there is no setting
for a head's read timeout at all. nginx has both (`client_header_timeout`,
`large_client_header_buffers`); so does this worker, without a front to deploy:

    accept ──► the event loop reads the head as it comes (non-blocking, into a buffer)
                 ├─ line longer than --max-request-line, no end yet  → 414 at once, closed
                 ├─ head longer than --max-header-bytes              → 431 at once, closed
                 ├─ no complete head within --head-timeout           → 408, closed
                 └─ complete ──► the parser gets it (`unreader.unread`) ──► a pool thread
                                 serves the request as gthread does (keep-alive too: the
                                 next head on the connection is read the same way)

So a slow or oversized head costs a buffer of at most --max-header-bytes and a socket, never a
thread; nothing larger is ever kept. Threads are made as requests need them and end after 30
idle seconds (`ShrinkingPool`), and the allocator's pages go back after a burst: a burst of
watches leaves no idle threads behind. Refusals are counted in `/metrics`
(`ambassador_refused_total{reason}`). Long-running requests are capped in the app
(`api.py`: watches in total and per client, 429 + Retry-After), which keeps threads back for
lists and item reads - the API server's rule that watches never starve lists.

It subclasses gunicorn 27's `ThreadWorker` (pyproject pins gunicorn to 27.x for that reason).
TLS is not served here (a Service's or an Ingress's job): with `certfile` set, the stock path
runs unchanged.
"""

from __future__ import annotations

import ctypes
import errno
import json
import queue
import selectors
import socket
import threading
import time
from concurrent import futures
from functools import partial

from gunicorn import http
from gunicorn.workers.gthread import TConn, ThreadWorker

from .limits import (
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_MAX_HEAD,
    DEFAULT_MAX_LINE,
    ENV_HEAD_TIMEOUT,
    ENV_MAX_HEAD,
    ENV_MAX_LINE,
)
from .timed_queue import TimedQueue

RECV_BYTES = 16 * 1024
# the Status bodies' reasons, as the app words them (werkzeug's names)
REASONS = {408: "RequestTimeout", 414: "RequestURITooLong", 431: "RequestHeaderFieldsTooLarge"}


def _refusal(status: str, text: str) -> bytes:
    """A whole HTTP answer: the items API's Status body, and the connection closed."""
    code, phrase = status.split(" ", 1)
    reason = REASONS.get(int(code)) or phrase.replace(" ", "")
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "code": int(code), "reason": reason,
                       "message": text}, separators=(",", ":")).encode()  # fmt: skip
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    return head + body


class GuardedWorker(ThreadWorker):
    """gthread with the head read by the event loop (see the module docstring)."""

    def init_process(self):
        import os

        self.head_timeout = float(os.environ.get(ENV_HEAD_TIMEOUT) or DEFAULT_HEAD_TIMEOUT)
        self.max_line = int(os.environ.get(ENV_MAX_LINE) or DEFAULT_MAX_LINE)
        self.max_head = int(os.environ.get(ENV_MAX_HEAD) or DEFAULT_MAX_HEAD)
        # Invariant: every connection whose head is being read is in `heading`, registered
        # with the poller for `_on_head_readable`, with `conn.head` (bytes so far) and
        # `conn.head_deadline`; it holds no thread.
        self.heading: dict[int, TConn] = {}
        from .metrics import refused_counter

        self.refused = refused_counter()
        self._trim = _malloc_trim()
        _few_arenas()
        super().init_process()

    def _give_back_memory(self) -> None:
        """After a burst (connections down to a quarter of their peak), the allocator's free
        pages go back to the system (glibc's malloc_trim, every arena): threads and buffers a
        burst made are freed, but glibc keeps their pages for reuse - 17 MB a worker after
        3,000 watches, measured."""
        load = self.nr_conns + self.tpool.threads
        peak = max(getattr(self, "_peak", 0), load)
        self._peak = peak
        if peak >= 256 and load <= peak // 4 and self._trim is not None:
            self._trim(0)
            self._peak = load

    def get_thread_pool(self):
        """Threads made as requests need them and ended when idle (`ShrinkingPool`)."""
        return ShrinkingPool(self.cfg.threads)

    # -- where connections come from -------------------------------------------------------

    def accept(self, listener):
        if self.cfg.is_ssl:  # (not served here: the stock path)
            return super().accept(listener)
        try:
            client_sock, client_addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = TConn(self.cfg, client_sock, client_addr, listener.getsockname())  # non-blocking
        self._read_head(conn)

    def on_client_socket_readable(self, conn, client):
        """A kept-alive connection has its next request coming: its head is read here too."""
        if self.cfg.is_ssl:
            return super().on_client_socket_readable(conn, client)
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._read_head(conn)

    # -- reading a head ----------------------------------------------------------------------

    def _read_head(self, conn: TConn, already: bytes = b"") -> None:
        conn.head = already
        conn.head_deadline = time.monotonic() + self.head_timeout
        self.heading[id(conn)] = conn
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_head_readable, conn))
        if already:
            self._check(conn)
        else:  # read at once: a client's request mostly comes with its connection
            self._on_head_readable(conn, None)

    def enqueue_req(self, conn):
        """A thread for a connection: at once for a head read here (`_dispatch`); for a
        request gthread found pipelined behind the last one, its head is read here first."""
        if getattr(conn, "head_ready", False) or self.cfg.is_ssl:
            conn.head_ready = False
            return super().enqueue_req(conn)
        already = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
        conn.sock.setblocking(False)
        self._read_head(conn, already)

    def _on_head_readable(self, conn: TConn, _sock) -> None:
        try:
            chunk = conn.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client left
            self._drop(conn)
            return
        conn.head += chunk
        self._check(conn)

    def _check(self, conn: TConn) -> None:
        end = conn.head.find(b"\r\n\r\n")
        if end < 0:
            end = conn.head.find(b"\n\n")
        line_end = conn.head.find(b"\n")
        line = len(conn.head) if line_end < 0 else line_end
        if line > self.max_line:
            self._refuse(conn, "414 URI Too Long", "line_too_long",
                         f"the request line is longer than {self.max_line} bytes")  # fmt: skip
        elif (end < 0 and len(conn.head) > self.max_head) or end > self.max_head:
            self._refuse(conn, "431 Request Header Fields Too Large", "head_too_large",
                         f"the request head is longer than {self.max_head} bytes")  # fmt: skip
        elif end >= 0:
            self._dispatch(conn)

    def _dispatch(self, conn: TConn) -> None:
        """The whole head is here: the parser gets it, a thread serves the request."""
        self._forget(conn)
        head, conn.head = conn.head, b""
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.parser.unreader.unread(head)
        conn.initialized = True
        conn.data_ready = True
        conn.head_ready = True
        conn.sock.setblocking(True)
        self.enqueue_req(conn)

    def _refuse(self, conn: TConn, status: str, reason: str, text: str) -> None:
        self.refused.labels(reason).inc()
        try:
            conn.sock.send(_refusal(status, text))  # non-blocking: best effort, then closed
        except OSError:
            pass
        self._drop(conn)

    def _forget(self, conn: TConn) -> None:
        self.heading.pop(id(conn), None)
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass

    def _drop(self, conn: TConn) -> None:
        self._forget(conn)
        conn.head = b""
        self.nr_conns -= 1
        try:
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()

    def murder_pending(self):
        """Heads not complete by their deadline: 408 and closed (besides gthread's own)."""
        super().murder_pending()
        self._give_back_memory()
        now = time.monotonic()
        for conn in [c for c in self.heading.values() if c.head_deadline <= now]:
            if conn.head:
                why = f"the request head did not arrive within {self.head_timeout:g} s"
                self._refuse(conn, "408 Request Timeout", "head_timeout", why)
            else:  # an idle keep-alive connection, or one that never spoke: just closed
                self._drop(conn)


MALLOC_ARENAS = 2  # glibc's malloc arenas a worker may make (its default: 8 a core)
M_ARENA_MAX = -8  # mallopt's parameter for it (malloc.h)


def _few_arenas() -> None:
    """At most `MALLOC_ARENAS` malloc arenas in this worker, set before its threads start:
    glibc gives each new thread an arena of its own until it has eight a core, and each arena
    keeps pages of its own - the first 60 unread watchers cost 76-85 KB each with glibc's
    default, 58-64 KB with two arenas (measured with 16 KB pages). The threads mostly wait on
    sockets, holding the GIL when they allocate: they gain nothing from more arenas. (The
    same as MALLOC_ARENA_MAX=2, without asking the user to set it.)"""
    mallopt = _glibc("mallopt")
    if mallopt is not None:
        mallopt(M_ARENA_MAX, MALLOC_ARENAS)


def _malloc_trim():
    return _glibc("malloc_trim")


def _glibc(function: str):
    """glibc's `function`, or None where the C library is not glibc. By its soname, as
    `publication.py` loads it: `ctypes.util.find_library` runs `ldconfig -p` to find it - two
    processes started by every worker at its boot."""
    try:
        return getattr(ctypes.CDLL("libc.so.6"), function)
    except (OSError, AttributeError):  # not glibc
        return None


class ShrinkingPool:
    """The worker's threads: made as requests need them, up to `most`, and ended after `idle`
    seconds without work - so a burst of watches does not leave hundreds of idle threads (and
    their stacks) behind for good, as `concurrent.futures.ThreadPoolExecutor`, which never
    shrinks, does. The part of the executor's face gthread uses: `submit`, `shutdown`."""

    def __init__(self, most: int, idle: float = 30.0) -> None:
        self.most = most
        self.idle = idle
        self._work: TimedQueue = TimedQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._waiting = 0  # threads blocked on `_work`, free for the next task
        self._stopped = False

    def submit(self, fn, *args) -> futures.Future:
        future: futures.Future = futures.Future()
        with self._lock:
            if self._stopped:
                raise RuntimeError("the pool is shut down")
            self._work.put((future, fn, args))
            if self._waiting == 0 and self._threads < self.most:
                self._threads += 1
                threading.Thread(target=self._serve, daemon=True,
                                 name=f"request-{self._threads}").start()  # fmt: skip
            else:
                self._waiting -= 1  # one waiting thread takes it
        return future

    def _serve(self) -> None:
        while True:
            try:
                task = self._work.get(timeout=self.idle)
            except queue.Empty:
                with self._lock:
                    if self._work.empty():  # (a task put meanwhile counted on a waiter)
                        self._threads -= 1
                        self._waiting -= 1
                        return
                continue
            if task is None:
                with self._lock:
                    self._threads -= 1
                return
            future, fn, args = task
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:
                    future.set_exception(exc)
            with self._lock:
                self._waiting += 1

    @property
    def threads(self) -> int:
        return self._threads

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._stopped = True
            count = self._threads
        for _ in range(count):
            self._work.put(None)
