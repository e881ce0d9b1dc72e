"""What the Kubernetes backend creates for a batch of items: one Indexed Job and one ConfigMap.

Pure data, as `objects.py` is for one item: every manifest is checked against the official
schemas in the tests, and two managers compute the same names.

A batch is numbered: `<queue>-batch-<seq>`, the ConfigMap and the Job sharing the name. The
number is what makes a batch exactly-once (see `batch_record.py`): the ConfigMap, created
first, is the claim on its members; the Job, named after it, is created only once it exists.

The ConfigMap holds every member's item data under its decimal index ("0", "1", …; each value
exactly what WORK_ITEM_FILE holds for one item in one-Job-per-item mode) and, under `members`,
one JSON line per index: the item's name, its version and the attempt it runs as. Once the
Job's outcome is recorded the item data goes and `record` takes its place (`batch_record`).

The Job (Kubernetes 1.29+: per-index backoff, `FailIndex`; GA in 1.33):

    completionMode: Indexed, completions = parallelism = the batch's size
                             (every member has its slot: none waits inside the Job)
    backoffLimitPerIndex     = --max-attempts - 1: each item retried on its own
    maxFailedIndexes         = the batch's size: any number of members may fail, and the
                               others still run (one bad item never fails its siblings)
    podFailurePolicy         disruptions (DisruptionTarget) ignored; --fail-fast-exit-codes
                             -> FailIndex (that item fails at once, the others run on)
    podReplacementPolicy     Failed: never two pods of one index at once

Each pod sees its own item at the path one-Job-per-item mode uses, WORK_ITEM_FILE =
/var/run/workqueue/item.json: the ConfigMap's key for the pod's index is mounted there with
`subPathExpr: $(JOB_COMPLETION_INDEX)`, the index coming from the downward API (the pod's
`batch.kubernetes.io/job-completion-index` annotation). So no worker changes, and a pod reads
only its own item.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from . import objects as ko
from .pods import INDEX_ANNOTATION

BATCH_LABEL = f"{ko.GROUP}/batch"
ROLE_LABEL = f"{ko.GROUP}/role"
BATCH_SIZE_ANNOTATION = f"{ko.GROUP}/batch-size"
MEMBERS_KEY = "members"
MAX_BATCH = 100_000  # the API's bound on completions with backoffLimitPerIndex
# A ConfigMap may hold 1 MiB (its data and keys); what a batch's data may use of it.
MAX_BATCH_BYTES = 1024 * 1024 - 16 * 1024


@dataclass(frozen=True)
class Member:
    """One item of a batch, at its index."""

    name: str
    version: str | None
    attempt: int
    body: str  # the item's data as WORK_ITEM_FILE holds it (compact JSON)

    @property
    def line(self) -> str:
        return json.dumps([self.name, self.version, self.attempt], ensure_ascii=False)


def member(name: str, data: dict[str, Any], attempt: int) -> Member:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return Member(name, data.get("version"), attempt, body)


def member_bytes(m: Member) -> int:
    """At most what `m` adds to a batch's ConfigMap: its data, its key (an index below
    MAX_BATCH: six digits at most), its line in `members` and the newline after it."""
    return len(m.body.encode("utf-8")) + 6 + len(m.line.encode("utf-8")) + 1


def batch_name(queue: str, seq: int) -> str:
    return f"{queue}-batch-{seq:06d}"


def seq_of(name: str) -> int | None:
    head, sep, tail = name.rpartition("-batch-")
    return int(tail) if sep and tail.isdigit() else None


def batch_labels(queue: str, seq: int) -> dict[str, str]:
    return {**ko.MANAGED_BY, ko.QUEUE_LABEL: queue, BATCH_LABEL: str(seq)}


def batch_selector(queue: str) -> str:
    """Every batch's objects of the queue."""
    return f"{ko.QUEUE_LABEL}={queue},{BATCH_LABEL}"


