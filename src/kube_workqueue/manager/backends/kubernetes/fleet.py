"""A Kubernetes manager on a shared ledger (`--ledger postgresql://…`): its cluster is one of
the places a queue's work runs, beside other clusters and machines.

What changes is the ledger only: claims, attempts and outcomes are the database's
(`manager.fleet.ledger.PostgresLedger`); everything that runs work is the cluster's as without
it - one Job per item, its outcome in this cluster's record before its finalizer goes
(`dispatch/`, `records/`), `--leader-elect` for one active manager per installation.

How a Job's liveness reaches the ledger: a claim's owner is the *installation* - this
namespace and queue in this cluster - not a pod: the id is made once and kept in the ConfigMap
`<queue>-shared-ledger`. Whichever manager of the installation runs (a restarted pod, the
standby that won the Lease) renews every claim of that owner while its Jobs run, and adopts the
Jobs it finds running (`dispatch/adopted.py`); their outcomes are written under the same owner.
A claim runs out only when no manager of the installation has renewed it for a whole lease -
the installation is gone, or cut off from the database longer than the lease: make the lease
longer than a manager's restart (the chart sets two minutes).

At start, what the installation held is settled first (`take_back`): a running item whose Job
still runs is adopted; one whose outcome this cluster's record has (its Job finished while no
manager ran) gets that outcome; one with neither never got its Job, and goes back in line.
Claims that never started are let go by `manager.fleet.joining`, for every backend. Batches
(`--batch-size` > 1) are not shared.
"""

from __future__ import annotations

import logging
import secrets

from ...errors import UserError
from ...fleet.joining import FleetRunner
from ...ports import ClaimLost, State
from ...setup_parts import ManagerSeeds
from .client.api import KubeError
from .client.cache import finished
from .dispatch.adopted import running_items
from .manifests import objects as ko

log = logging.getLogger(__name__)
RECORD_WAIT_SECONDS = 60.0  # a Job that finished while no manager ran: its outcome recorded


def owner_id(api, queue: str) -> str:
    """The installation's id in the ledger's claims (see the module docstring)."""
    name = f"{queue}-shared-ledger"
    found = api.find("configmaps", name)
    if found is None:
        made = f"{api.namespace}-{queue}-{secrets.token_hex(4)}"
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {ko.QUEUE_LABEL: queue}},
            "data": {"owner": made},
        }
        try:
            found = api.create("configmaps", body)
        except KubeError as exc:
            if exc.status != 409:  # another manager of the installation made it first
                raise
            found = api.get("configmaps", name)
    return found["data"]["owner"]


def fleet_runner(options, seeds: ManagerSeeds) -> FleetRunner:
    """The cluster's runner on a shared ledger (`manager.fleet.joining.join` opens the
    ledger): Jobs numbered by the ledger's attempts, the installation's owner id, and the start
    hook `take_back`."""
    from . import parts as cluster

    if options.batch_size > 1:
        raise UserError("--batch-size above 1 is not available with a shared --ledger")
    made = cluster.setup(
        options, registry=seeds.registry, parallelism=seeds.parallelism,
        max_attempts=seeds.max_attempts, attempts_from_ledger=True,
    )  # fmt: skip
    backend = made.backend
    try:
        owner = owner_id(backend.api, backend.queue)
    except BaseException:
        made.close()
        raise
    pinned = backend.pod.node_selector or {}  # `node_offers.pin`: what its Jobs are held to
    offers = {key: pinned[key] for key in options.offers_node_labels if key in pinned}
    return FleetRunner(backend, owner, lambda ledger: take_back(ledger, backend), made.close,
                       elector=made.elector, owner_is="this installation",
                       fence=made.fence, offers=offers)  # fmt: skip


def take_back(ledger, backend) -> None:
    """The start hook: settle what the installation held running when its last manager
    stopped (module docstring)."""
    running = running_items(backend.cache)
    for name, state, attempts in ledger.owned():
        if state != State.RUNNING:
            continue  # claimed, never started: let go by `join`
        try:
            _settle_one(ledger, backend, running, name, attempts)
        except ClaimLost:  # other managers took it while none of the installation's ran
            log.info("%s: its claim was taken while no manager of this installation ran", name)


def _settle_one(ledger, backend, running: dict, name: str, attempts: int) -> None:
    """One running item the installation held, settled (see `take_back`)."""
    if name in running and running[name][1] == attempts:
        return  # its Job runs: adopted by the manager, recorded when it ends
    item_hash = ko.item_hash(backend.queue, name)
    if _finished_job(backend, name, attempts):
        backend.cache.wait_for(lambda h=item_hash, a=attempts: _recorded(backend, h, a),
                               timeout=RECORD_WAIT_SECONDS)  # fmt: skip
    entry = backend.record.entry(item_hash)
    if entry is not None and entry.attempts >= attempts and entry.state in (
        State.SUCCEEDED, State.FAILED,
    ):  # fmt: skip
        succeeded = entry.state == State.SUCCEEDED
        ledger.finish(name, succeeded, 0 if succeeded else 1,
                      None if succeeded else "Job failed (while no manager ran)")  # fmt: skip
        log.info("%s: its Job ended while no manager ran: %s", name, entry.state)
    else:
        ledger.requeue(name)
        log.info("%s: no Job was made for it before its manager stopped: back in line", name)


def _finished_job(backend, name: str, attempt: int) -> bool:
    jobs = backend.cache.indexed(ko.item_hash(backend.queue, name))
    return any(finished(job) and ko.job_attempt(job) == attempt for job in jobs)


def _recorded(backend, item_hash: str, attempts: int) -> bool:
    entry = backend.record.entry(item_hash)
    return entry is not None and entry.attempts >= attempts and entry.state != "pending"
