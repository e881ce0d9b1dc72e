"""`make test` ends with the ten tests that cost the most CPU (tests/support/cpu_cost.py): the
suite is CPU-bound, so that list is where a change to its time starts. Checked here on an inner
run of pytest: a test whose child burns CPU is ranked above one that does nothing, with its
child's CPU counted, and the figures reach the controller from a pytest-xdist worker, as in
`make test`."""

from __future__ import annotations

import re
from pathlib import Path

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parents[2]

HOOKS = """
from tests.support.cpu_cost import (  # noqa: F401
    pytest_runtest_logreport, pytest_runtest_makereport, pytest_runtest_setup,
    pytest_terminal_summary,
)
"""
TESTS = """
import subprocess, sys

def test_idle():
    pass

def test_a_child_that_burns():
    subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                    "while time.process_time() - t < 0.5: pass"], check=True)
"""


def test_the_costliest_tests_are_printed_with_their_childrens_cpu(pytester, monkeypatch):
    pytester.makeconftest(HOOKS)
    pytester.makepyfile(test_inner=TESTS)
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the inner conftest imports tests.support
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:kmock", "-n", "1")
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert "the 2 tests that cost the most CPU" in text, text
    ranked = re.findall(r"^\s*([\d.]+) s  (\S+)$", text, re.MULTILINE)
    assert [name.split("::")[1] for _, name in ranked] == ["test_a_child_that_burns", "test_idle"]
    assert float(ranked[0][0]) >= 0.5  # the child's CPU, counted when it was reaped
    assert re.search(r"^\s*\d+ s  in all, 2 tests", text, re.MULTILINE), text
