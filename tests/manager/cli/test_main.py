"""The entry point: building the parser is light (the ambassador's multiprocess metrics depend
on prometheus-client not being imported before it sets them up), and every command answers
--help."""

from __future__ import annotations

import subprocess
import sys

import pytest


def commands() -> list[str]:
    """Every command the parser offers, read from the parser itself: none can be left out."""
    import argparse

    from kube_workqueue.manager.cli import build_parser

    parser = build_parser()
    choices = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(choices)


COMMANDS = commands()


def test_the_commands_are_the_documented_ones():
    assert {"lab", "ambassador", "manager", "run", "status", "retry", "pause", "resume", "scale",
            "ledger", "stability", "simulate", "plan", "completion"} <= set(COMMANDS)  # fmt: skip


def test_building_the_parser_imports_nothing_heavy():
    code = (
        "import sys; from kube_workqueue.manager.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('prometheus_client', 'flask', 'kubernetes', 'waitress', "
        "'requests', 'kube_workqueue.manager.runtime.runner', 'kube_workqueue.manager.workqueue') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    from kube_workqueue.manager.cli import main

    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
