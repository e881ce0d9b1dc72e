"""The log sources' shared record rules (`ambassador.sources.log_records`) on their hot path:
a payload's fields decoded once by the JSON scanner, a meta written by the C encoder - each
exactly what `json` itself reads and writes, whatever a record holds."""

from __future__ import annotations

import json

import pytest

from kube_workqueue.ambassador.sources.log_records import LogShape, describe, meta_of
from kube_workqueue.ambassador.sources.log_records import payload_fields as fields


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"file":"a.mp4","width":"320"}', {"file": "a.mp4", "width": "320"}),
        (b'{"n": 1, "ok": true, "l": [1]}\n', {"n": "1", "ok": "true", "l": "[1]"}),
        (b'{"e":"\\u00e9 \\"q\\" \\\\"}  ', {"e": 'é "q" \\'}),
        (b'{"a":"b"} trailing', {"body": '{"a":"b"} trailing'}),
        (b'{"a":"b"', {"body": '{"a":"b"'}),
        (b"{not json", {"body": "{not json"}),
        (b"[1, 2]", {"body": "[1, 2]"}),
        (b"\xff{", {"body.base64": "/3s="}),
        (b"", {}),
    ],
)
def test_a_payload_reads_as_json_reads_it_or_is_its_body(payload, expected):
    assert fields(payload) == expected


@pytest.mark.parametrize("position", ["0001-000000000042", "1700000000000-0", 'odd"one\\'])
def test_a_meta_is_json_of_its_position_and_fields(position):
    record = {"file": 'a "b" \\ é\n', "key": "k", "\u2028": "line separator"}
    meta = meta_of(position, record)
    assert json.loads(meta) == {"p": position, "f": record}
    assert describe("n", meta, "log")["position"] == position


def test_the_every_record_shape_names_each_record_by_its_position():
    shape = LogShape(None)
    records = [("0000-000000000001", {"a": "1"}), ("0000-000000000002", {"a": "2"})]
    found = shape.items(iter(records))
    assert list(found) == ["0000-000000000001", "0000-000000000002"]
    assert json.loads(found["0000-000000000002"]) == {"p": "0000-000000000002", "f": {"a": "2"}}
