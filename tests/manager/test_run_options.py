"""The run options' declarations (`manager.runtime.run_options`) agree with themselves: a
default a help text names is the declared one, and each row's flag reaches `ManagerOptions`
as its field (the command line builds them from the rows alone)."""

from __future__ import annotations

import re

import pytest

from kube_workqueue.manager.cli import build_parser
from kube_workqueue.manager.cli.manager_cmd import manager_options
from kube_workqueue.manager.runtime.run_options import RUN_OPTIONS, RunOption

NAMED_DEFAULT = re.compile(r"\(default ([^;:)\s]+)[;)]")


@pytest.mark.parametrize("row", [r for r in RUN_OPTIONS if not r.repeat], ids=lambda r: r.flag)
def test_a_default_the_help_names_is_the_declared_one(row: RunOption):
    said = NAMED_DEFAULT.search(row.help)
    if said is None:
        return
    assert row.kind.parse(said.group(1)) == row.default, f"{row.flag}: help says {said[0]}"


@pytest.mark.parametrize("row", [r for r in RUN_OPTIONS if r.field], ids=lambda r: r.flag)
def test_each_flag_reaches_its_field(row: RunOption):
    kind = row.kind
    word = next(str(e) for e in reversed(kind.examples) if e != row.default)
    extra = ["--fair"] if row.flag == "--weight" else []
    if row.flag in ("--min-parallelism", "--max-parallelism"):
        extra = ["--parallelism", "4096"]  # (the bounds follow --parallelism)
    typed = [row.flag] if row.switch else [f"{row.flag}={word}"]
    args = build_parser().parse_args(["manager", "--source", "http://x", *extra, *typed])
    options = manager_options(args)
    into, _, name = row.field.rpartition(".")
    got = getattr(options.tenancy if into == "tenancy" else options, name)
    want = True if row.switch else row.kind.field_value(row.kind.parse(word))
    assert got == ([want] if row.repeat else want), row.flag


@pytest.mark.parametrize("row", [r for r in RUN_OPTIONS if r.field], ids=lambda r: r.flag)
def test_the_options_field_defaults_to_the_declared_default(row: RunOption):
    """`ManagerOptions()` (what tests, benchmarks and the operator start from) means what a
    command line without the flag means."""
    from kube_workqueue.manager.runtime.manager_options import ManagerOptions

    options = ManagerOptions()
    into, _, name = row.field.rpartition(".")
    default = getattr(options.tenancy if into == "tenancy" else options, name)
    assert default == row.kind.field_value(row.default), row.flag


def test_a_first_retry_longer_than_any_retry_waits_is_one_line():
    """`--retry-backoff 100d` was taken, and a run waited five minutes a retry (the cap) with
    nothing said: refused at once, naming the longest wait; and a retry says when it comes."""
    from tests.fleet.test_mistakes import in_process
    from tests.manager.cli.test_user_errors import one_line_exit_2

    done = in_process("run", ".", "--retry-backoff", "100d", "--", "true")
    one_line_exit_2(done, "--retry-backoff", "at most 5m, the longest a retry ever waits")
    from kube_workqueue.manager.runtime.run_options import BY_FLAG

    assert BY_FLAG["--retry-backoff"].kind.parse("5m") == 300.0
