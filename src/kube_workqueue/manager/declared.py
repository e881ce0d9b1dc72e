"""Options declared once, where they are used: typed dataclass fields that say their own flag.

A backend (or any part that takes settings from a person) declares a dataclass whose fields are
made with `option(...)`: the flag, its help, and a `parse` function that turns the word a person
typed into the typed value - or raises `UserError` naming the problem. The command line
(`manager.cli`) reads these declarations to build its flags, and `from_words` builds the
dataclass from what was typed. So the flags of a new backend need no edit outside its package,
nothing below the CLI sees argparse, and every value is checked before anything is called.

    @dataclass(frozen=True)
    class LocalOptions:
        timeout: float | None = option("--timeout", "kill a worker after this long",
                                       parse=durations.parse_duration)

`repeat=True` takes the flag many times (a list of words reaches `parse`, or becomes a list);
`switch=True` is a flag without a value (a bool).

Where else a person sets the option is declared with it, as `manager.runtime.run_options`'s rows
do for the run options: `chart=` (a values path), `crd=` (a WorkQueue spec field), each with
the JSON Schema of the words `parse` takes (`schema=`, or a place's own: `chart_schema=`,
`crd_schema=` where the place holds another form - whole seconds for a duration, a list for
comma-separated codes). `from_spec` reads a WorkQueue's fields through `parse`, and
`tests/charts/test_declared_options.py` holds the chart and the CRD to the declarations.
"""

from __future__ import annotations

import copy
import dataclasses
import shlex
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .errors import UserError

T = TypeVar("T")
_MISSING = dataclasses.MISSING


def option(
    flag: str,
    help: str,
    *,
    default: Any = None,
    parse: Callable[[Any], Any] | None = None,
    repeat: bool = False,
    switch: bool = False,
    metavar: str | None = None,
    hidden: bool = False,
    typed: Callable[[Any], None] | None = None,
    requires: str | None = None,
    once: bool = False,
    chart: str | None = None,
    crd: str | None = None,
    schema: dict | None = None,
    chart_schema: dict | None = None,
    crd_schema: dict | None = None,
) -> Any:
    """A dataclass field that is also a command-line flag (see the module docstring).
    `typed(word)` checks a word typed on the command line - not one from the environment -
    and raises `UserError` for what must not be there (a secret `ps` would show). `requires`:
    the name of a field this flag means nothing without (`--lease` without `--ledger`): given
    alone, it is a `UserError` rather than quietly ignored. `once`: typed twice, it is a
    `UserError` rather than the last one taken (a preference given twice: which was meant?)."""
    meta = {
        "flag": flag,
        "help": help,
        "parse": parse,
        "repeat": repeat,
        "switch": switch,
        "metavar": metavar,
        "hidden": hidden,
        "typed": typed,
        "requires": requires,
        "once": once,
        "places": {
            place: (path, own or schema)
            for place, path, own in (("chart", chart, chart_schema), ("crd", crd, crd_schema))
            if path is not None
        },
    }
    if repeat:
        return dataclasses.field(
            default_factory=lambda: [] if default is None else copy.copy(default), metadata=meta
        )
    if switch:
        return dataclasses.field(default=bool(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def split_words(text: str) -> list[str]:
    """A command or its arguments as one flag's value (`--worker-cmd "CMD ARGS"`), split as a
    shell would split it - and never run by one; an unbalanced quote is a `UserError`."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise UserError(f"cannot split {text!r}: {str(exc).lower()}") from None


def flags(cls: type) -> list[dataclasses.Field]:
    """The fields of `cls` that are flags, in declaration order."""
    return [f for f in dataclasses.fields(cls) if "flag" in f.metadata]


def dest(field: dataclasses.Field) -> str:
    """The attribute name a parser stores the flag's words under (prefixed, so a declared
    field never collides with a command's own arguments)."""
    return f"declared_{field.name}"


def from_words(cls: type[T], words: Mapping[str, Any], **given: Any) -> T:
    """An instance of `cls` from typed words: for each flag field, the words stored under its
    `dest` (None or [] when not typed: the field's default), parsed by its `parse`. `given`
    sets fields directly (already typed). Raises `UserError` for a word that cannot be used,
    naming its flag - or its variable, when `words["environment_sources"]` says it came from
    the environment."""
    values: dict[str, Any] = {}
    # {dest: variable} of the words that came from the environment (`WORKQUEUE_<FLAG>`)
    sources = words.get("environment_sources") or {}
    for field in flags(cls):
        if field.name in given:
            continue
        raw = words.get(dest(field))
        if raw is None or raw == [] or (field.metadata["switch"] and raw is False):
            continue
        needed = field.metadata.get("requires")
        if needed is not None and not words.get(f"declared_{needed}") and needed not in given:
            other = next(f.metadata["flag"] for f in flags(cls) if f.name == needed)
            where = sources.get(dest(field)) or field.metadata["flag"]
            raise UserError(f"{where} goes with {other}: without it, it would be ignored")
        typed = field.metadata.get("typed")
        if typed is not None and dest(field) not in sources:
            typed(raw)  # a UserError: it names the flag and what to do itself
        parse = field.metadata["parse"]
        if parse is None:
            values[field.name] = raw
            continue
        try:
            values[field.name] = parse(raw)
        except (UserError, ValueError) as exc:
            where = sources.get(dest(field)) or field.metadata["flag"]
            raise UserError(f"{where}: {exc}") from None
    return cls(**values, **given)


def placed(cls: type, place: str) -> list[tuple[dataclasses.Field, str, dict]]:
    """(field, path, JSON Schema) of each flag of `cls` set at `place` too ("chart", "crd")."""
    found = []
    for field in flags(cls):
        places = field.metadata.get("places") or {}
        if place in places:
            path, schema = places[place]
            found.append((field, path, schema or {}))
    return found


def word_of(value: Any) -> str:
    """A value as a chart or a WorkQueue holds it, as the flag's word (a list: comma-joined)."""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def spec_value(spec: Mapping[str, Any], dotted: str) -> Any:
    """What a WorkQueue's spec holds at `dotted` (`worker.image`), or None: not set, or set
    empty (`""`), which a WorkQueue field means as not set."""
    value: Any = spec
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return None if value == "" else value


def from_spec(cls: type, spec: Mapping[str, Any]) -> dict[str, Any]:
    """{field name: typed value} of each flag of `cls` whose WorkQueue field `spec` sets, read
    through the flag's `parse`; `UserError` naming the field (`spec.batchSize: ...`)."""
    values: dict[str, Any] = {}
    for field, path, _ in placed(cls, "crd"):
        value = spec_value(spec, path)
        if value is None:
            continue
        parse = field.metadata["parse"]
        try:
            values[field.name] = parse(word_of(value)) if parse else value
        except (UserError, ValueError) as exc:
            raise UserError(f"spec.{path}: {exc}") from None
    return values
