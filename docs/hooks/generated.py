"""MkDocs hook: the reference pages' generated parts, made from the code at every build.

A page says where with a marker line, replaced by the generated Markdown:

    <!-- generated: commands -->       every `workqueue` command and flag, from the parser
    <!-- generated: options -->        every run option and each place it is set, from its
                                       declaration (src/.../manager/runtime/run_options.py)
    <!-- generated: status-schema -->  docs/status.schema.json (`workqueue status --json`)
    <!-- generated: openapi -->        the items API's OpenAPI document
                                       (src/kube_workqueue/ambassador/openapi.json)

So the reference cannot drift from what the code accepts: a flag added to a command is on the
page the next time the site is built (`make test` builds it with --strict).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- generated: {} -->"


def on_page_markdown(markdown: str, page, config, files) -> str:
    for name, make in (("commands", commands), ("options", options),
                       ("status-schema", status_schema), ("openapi", openapi)):  # fmt: skip
        marker = MARKER.format(name)
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _flag_row(action: argparse.Action) -> str | None:
    if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
        return None
    if action.option_strings:
        metavar = action.metavar or (action.dest.upper() if action.nargs != 0 else "")
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        flags = ", ".join(f"`{f}{' ' + metavar if metavar else ''}`" for f in action.option_strings)
    else:
        flags = f"`{action.metavar or action.dest}`"
    default = action.default
    shown = "" if default in (None, False, [], argparse.SUPPRESS) else f"`{default}`"
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        choices = ", ".join(f"`{c}`" for c in action.choices)
        help_text = f"{action.help or ''} (one of {choices})"
    else:
        help_text = action.help or ""
    help_text = help_text.replace("%(default)s", str(default)).replace("%%", "%")
    return f"| {_cell(flags)} | {_cell(shown)} | {_cell(help_text)} |"


def commands() -> str:
    from kube_workqueue.manager.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name in sorted(sub.choices):
        command = sub.choices[name]
        out.append(f"## `workqueue {name}`\n")
        if command.description:
            out.append(" ".join(command.description.split()) + "\n")
        usage = command.format_usage().removeprefix("usage: ").strip()
        out.append(f"```text\n{usage}\n```\n")
        rows = [r for r in (_flag_row(a) for a in command._actions) if r]
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if rows:
            out.append("| argument | default | what it does |\n|---|---|---|")
            out.append("\n".join(rows) + "\n")
        for action in nested:
            for verb, verb_parser in sorted(action.choices.items()):
                out.append(f"### `workqueue {name} {verb}`\n")
                if verb_parser.description:
                    out.append(" ".join(verb_parser.description.split()) + "\n")
                usage = verb_parser.format_usage().removeprefix("usage: ").strip()
                out.append(f"```text\n{usage}\n```\n")
    return "\n".join(out)


def options() -> str:
    from kube_workqueue.manager.cli.environment import variable
    from kube_workqueue.manager.durations import human
    from kube_workqueue.manager.runtime import run_options

    out = ["| flag | environment | chart value | WorkQueue field | default | what it does |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for row in run_options.RUN_OPTIONS:
        default = row.default
        if row.kind in (run_options.DURATION, run_options.SECONDS) and default is not None:
            default = human(default)
        shown = "" if default in (None, False, []) else f"`{default}`"
        metavar = "" if row.switch else f" {row.kind.metavar}"
        cells = [f"`{row.flag}{metavar}`", f"`{variable(row.flag)}`",
                 f"`{row.chart}`" if row.chart else "", f"`spec.{row.crd}`" if row.crd else "",
                 shown, row.help.replace("%%", "%")]  # fmt: skip
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    out += ["", "The Kubernetes backend's options a chart value or a WorkQueue field sets too "
            "(`manager.declared.option(chart=..., crd=...)`):", "",
            "| flag | chart value | WorkQueue field | what it does |",
            "|---|---|---|---|"]  # fmt: skip
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.declared import flags

    for field in flags(KubeOptions):
        places = field.metadata.get("places") or {}
        if not places:
            continue
        chart, crd = places.get("chart", ("",))[0], places.get("crd", ("",))[0]
        cells = [f"`{field.metadata['flag']}`", f"`{chart}`" if chart else "",
                 f"`spec.{crd}`" if crd else "", field.metadata["help"]]  # fmt: skip
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out) + "\n"


def status_schema() -> str:
    schema = (ROOT / "docs" / "status.schema.json").read_text()
    return f"```json\n{schema.strip()}\n```\n"


def openapi() -> str:
    served = ROOT / "src" / "kube_workqueue" / "ambassador" / "openapi.json"
    document = json.loads(served.read_text())
    out = []
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            summary = operation.get("summary") or operation.get("description") or ""
            out.append(f"- `{method.upper()} {path}`: {_cell(summary)}")
    listing = "\n".join(out)
    body = json.dumps(document, indent=2, ensure_ascii=False)
    return f"{listing}\n\nThe whole document:\n\n```json\n{body}\n```\n"
