"""No argument vector makes a command end in a traceback: for every command, hypothesis builds
argument vectors from the parser's own flags with hostile values (NaN, infinities, huge,
negative, empty, unbalanced quotes, unicode, NUL, bad URLs and paths), runs the real entry point
in-process, and requires that it returns or exits - a traceback never reaches the user.

What would start serving or working once every check passed (gunicorn, a manager's loop, the
lab) is replaced by a sentinel, so the property covers the whole path from words to a checked,
typed configuration without running for real.
"""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube_workqueue.manager.cli import build_parser, main

HOSTILE = [
    "nan", "inf", "-inf", "1e400", "99999999999999999999", "-1", "0", "1", "", " ", "-5s",
    "1h30m", "garbage", "'unbalanced", '"', "ü視頻", "a\x00b", "\n", "http://", "http://[::1",
    "ftp://x", "/nonexistent/dir/f.png", "..", "K=V", "=", "a:NoSchedule", "Bad_NS",
]  # fmt: skip


# A valid vector per command, which hostile values then mutate flag by flag: so the property
# reaches the checks that only run once the earlier ones passed.
BASELINE = {
    "lab": ["--duration", "1"],
    "manager": ["--source", "http://127.0.0.1:9", "--worker-cmd", "true", "--once"],
    "run": ["."],
    "stability": ["--interarrival", "60s", "--service", "90s", "--parallelism", "2"],
    "simulate": ["--interarrival", "60s", "--service", "90s", "--items", "1000"],
    "plan": ["--items", "1000", "--service", "30s", "--deadline", "1h"],
}


class Reached(Exception):
    """Every check passed and the command would now serve or work for real."""


@pytest.fixture(autouse=True)
def no_real_work(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)

    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr("kube_workqueue.manager.assembly.assemble", reached)
    monkeypatch.setattr(
        "kube_workqueue.manager.sources.folder.open_source", reached
    )  # `run`, any source
    monkeypatch.setattr("kube_workqueue.manager.views.lab.run_lab", reached)
    monkeypatch.setattr("kube_workqueue.ambassador.server._listen", reached)


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for name, command in sub.choices.items():
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:
            for action_name, action in nested[0].choices.items():
                found[f"{name} {action_name}"] = action
        else:
            found[name] = command
    return found


COMMANDS = commands()


def vectors(command: str):
    parser = COMMANDS[command]
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    positionals = [a for a in parser._actions if not a.option_strings]

    @st.composite
    def build(draw):
        argv = command.split()
        baseline = draw(st.booleans()) and command in BASELINE
        if baseline:
            argv += BASELINE[command]
        else:
            for positional in positionals:
                known = [str(c) for c in positional.choices or ()]
                argv.append(draw(st.sampled_from(HOSTILE + ["."] + known)))
        chosen = (
            draw(st.lists(st.sampled_from(options), max_size=6, unique=True)) if options else []
        )
        for action in chosen:
            flag = action.option_strings[-1]
            if action.nargs == 0:
                argv.append(flag)
            elif action.choices:
                argv += [flag, draw(st.sampled_from([*map(str, action.choices), "nope"]))]
            else:  # given last, a flag's value wins over the baseline's
                argv += [flag, draw(st.sampled_from(HOSTILE))]
        if command == "run" and draw(st.booleans()):
            argv += ["--", draw(st.sampled_from(["true", "/nonexistent", "'x"]))]
        return argv

    return build()


def run_quietly(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as done:
            code = done.code
        except Reached:
            return
    assert isinstance(code, int), (argv, code)
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue())
    if code == 2:
        assert len(err.getvalue().strip().splitlines()) == 1, (argv, err.getvalue())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_flag_combination_ends_in_a_traceback(command):
    @settings(
        max_examples=50,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(vectors(command))
    def check(argv):
        run_quietly(argv)

    check()
