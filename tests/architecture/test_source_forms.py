"""The sources a URL may name are listed in one place, the registry's lines
(`ambassador.sources.registry.BUILT_IN`): the commands' help and the docs' table of sources say
the same forms, so a scheme added there and nowhere else still shows everywhere - and one added
to the docs alone fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from kube_workqueue.ambassador.sources.registry import BUILT_IN, forms, source_type

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sources.md"


def help_of(command: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kube_workqueue.manager.cli", command, "--help"],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return " ".join(done.stdout.split())  # argparse wraps lines


def test_every_registered_form_is_in_both_commands_help():
    for command in ("ambassador", "run"):
        shown = help_of(command)
        for entry in BUILT_IN:
            assert " ".join(entry.form.split()) in shown, (command, entry.form)


def test_the_docs_table_lists_each_registered_url_and_no_other():
    rows = [line for line in DOCS.read_text().splitlines() if line.startswith("| ")]
    first_cells = [row.split(" | ")[0] for row in rows]
    listed = {span for cell in first_cells for span in re.findall(r"`([a-z0-9]+://[^`]+)`", cell)}
    # each type's URL as the registry writes it (a folder's: its file:// form)
    registered = {entry.form.removeprefix("a folder, ") for entry in BUILT_IN}
    assert listed == registered


def test_a_url_picks_its_type_by_scheme_and_query():
    assert source_type("redis", "set=k").kind == "redis"
    assert source_type("rediss", "stream=k&name=f").kind == "redis-stream"
    assert source_type("redis-stream").kind == "redis-stream"  # a configuration's kind
    assert source_type("redis").kind == "redis"
    assert forms(third_party=False).count("://") == len(BUILT_IN)
