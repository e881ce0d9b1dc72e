"""The docs: the site builds with `mkdocs build --strict` (broken links and anchors fail it),
its reference is generated from the code (every command and flag, the status schema, the
OpenAPI document), the README stays a short page, and every output the docs show of a command
that needs no running system (`stability`, `simulate`, `plan`: seeded, deterministic) is what
the command prints today. (The example's walk-through is checked by `tests/e2e/test_thumbnailer`,
the ambassador session of docs/sources.md by `tests/e2e/test_docs_ambassador`.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PURE = ("stability", "simulate", "plan")  # commands whose output depends on their flags alone


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_site_builds_strictly_with_every_page(site):
    for page in ("getting-started", "priorities", "tenants", "sources", "operations", "cluster",
                 "performance", "reference/commands", "reference/status",
                 "reference/items-api"):  # fmt: skip
        assert (site / page / "index.html").is_file(), page


def test_the_command_reference_names_every_command_and_flag(site):
    from kube_workqueue.manager.cli import build_parser

    html = (site / "reference" / "commands" / "index.html").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        assert f"workqueue {name}" in html, name
        for action in command._actions:
            for flag in action.option_strings:
                if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                    continue
                if flag.startswith("--"):
                    assert flag in html, (name, flag)


def test_the_reference_carries_the_status_schema_and_the_openapi_document(site):
    status = (site / "reference" / "status" / "index.html").read_text()
    assert "eta_seconds" in status and "priority" in status
    api = (site / "reference" / "items-api" / "index.html").read_text()
    assert "/api/v1/items/{name}" in api and "priorities" in api


def test_the_readme_is_a_short_page_that_points_to_the_site():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 300
    assert lines[0] == "# workqueue" and any("make demo" in line for line in lines[:12])
    assert any("make test" in line for line in lines[:12])
    for link in re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)):
        assert (REPO / link).is_file(), link


def shown_outputs() -> list[tuple[str, str, str]]:
    """(page, command line, output shown) of each pure command in the docs' console blocks."""
    found = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        for block in re.findall(r"```console\n(.*?)```", page.read_text(), re.DOTALL):
            entries = re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]
            for entry in entries:
                command, _, output = entry.partition("\n")
                if command.split()[:2] in (["workqueue", p] for p in PURE):
                    found.append((page.name, command, output))
    return found


def run_shown(command: str) -> str:
    """What `command` prints now; a pipe the docs use (`| jq -c '{keys}'`, `| sed -n Np`) is
    applied here, so the check needs neither tool."""
    command, _, pipe = command.partition(" | ")
    words = shlex.split(command)
    done = subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", *words[1:]],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    out = done.stdout
    if pipe.startswith("jq -c"):
        keys = re.findall(r"\w+", shlex.split(pipe)[2])
        body = json.loads(out)
        return json.dumps({k: body[k] for k in keys}, separators=(",", ":")) + "\n"
    if pipe.startswith("sed -n"):
        line = int(re.search(r"(\d+)p", pipe).group(1))
        return out.splitlines()[line - 1] + "\n"
    assert not pipe, f"a pipe this check does not know: {pipe}"
    return out


def _id(value):
    return value if isinstance(value, str) and len(value) < 40 else None


@pytest.mark.parametrize(("page", "command", "shown"), shown_outputs(), ids=_id)
def test_every_shown_output_of_a_pure_command_is_what_it_prints(page, command, shown):
    printed = run_shown(command)
    if "--json" in command and "|" in command:
        assert json.loads(printed) == json.loads(shown), command
    else:
        assert printed.rstrip("\n") == shown.rstrip("\n"), f"{page}: {command}"


def test_the_pure_commands_shown_are_found():
    assert len(shown_outputs()) >= 6
