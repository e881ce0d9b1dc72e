"""The smallest objects the stand-in's tests write - a ConfigMap and a Job in one namespace -
and how they read what it answers: a raw answer's body as JSON, a watch stream's events
(`_preload_content=False` both)."""

from __future__ import annotations

import json
import time

from urllib3.exceptions import ProtocolError

NS = "media"


def cm(name, labels=None, **meta):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}, **meta},
        "data": {"k": "v"},
    }


def job(name, labels=None):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "w", "image": "i:1"}]}
            }
        },
    }


def raw(response) -> dict:
    return json.loads(response.data)


def read_watch(response, count, timeout=5.0):
    """Up to `count` events of a watch stream, for at most `timeout` seconds; a stream cut
    short gives what arrived before."""
    events, deadline = [], time.monotonic() + timeout
    buffer = b""
    while len(events) < count and time.monotonic() < deadline:
        try:
            chunk = response.read1(65536) if hasattr(response, "read1") else response.read(1)
        except ProtocolError:  # the stream was cut: what arrived before still counts
            break
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                events.append(json.loads(line))
    return events
