"""The Kubernetes backend: one Job plus one ConfigMap per item, recorded durably in the cluster.

    api.py      the one module that imports `kubernetes`: every API call goes through it
    objects.py  the manifests (pure data): names, labels, the Job, the ConfigMap
    cache.py    one list + watch of the queue's Jobs (an informer)
    record.py   the durable record of outcomes (ConfigMaps), and the ledger view over it
    leader.py   one manager per queue on a Lease
    pods.py     why a Job's pod is not running yet, in words
    backend.py  dispatch and completion
    options.py  the typed options (`KubeOptions`, `KubeQueue`)
    assembly.py the set-up for one manager, and `status` / `retry`

This face is what the registry (`manager.backends`) hands the rest of the manager. It is light:
the options import no client, so building the command line's flags costs nothing; the
`kubernetes` client is imported when a queue is set up, asked for its status or retried.
"""

from __future__ import annotations

from ...ports import Parts, QueueRecord
from .options import KubeOptions, KubeQueue

Options = KubeOptions
Queue = KubeQueue


def setup(options: KubeOptions, *, registry=None) -> Parts:
    from . import parts

    return parts.setup(options, registry=registry)


def status(queue: KubeQueue, *, listed: list[str] | None = None) -> QueueRecord:
    from . import parts

    return parts.status(queue, listed=listed)


def item_detail(queue: KubeQueue, name: str, record: QueueRecord) -> dict:
    from . import parts

    return parts.item_detail(queue, name, record)


def retry(queue: KubeQueue, name: str) -> str:
    from . import parts

    return parts.retry(queue, name)


def retry_many(queue: KubeQueue, *, matching: str | None = None, listed=None) -> list[str]:
    from . import parts

    return parts.retry_many(queue, matching=matching, listed=listed)


def pause(queue: KubeQueue) -> str:
    from . import parts

    return parts.pause(queue)


def resume(queue: KubeQueue) -> str:
    from . import parts

    return parts.resume(queue)
