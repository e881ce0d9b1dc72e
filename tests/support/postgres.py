"""A real PostgreSQL server for tests: the distribution's `postgresql` package, a cluster made
by `initdb` in a temporary folder and started by `pg_ctl` on a free loopback port.

PostgreSQL refuses to run as root: when the tests run as root, the server's programs run as
the `postgres` user (which the package creates) through `runuser`, in a folder that user owns.
Each test gets a database of its own (`PostgresServer.database()`), so tests share one server
per test process and never see each other's queues. `stop()`/`start()` take the server down
and up again on the same port and folder - what an outage test needs.

A server made with `stepped_clock=True` runs under libfaketime (Debian's `faketime` package):
its wall clock is the real one plus the offset `step_clock(seconds)` last set (a step, read at
every call) - its monotonic clock stays real. `role(name)` makes a login role that is
not a superuser (a connection limit binds it: a superuser's is never enforced).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid

from .servers import free_port, wait_until


def _binaries() -> str:
    """The folder of the server's programs (Debian puts them under /usr/lib/postgresql)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL's server is not installed (make test installs it)")
    return os.path.dirname(os.path.realpath(initdb))


def libfaketime() -> str | None:
    """libfaketime's library (Debian's `faketime` package), or None when it is missing."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    return found[-1] if found else None


class PostgresServer:
    def __init__(self, *, stepped_clock: bool = False) -> None:
        self.bin = _binaries()
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        self.folder = tempfile.mkdtemp(prefix="wq-pg-")
        self.data = os.path.join(self.folder, "data")
        self.clock_file = os.path.join(self.folder, "clock") if stepped_clock else None
        if self.clock_file is not None:
            self.step_clock(0)
        if self.as_root:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
        self._run("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync",
                  "-E", "UTF8")  # fmt: skip
        self.start(first=True)

    def _run(self, program: str, *args: str) -> None:
        argv = [os.path.join(self.bin, program), *args]
        if self.clock_file is not None and program == "pg_ctl":
            library = libfaketime()
            if library is None:
                raise RuntimeError("libfaketime is not installed (make test installs faketime)")
            argv = ["env", f"LD_PRELOAD={library}", f"FAKETIME_TIMESTAMP_FILE={self.clock_file}",
                    "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", *argv]  # fmt: skip
        if self.as_root:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, cwd=self.folder, timeout=120)

    def start(self, *, first: bool = False) -> None:
        """Start the server and wait until it answers. A port taken between `free_port()` and
        the server's bind (another test process's server or listener can win it) costs the
        first start a new port; a restart keeps its port (clients hold its URL) and tries
        again. Any other failure is raised with the end of the server's log, which says why."""
        log = os.path.join(self.folder, "log")
        for attempt in range(5):
            written = os.path.getsize(log) if os.path.exists(log) else 0
            options = (
                f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            try:
                self._run("pg_ctl", "-D", self.data, "-l", log,
                          "-o", options, "-w", "-t", "60", "start")  # fmt: skip
            except subprocess.CalledProcessError as failed:
                told = self._log_since(log, written)
                if self._running():  # slow to answer under load, but up: wait for it below
                    break
                if "could not bind" in told or "already in use" in told:
                    if first:
                        self.port = free_port()
                    else:
                        time.sleep(0.5 * (attempt + 1))  # a back-off between binds, not a wait
                    continue
                raise RuntimeError(
                    f"PostgreSQL did not start on port {self.port}: "
                    f"{failed.stderr.decode(errors='replace').strip()} / log: {told[-2000:]}"
                ) from None
            break
        else:
            raise RuntimeError(f"PostgreSQL found no free port to bind (last {self.port})")
        wait_until(self._answers, timeout=90)

    @staticmethod
    def _log_since(log: str, offset: int) -> str:
        try:
            with open(log, errors="replace") as f:
                f.seek(offset)
                return f.read()
        except OSError:
            return ""

    def _running(self) -> bool:
        try:
            self._run("pg_ctl", "-D", self.data, "status")
        except subprocess.CalledProcessError:
            return False
        return True

    def stop(self, mode: str = "fast") -> None:
        """Take the server down (`immediate`: as a crash would)."""
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")

    def _answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def step_clock(self, seconds: float) -> None:
        """The server's wall clock from now on: the real one plus `seconds`."""
        with open(self.clock_file + ".new", "w") as f:
            f.write(f"{seconds:+g}s\n")
        os.chmod(self.clock_file + ".new", 0o644)
        os.replace(self.clock_file + ".new", self.clock_file)

    def role(self, name: str, database_url: str) -> str:
        """A login role `name` that is not a superuser, owning the database of
        `database_url`; that database's URL as `name`."""
        import psycopg

        database = database_url.rsplit("/", 1)[1]
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{name}" LOGIN')
            conn.execute(f'ALTER DATABASE "{database}" OWNER TO "{name}"')
        return f"postgresql://{name}@127.0.0.1:{self.port}/{database}"

    def password_role(self, name: str, password: str) -> None:
        """A login role `name` whose connections must give `password` (scram-sha-256)."""
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'")
            hba = conn.execute("SHOW hba_file").fetchone()[0]
            with open(hba) as f:
                rules = f.read()
            with open(hba, "w") as f:
                f.write(f"host all {name} 127.0.0.1/32 scram-sha-256\n{rules}")
            conn.execute("SELECT pg_reload_conf()")

    def role_database(self, name: str) -> str:
        """A new empty database owned by the role `name`; its URL as `name`."""
        import psycopg

        database = f"wq_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}" OWNER "{name}"')
        return f"postgresql://{name}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"wq_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.SubprocessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
