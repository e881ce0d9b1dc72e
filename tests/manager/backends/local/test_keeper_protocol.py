"""The keeper's protocol (`keeper_protocol.py`): every message the manager and the keeper build
is one of its records with exactly that record's fields (a TypedDict checks nothing at run
time, so this does), a journal reads back as the keeper wrote it, and the manager's side reads
the keeper's answer to `adopt` as the answer and the end that comes with it as an end."""

from __future__ import annotations

import ast
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube_workqueue.manager.backends.local import keeper_protocol as wire
from kube_workqueue.manager.backends.local.kept import KeeperLink

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


@contextlib.contextmanager
def keeper_answering(keepers_dir: Path, *messages: dict) -> Iterator[str]:
    """A stand-in keeper `k1` in `keepers_dir` that reads a manager's `adopt` and says
    `messages` in one write, then nothing more until the block ends; yields its id."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(keepers_dir / "k1.sock"))
    listener.listen(1)
    done = threading.Event()

    def answer():
        conn, _ = listener.accept()
        conn.recv(65536)  # the adopt
        conn.sendall(b"".join(wire.line(message) for message in messages))
        done.wait(60)
        conn.close()

    keeper = threading.Thread(target=answer)
    keeper.start()
    try:
        yield "k1"
    finally:
        done.set()
        keeper.join(30)
        listener.close()


def test_an_end_read_with_the_adopt_answer_is_heard_without_another_message(tmp_path):
    """A worker that ends just after the keeper answers `adopt` may arrive in the same read as
    the answer. The link's reader must take it from what was already read, not wait for more
    from a keeper that has nothing more to say (the adopted worker was never heard to end)."""
    running = [{"id": 7, "name": "a", "attempt": 1, "began": 1.0}]
    answer = {"op": wire.CHILDREN, "running": running, "ended": []}
    ended = {"op": wire.ENDED, "end": {"id": 7, "code": 3}}
    with keeper_answering(tmp_path, answer, ended) as keeper_id:
        link, adopted, _ = KeeperLink.adopt(str(tmp_path), keeper_id)
        try:
            assert adopted == running
            assert link.child(7).wait(30) == 3
        finally:
            link.conn.close()


def test_a_keeper_whose_first_word_is_not_its_answer_is_not_adopted(tmp_path):
    """Anything but the answer first is refused as an OSError - the survey asks again (a new
    connection) instead of the manager dying of a KeyError at start, as it once did in CI."""
    ended = {"op": wire.ENDED, "end": {"id": 1, "code": 0}}
    with (keeper_answering(tmp_path, ended) as keeper_id,
          pytest.raises(OSError, match="answered 'ended'")):  # fmt: skip
        KeeperLink.adopt(str(tmp_path), keeper_id)
