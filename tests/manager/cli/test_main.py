"""The entry point: building the parser is light (the ambassador's multiprocess metrics depend
on prometheus-client not being imported before it sets them up), and every command answers
--help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def choices_of(parser) -> dict:
    """command -> its parser, as `parser` offers them."""
    import argparse

    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def commands() -> list[str]:
    """Every command the parser offers, read from the parser itself: none can be left out."""
    from kube_workqueue.manager.cli import build_parser

    return sorted(choices_of(build_parser()))


def imported_by(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` a fresh interpreter has imported once it has run `code` (its last
    line of output: what `code` prints comes before)."""
    check = (f"import json, sys\n{code}\n"
             f"print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


COMMANDS = commands()


def test_the_commands_are_the_documented_ones():
    assert {"lab", "ambassador", "manager", "run", "status", "retry", "pause", "resume", "scale",
            "ledger", "stability", "simulate", "plan", "completion"} <= set(COMMANDS)  # fmt: skip


def test_building_the_parser_imports_nothing_heavy():
    heavy = (
        "prometheus_client",
        "flask",
        "kubernetes",
        "waitress",
        "requests",
        "kube_workqueue.manager.runtime.runner",
        "kube_workqueue.manager.workqueue",
    )
    code = "from kube_workqueue.manager.cli import build_parser; build_parser()"
    assert imported_by(code, heavy) == []


def test_the_run_command_reads_no_installed_distribution_to_start():
    """`workqueue run` (and any built-in source) never looks at third-party source types:
    importing `importlib.metadata` for them cost every start tens of ms of CPU."""
    code = (
        "from kube_workqueue.manager.cli.main import build_parser; build_parser('run')\n"
        "from kube_workqueue.ambassador.sources.registry import resolve; resolve('/tmp')"
    )
    assert imported_by(code, ("importlib.metadata",)) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    from kube_workqueue.manager.cli import main

    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0


def test_each_command_builds_only_its_modules_parser_the_same_as_the_full_one():
    """A command builds only its own module's parser (`COMMAND_MODULES`): the table names
    every command the full parser has but `completion` (which reads them all), and each
    command's parser, built alone, is the full parser's - the same help, the same defaults."""
    import importlib

    main = importlib.import_module("kube_workqueue.manager.cli.main")
    assert set(main.COMMAND_MODULES) | {"completion"} == set(COMMANDS)

    def defaults(parser):
        return [(a.dest, a.default, a.option_strings) for a in parser._actions]

    full = choices_of(main.build_parser())
    for name, module in main.COMMAND_MODULES.items():
        alone = choices_of(main.build_parser(name))
        assert set(alone) == {n for n, m in main.COMMAND_MODULES.items() if m == module}
        assert alone[name].format_help() == full[name].format_help(), name
        assert defaults(alone[name]) == defaults(full[name]), name
    assert set(choices_of(main.build_parser("completion"))) == set(COMMANDS)
    assert set(choices_of(main.build_parser("no-such-command"))) == set(COMMANDS)


def test_a_command_imports_no_other_commands_module():
    """`workqueue status` does not import the ambassador's server, the run command or the lab."""
    others = (
        "kube_workqueue.ambassador.server",
        "kube_workqueue.manager.cli.run_cmd",
        "kube_workqueue.manager.cli.lab_cmd",
        "kube_workqueue.manager.cli.operator_cmd",
    )
    code = (
        "from kube_workqueue.manager.cli import main\n"
        "try:\n    main(['status', '--help'])\nexcept SystemExit:\n    pass"
    )
    assert imported_by(code, others) == []
