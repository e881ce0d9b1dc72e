"""The Kubernetes backend: one Job plus one ConfigMap per item, recorded durably in the cluster.

In sub-packages by concern, layered (top imports bottom, never the reverse; pyproject's import
contracts hold it):

    options.py         the typed options (`KubeOptions`, `KubeQueue`), over option_values.py
                       (each flag's words as a typed value, or a one-line refusal)
    parts.py           the set-up of one manager (`setup`)
    queue_commands.py  `status`, `retry`, `pause`, `resume` on the cluster (`KubeQueueOps`)
    fleet.py           the runner on a shared ledger (`--ledger postgresql://…`): claims in
                       the database, Jobs in the cluster, an owner id kept in a ConfigMap
    node_offers.py     offers from the labels of the nodes its Jobs may use, the Jobs pinned
    dispatch/          running the work: the backend, batches, adoption, orphans, the settler
    steering/          pause, the WorkQueue, leadership, stuck pods
    records/           the durable record and the `Ledger` over it
    client/            the API (the one importer of `kubernetes`) and the cache
    manifests/         the objects created, as data, and the flags' validation

This face is what the registry (`manager.backends`) hands the rest of the manager. It is light:
the options import no client, so building the command line's flags costs nothing; the
`kubernetes` client is imported when a queue is set up, asked for its status or retried.
"""

from __future__ import annotations

from ...items import QueueRecord
from ...setup_parts import ManagerSeeds, Parts
from .options import KubeOptions, KubeQueue

Options = KubeOptions
Queue = KubeQueue


def setup(options: KubeOptions, seeds: ManagerSeeds) -> Parts:
    """The seeds' parallelism seeds the queue's WorkQueue when the manager creates it (and sizes
    the connection pool); their `max_attempts` sets a batch's per-index retries."""
    from . import parts

    return parts.setup(options, registry=seeds.registry, parallelism=seeds.parallelism,
                       max_attempts=seeds.max_attempts)  # fmt: skip


def fleet_runner(options: KubeOptions, seeds: ManagerSeeds):
    """The runner alone, when the assembly brings a shared ledger (`manager.fleet.joining`):
    see `fleet.py`."""
    from .fleet import fleet_runner as runner

    return runner(options, seeds)


def queue_ops(queue: KubeQueue):
    """What `status`, `retry`, `pause` and `resume` do to the queue (a context manager)."""
    if queue.ledger:
        from ...fleet.queue_commands import FleetQueueOps

        return FleetQueueOps(queue.ledger)
    from .queue_commands import KubeQueueOps

    return KubeQueueOps(queue)


def measured_record(queue: KubeQueue) -> QueueRecord:
    """What the record and the queue's Jobs give (`status`'s): what `stability`, `simulate`
    and `plan` measure with `--from-state` - service times; a Job's creation is its
    dispatch, not its item's arrival, so it says arrivals are not known."""
    with queue_ops(queue) as ops:
        return ops.status()