def parse_members(text: str) -> list[tuple[str, str | None, int]]:
    """The `members` value: (name, version, attempt) per index."""
    out = []
    for line in text.splitlines():
        name, version, attempt = json.loads(line)
        out.append((str(name), version, int(attempt)))
    return out


def config_map(queue: str, namespace: str, seq: int, members: list[Member]) -> dict[str, Any]:
    """The batch's ConfigMap: its claim on `members` and their data. The caller keeps the
    batch within MAX_BATCH_BYTES (`member_bytes`)."""
    data = {str(i): m.body for i, m in enumerate(members)}
    data[MEMBERS_KEY] = "\n".join(m.line for m in members)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": batch_name(queue, seq),
            "namespace": namespace,
            "labels": {**batch_labels(queue, seq), ROLE_LABEL: "batch"},
        },
        "data": data,
    }


def job(
    queue: str,
    namespace: str,
    seq: int,
    size: int,
    pod: ko.PodOptions,
    max_attempts: int,
) -> dict[str, Any]:
    """The batch's Indexed Job of `size` members (see the module docstring)."""
    if not 1 <= size <= MAX_BATCH:
        raise ValueError(f"a batch holds 1 to {MAX_BATCH} items, not {size}")
    name = batch_name(queue, seq)
    one = ko.job(queue, namespace, name, 1, pod)  # the one-item Job's pod, then made a batch's
    spec = one["spec"]
    template = spec["template"]
    template["metadata"]["labels"] = {**pod.standard_labels, **batch_labels(queue, seq)}
    pod_spec = template["spec"]
    pod_spec["volumes"][0] = {"name": "work-item", "configMap": {"name": name}}
    container = pod_spec["containers"][0]
    index_env = {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}},
    }
    container["env"] = [index_env] + [
        e for e in container["env"] if e["name"] != "JOB_COMPLETION_INDEX"
    ]
    container["volumeMounts"][0] = {
        "name": "work-item",
        "mountPath": f"{ko.ITEM_MOUNT_DIR}/{ko.ITEM_FILE_KEY}",
        "subPathExpr": "$(JOB_COMPLETION_INDEX)",
        "readOnly": True,
    }
    spec.pop("backoffLimit", None)  # with backoffLimitPerIndex it counts per index
    spec.update(
        completionMode="Indexed",
        completions=size,
        parallelism=size,
        backoffLimitPerIndex=max(0, max_attempts - 1),
        maxFailedIndexes=size,
    )
    for rule in spec["podFailurePolicy"]["rules"]:
        if rule["action"] == "FailJob":  # a fail-fast exit code fails its item, not the batch
            rule["action"] = "FailIndex"
    meta = one["metadata"]
    meta["name"] = name
    meta["labels"] = {**pod.job_labels, **pod.standard_labels, **batch_labels(queue, seq)}
    if pod.kueue_queue:
        meta["labels"][ko.KUEUE_QUEUE_LABEL] = pod.kueue_queue
    annotations = {
        k: v
        for k, v in meta["annotations"].items()
        if k not in (ko.ITEM_ANNOTATION, ko.ATTEMPT_ANNOTATION, ko.VERSION_ANNOTATION)
    }
    annotations[BATCH_SIZE_ANNOTATION] = str(size)
    meta["annotations"] = annotations
    return copy.deepcopy(one)


def parse_indexes(text: str | None) -> set[int]:
    """A Job status's compressed index list ("0-2,5,7-8") as a set; "" or None is empty."""
    out: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        if sep:
            out.update(range(int(first), int(last) + 1))
        else:
            out.add(int(first))
    return out


def batch_of(obj: dict) -> int | None:
    """The batch number of a batch's Job or ConfigMap (its label), None for anything else."""
    value = (obj["metadata"].get("labels") or {}).get(BATCH_LABEL)
    return int(value) if value is not None and value.isdigit() else None


def batch_size_of(job: dict) -> int:
    annotations = job["metadata"].get("annotations") or {}
    return int(annotations.get(BATCH_SIZE_ANNOTATION) or 0)
