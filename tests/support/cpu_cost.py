"""What each test costs in CPU, and the ten that cost the most, printed at the end of a run.

The suite is CPU-bound on two cores: its wall time is its CPU divided by two, and most of that
CPU is spent in the processes the tests start (managers, ambassadors, servers, commands), not
in pytest. A test's cost here is the CPU its worker process used from the start of its set-up
to the end of its teardown, its own and that of every child it reaped in between
(`getrusage(RUSAGE_SELF)` + `getrusage(RUSAGE_CHILDREN)`): a child is counted when it is
waited for, which every test's teardown does. Not counted: a server that outlives the test
(a session's shared PostgreSQL, Redis, NATS, Tansu - their start is counted to the test that
first asked for them, their idle time to nobody) and a daemon nobody waits for. So the
figures rank tests, they do not sum to the machine's CPU.

Each worker attaches the figure to the test's teardown report (`user_properties`, which
pytest-xdist carries to the controller); the controller, or a run without workers, gathers
them (`pytest_runtest_logreport`) and prints the ten costliest and the total seen
(`pytest_terminal_summary`). Hooks are used from `tests/conftest.py`.
"""

from __future__ import annotations

import resource

import pytest

KEY = "cpu_seconds"
SHOWN = 10
_seen: dict[str, float] = {}


def cpu_seconds() -> float:
    """User and system CPU of this process and of every child it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    item.stash[_began] = cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown" and _began in item.stash:
        report.user_properties.append((KEY, round(cpu_seconds() - item.stash[_began], 3)))


def pytest_runtest_logreport(report) -> None:
    if report.when != "teardown":
        return
    for key, value in report.user_properties:
        if key == KEY:
            _seen[report.nodeid] = value


def pytest_terminal_summary(terminalreporter) -> None:
    if not _seen:
        return
    costliest = sorted(_seen.items(), key=lambda pair: pair[1], reverse=True)[:SHOWN]
    terminalreporter.section(f"the {len(costliest)} tests that cost the most CPU")
    for nodeid, seconds in costliest:
        terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
    total = sum(_seen.values())
    tests = f"{len(_seen)} test{'s' if len(_seen) != 1 else ''}"
    terminalreporter.write_line(f"{total:7.0f} s  in all, {tests} (their workers and the "
                                "children they reaped)")  # fmt: skip


_began = pytest.StashKey[float]()
