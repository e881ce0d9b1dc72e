"""What a manager is asked to do: its options, as data (`Manager` reads them, never argv).

Each option a person sets is declared once, as a row of `run_options` (its flag, kind,
default, chart value and WorkQueue field): `manager.cli.manager_cmd.manager_options` fills these
fields from the flags, `manager.operator.queue_spec` from a WorkQueue, both through the rows;
tests and the benchmarks build them directly. `source_timeout` is passed by the command that
runs the manager (`workqueue run` polls every 2 s), and `retry_backoff_cap`, `probe_interval`,
`target_utilization` and the follow and status intervals have no flag.

Invariants the CLI keeps and `Manager` relies on: `min_parallelism <= parallelism <=
max_parallelism` (the worker threads are as many as the largest of them: the autoscaler's
room), and `max_attempts >= 1`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..retry import ITEM_BACKOFF_CAP, Backoff, RetryPolicy
from ..tenancy.rules import TenancyOptions


@dataclass
class ManagerOptions:
    parallelism: int = 2
    max_parallelism: int | None = None  # worker threads; >= parallelism (the autoscaler's room)
    max_attempts: int = 3
    poll_interval: float = 10.0
    watch: bool = False
    retry_backoff: float = 1.0  # the first retry's delay; doubled per attempt up to the cap
    retry_backoff_cap: float = ITEM_BACKOFF_CAP  # (--retry-backoff's bound too: `run_options`)
    grace: float = 10.0  # stopping: how long running work may finish before it is ended
    autoscale: bool = False
    min_parallelism: int = 1
    scale_interval: float = 30.0
    scale_down_delay: float = 300.0
    target_utilization: float = 0.9
    window: float = 600.0  # seconds of arrivals and service times the autoscaler looks at
    on_change: str = "ignore"  # "rerun": a finished item whose version changed runs again
    cancel_removed: bool = False  # an item that leaves the source is cancelled (never run/ended)
    # --cancel-removed distrusts sudden emptiness (`removal_guard`): a listing that loses every
    # known item, or more than `mass_removal_fraction` of them and at least
    # `mass_removal_min`, is held for `removal_hold` seconds (None: never held)
    removal_hold: float | None = 300.0
    mass_removal_fraction: float = 0.5
    mass_removal_min: int = 10
    source_timeout: float | None = None  # --once: give up on an unreachable source after this
    # --once: end a run whose items left none may run here (`cannot_finish`) after this long
    wait_for: float = 30.0
    # how often what is asked of the queue (its WorkQueue's spec, a pause) is looked at
    follow_interval: float = 0.5
    # look at what is asked when the ledger says it changed (`asked_changed`), not every
    # follow_interval (`workqueue operator`'s queues: many, mostly at rest)
    follow_on_change: bool = False
    # how often the status is built and handed to the ledger (None: asked.STATUS_SECONDS)
    status_interval: float | None = None
    probe_interval: float = 2.0  # held by a StorageFault: how often writes are tried again
    # --priority GLOB=N, in order: the first that matches an item's name gives its priority
    priorities: list[tuple[str, int]] = field(default_factory=list)
    # --group, --limit, --rate, --fair, --weight: the queue's tenants (`manager.tenancy`)
    tenancy: TenancyOptions = field(default_factory=TenancyOptions)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_attempts, Backoff(self.retry_backoff, self.retry_backoff_cap))
