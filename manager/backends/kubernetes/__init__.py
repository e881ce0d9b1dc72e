"""The Kubernetes backend: one Job plus one ConfigMap per item, recorded durably in the cluster.

    api.py         the one module that imports `kubernetes`: every API call goes through it
    objects.py     the manifests (pure data): names, labels, the Job, the ConfigMap
    validation.py  every flag's value checked as the API server would check it
    options.py     the typed options (`KubeOptions`, `KubeQueue`)
    cache.py       `ClusterCache`: one list + watch of the queue's Jobs, pods or ConfigMaps
    record.py      the durable record of outcomes (ConfigMaps), and the manager's facts
    ledger.py      `ClusterLedger`: the `Ledger` port over the Job cache and the record
    backend.py     dispatch: the Job, its ConfigMap, the wait for the recorded outcome
    adopted.py     one-item Jobs found running at start, taken over like this manager's own
    orphans.py     what a crash between a Job and its ConfigMap leaves, and its cleaning
    batches.py     `--batch-size`: up to that many items dispatched as one Indexed Job
    batch_objects.py
                   a batch's manifests: its Indexed Job and its ConfigMap
    batch_record.py
                   each batch's ConfigMap: its claim, then the record of its outcomes
    hash_index.py  64-bit item hashes to where a batch holds them, ~20 bytes an entry
    settler.py     the controller that settles finished Jobs (record, finalizer, history)
    stuck.py       pods that cannot start, failed after --stuck-timeout
    pods.py        why a Job's pod is not running yet, in words
    control.py     pause and resume: the queue's control ConfigMap
    queue_resource.py
                   the queue's `WorkQueue` (kubectl, an HPA and KEDA read and scale it)
    leader.py      one manager per queue on a Lease
    parts.py       the set-up of one manager (`setup`)
    queue_commands.py
                   `status`, `retry`, `pause`, `resume` on the cluster (`KubeQueueOps`)

This face is what the registry (`manager.backends`) hands the rest of the manager. It is light:
the options import no client, so building the command line's flags costs nothing; the
`kubernetes` client is imported when a queue is set up, asked for its status or retried.
"""

from __future__ import annotations

from ...ports import Parts, QueueRecord
from .options import KubeOptions, KubeQueue

Options = KubeOptions
Queue = KubeQueue


def setup(
    options: KubeOptions, *, registry=None, parallelism: int = 1, max_attempts: int = 3
) -> Parts:
    """`parallelism` seeds the queue's WorkQueue when the manager creates it; `max_attempts`
    sets a batch's per-index retries (`--batch-size`)."""
    from . import parts

    return parts.setup(
        options, registry=registry, parallelism=parallelism, max_attempts=max_attempts
    )


def queue_ops(queue: KubeQueue):
    """What `status`, `retry`, `pause` and `resume` do to the queue (a context manager)."""
    from .queue_commands import KubeQueueOps

    return KubeQueueOps(queue)


def measured_record(queue: KubeQueue) -> QueueRecord:
    """What the record and the queue's Jobs give (`status`'s): what `stability`, `simulate`
    and `plan` measure with `--from-state` - service times; a Job's creation is its
    dispatch, not its item's arrival, so it says arrivals are not known."""
    with queue_ops(queue) as ops:
        return ops.status()
