"""The keeper's protocol (`keeper_protocol.py`): every message the manager and the keeper build
is one of its records with exactly that record's fields (a TypedDict checks nothing at run
time, so this does), and a journal reads back as the keeper wrote it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from kube_workqueue.manager.backends.local import keeper_protocol as wire

LOCAL = Path(wire.__file__).parent


def built_records() -> list[tuple[str, str, set[str]]]:
    """(where, record, the fields given) for each `wire.Record(...)` call in the two sides (the
    keeper in two modules)."""
    found = []
    for name in ("keeper.py", "keeper_shims.py", "kept.py"):
        tree = ast.parse((LOCAL / name).read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "wire"
                    and node.func.attr[:1].isupper()):  # fmt: skip
                given = {k.arg for k in node.keywords}
                found.append((f"{name}:{node.lineno}", node.func.attr, given))
    return found


def test_every_message_built_has_its_records_fields():
    found = built_records()
    assert {record for _, record, _ in found} >= {
        "Config", "Spawn", "Watch", "Signal", "Adopt", "Bye", "Ready", "Ended", "Children",
        "Start", "End",
    }  # fmt: skip
    for where, record, given in found:
        kind = getattr(wire, record)
        assert kind.__required_keys__ <= given <= kind.__required_keys__ | kind.__optional_keys__, (
            where, record, sorted(given))  # fmt: skip
        if "op" in kind.__required_keys__:
            assert kind.__annotations__["op"] is not None


def test_an_end_encoded_once_makes_the_journal_line_and_the_message():
    end = wire.End(id=7, code=0, at=1.5)
    journaled, reported = wire.end_lines(wire.encoded_end(end))
    assert json.loads(journaled) == {"end": end}
    assert json.loads(reported) == {"op": wire.ENDED, "end": end}


def test_a_journal_reads_back_without_what_was_acknowledged_or_torn(tmp_path):
    start = wire.Start(id=1, name="a", attempt=1, pid=10, ticks="5", boot=0.0, began=1.0,
                       status="/s", token="1")  # fmt: skip
    other = {**start, "id": 2, "name": "b"}
    lines = [wire.line({"start": start}), wire.line({"start": other}),
             wire.line({"end": wire.End(id=1, code=0)}), wire.line({"end": wire.End(id=2, code=1)}),
             wire.line({"ack": [2]}), b'{"end": {"id": 3']  # fmt: skip
    journal = tmp_path / "k.journal"
    journal.write_bytes(b"".join(lines))
    starts, ends = wire.read_journal(str(journal))
    assert starts == {1: start} and ends == {1: {"id": 1, "code": 0}}
    assert wire.read_journal(str(tmp_path / "none.journal")) == ({}, {})


def test_a_request_carries_a_name_the_file_system_gave_as_bytes():
    name = b"caf\xe9.mp4".decode("utf-8", "surrogateescape")
    assert b"caf\xe9.mp4" in wire.request_line({"op": wire.SPAWN, "name": name})
