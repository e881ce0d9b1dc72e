"""Real servers for tests and benchmarks: free loopback ports, waiting for a condition, and a
real `workqueue ambassador` process."""

from __future__ import annotations

import os
import signal
import socket
import time

PORTS_FROM = 10000  # the lowest port a test takes; the kernel's ephemeral range starts above
PORTS_EACH_WORKER = 2000
_next_port: list[int] = []  # this process's next candidate in its own block (see free_port)


def _ephemeral_floor() -> int:
    """Where the kernel starts picking ports for outgoing connections (32768 by default)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port nothing listens on now, for a server a test starts a moment later.

    A port the kernel hands out for `bind(0)` is an *ephemeral* one, and between the moment it is
    released here and the moment the server binds it, any outgoing connection on the machine
    (a test's HTTP request, a client of Redis) may be given it - CI saw "Address already in use"
    that way. So ports come from below the ephemeral range, where the kernel never picks one,
    and each pytest-xdist worker has a block of its own, walked in order, so no two workers and
    no two calls in one worker hand out the same port. Where the range leaves no room for the
    blocks, it falls back to `bind(0)`."""
    import os
    import random

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None
    slots = (_ephemeral_floor() - PORTS_FROM) // PORTS_EACH_WORKER
    if slots < 2:
        return _kernel_port()
    # Outside xdist (a benchmark, one pytest process) the last block, started at random.
    block = index % (slots - 1) if index is not None else slots - 1
    low = PORTS_FROM + block * PORTS_EACH_WORKER
    if not _next_port:
        _next_port.append(random.randrange(PORTS_EACH_WORKER))
    for _ in range(PORTS_EACH_WORKER):
        port = low + _next_port[0] % PORTS_EACH_WORKER
        _next_port[0] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken (or lingering): the next one
                continue
            return port
    return _kernel_port()


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.02, most: float = 0.25):
    """Poll `predicate` until it returns something truthy (for effects of real processes and
    threads); fail after `timeout` seconds. The pause between looks grows from `interval` to
    `most`: a predicate that runs a command (`workqueue status`, a quarter second of CPU) must
    not keep a core of this two-core machine busy while the thing it waits for needs it."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(interval)
        interval = min(most, interval * 1.5)


def holding(port: int, waiting: int) -> bool:
    """A running manager's metrics (on `port`) say it holds: paused, `waiting` items in its
    line - its own word that it has begun and starts nothing."""
    import requests

    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except requests.RequestException:
        return False
    return "workqueue_paused 1.0" in text and f'workqueue_depth{{name="items"}} {waiting}.0' in text


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, ...); one that ended meanwhile has
    none."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as f:
                    children = [int(child) for child in f.read().split()]
            except OSError:
                children = []
            found += children
            todo += children
    return found


def ambassador_flags(root, port: int, extra: tuple[str, ...]) -> list[str]:
    """`workqueue ambassador`'s flags for a test's source: `root` a folder (`--root`, with no
    settling unless `extra` asks for one) or a URL (`--source`), on `port`, then `extra`."""
    flags = ["--source" if "://" in str(root) else "--root", str(root), "--port", str(port)]
    if "--settle" not in extra and "://" not in str(root):
        flags += ["--settle", "0"]
    return [*flags, *extra]


class Server:
    """A real `workqueue ambassador` process on a loopback port."""

    def __init__(self, root, port: int, extra: tuple[str, ...], *, stderr=None,
                 cwd=None, tmpdir=None) -> None:  # fmt: skip
        """`cwd`: a checkout whose code serves instead (a benchmark's peer: peer_code.py);
        `tmpdir`: where its temporary folders go - a test that looks at them (one killed with
        SIGKILL leaves them for the next start to remove) passes one of its own."""
        import subprocess

        from tests.support.peer_code import peer_code

        peer = peer_code(cwd)

        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        args = [*peer.command, "ambassador", *ambassador_flags(root, port, extra)]
        env = peer.env if tmpdir is None else {**peer.env, "TMPDIR": str(tmpdir)}
        self.process = subprocess.Popen(args, stderr=stderr, cwd=peer.cwd,
                                        env=env)  # fmt: skip

    def wait_ready(self, timeout: float = 20) -> None:
        """Until /readyz answers 200 (the source's first listing is in), `timeout` seconds."""
        import requests

        def up():
            if self.process.poll() is not None:
                raise AssertionError(f"ambassador exited with {self.process.returncode}")
            try:
                return requests.get(self.url + "/readyz", timeout=5).status_code == 200
            except requests.RequestException:  # not listening yet, or still loading
                return False

        wait_until(up, timeout=timeout)

    def kill_9(self) -> None:
        """The whole ambassador at once - its publisher and gunicorn's workers, SIGKILL each -
        as a pod's end: nothing tidies up."""
        for pid in [self.process.pid, *descendants(self.process.pid)]:
            os.kill(pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except Exception:
                self.process.kill()
                self.process.wait()


def ambassadors(kind):
    """The body of an `ambassador_server` fixture, for a generator fixture to `yield from`:
    yields `start(root, *flags, port=None)`, which starts a `kind(root, port, flags)` (`Server`,
    or `in_process_ambassador.InProcessAmbassador`) and waits until it is ready; stops every
    one it started after the test."""
    servers = []

    def start(root, *extra: str, port: int | None = None):
        server = kind(root, port or free_port(), extra)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


def metric_sum(port: int, prefix: str) -> float:
    """The sum of every sample of the metrics at 127.0.0.1:`port`/metrics whose line starts with
    `prefix` (0 while nothing answers there yet)."""
    import requests

    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except requests.RequestException:
        return 0.0
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))
