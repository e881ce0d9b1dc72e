"""The manager's own metrics, beside the queue's client-go ones (`manager.workqueue.metrics`).

Measured figures are read when Prometheus scrapes, from the same sliding window the autoscaler
and `/stats` read (`manager.planning.measure`), so those readers agree and nothing is copied
into gauges that could go stale. A figure that is not known is absent, never a 0 that means
"no data":

    workqueue_parallelism              units of work allowed at once now (always)
    workqueue_service_seconds          mean run time over the window (once something finished)
    workqueue_interarrival_seconds     mean time between new items (once there is a rate; a
                                       burst of items listed together is a backlog, not a rate)
    workqueue_utilization_ratio        service / (parallelism x interarrival) (when both are)
    workqueue_oldest_waiting_seconds   age of the oldest item waiting to start (while one is)
    workqueue_items{state}             items the record holds, by state (`status` counts:
                                       pending, running, succeeded, failed, cancelled)
    workqueue_paused                   1 while the queue is paused (`workqueue pause`), else 0
    workqueue_storage_fault{kind}      1 while the manager holds dispatch because its record
                                       cannot be written (kind: full, read-only, not-writable,
                                       io-error; `manager.faults`), absent otherwise
    workqueue_removals_held            items that left the source at once whose cancels are held
                                       (`--cancel-removed` distrusting a sudden emptiness:
                                       `manager.runtime.removal_guard`); 0 when none are
    workqueue_build_info{version}      1, with the package's version
    workqueue_item_duration_seconds{outcome}
                                       a histogram of run times of units of work that ended,
                                       by outcome (succeeded, failed, cancelled - cut short,
                                       so not a service time): p95 service time graphs

A manager on a shared ledger (`manager.fleet`) adds, labelled with its `manager` id - what
buildkite/agent-stack-k8s#953's reporter had to rebuild from logs:

    workqueue_claims_total{manager}          items this manager claimed
    workqueue_claims_refused_total{manager}  claims that found nothing although the line
                                             said items waited (a rival took them first)
    workqueue_claims_lost_total{manager}     claims taken from it (its lease ran out) before
                                             it could record the item
    workqueue_leases_expired_total{manager}  other managers' claims it returned to the line
    workqueue_claimed_done_total{manager}    outcomes it recorded
    workqueue_claim_seconds{manager,quantile}
                                             a claim's round trip to the database, median
                                             and 99th percentile of the last 10,000
    workqueue_items_unmet{manager,need}      items waiting with a need no live manager's
                                             offers meet (`--needs`; every manager says the
                                             same: alert on the max)

Units and suffixes follow Prometheus' conventions (base units, `_seconds`, `_ratio`, `_info`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import installed_version
from ..planning.measure import Measured

# Batch work runs from seconds to hours: buckets from 100 ms to 4 h.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400)


class ManagerCollector:
    """A prometheus-client collector of the figures above, computed at scrape time."""

    def __init__(
        self,
        measured: Callable[[], Measured],
        parallelism: Callable[[], int],
        oldest_waiting: Callable[[], float | None],
        counts: Callable[[], dict[str, int]] | None = None,
        paused: Callable[[], bool] | None = None,
        fault: Callable[[], str | None] | None = None,
        removals_held: Callable[[], int] | None = None,
    ) -> None:
        self.counts = counts
        self.removals_held = removals_held
        self.paused = paused
        self.fault = fault
        self.measured = measured
        self.parallelism = parallelism
        self.oldest_waiting = oldest_waiting

    def describe(self):
        return []  # collected lazily; nothing to check at registration

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        parallelism = self.parallelism()
        yield GaugeMetricFamily(
            "workqueue_parallelism", "Units of work allowed at once.", value=parallelism
        )
        figures = self.measured()
        service = figures.service_seconds
        interarrival = figures.interarrival_seconds
        if service is not None:
            yield GaugeMetricFamily(
                "workqueue_service_seconds",
                "Mean run time of units of work that ended, over the window.",
                value=service,
            )
        if not math.isinf(interarrival):
            yield GaugeMetricFamily(
                "workqueue_interarrival_seconds",
                "Mean time between new items over the window.",
                value=interarrival,
            )
            if service is not None and parallelism > 0:
                yield GaugeMetricFamily(
                    "workqueue_utilization_ratio",
                    "Measured service / (parallelism x interarrival); above 1 the backlog grows.",
                    value=service / (parallelism * interarrival),
                )
        oldest = self.oldest_waiting()
        if oldest is not None:
            yield GaugeMetricFamily(
                "workqueue_oldest_waiting_seconds",
                "Age of the oldest item waiting to be dispatched.",
                value=oldest,
            )
        if self.counts is not None:
            items = GaugeMetricFamily(
                "workqueue_items", "Items the record holds, by state.", labels=["state"]
            )
            for state, n in self.counts().items():
                items.add_metric([state], n)
            yield items
        if self.paused is not None:
            yield GaugeMetricFamily(
                "workqueue_paused",
                "1 while the queue is paused (workqueue pause): nothing new starts.",
                value=1 if self.paused() else 0,
            )
        kind = self.fault() if self.fault is not None else None
        if kind is not None:
            held = GaugeMetricFamily(
                "workqueue_storage_fault",
                "1 while the record cannot be written (a full disk): nothing new starts.",
                labels=["kind"],
            )
            held.add_metric([kind], 1)
            yield held
        if self.removals_held is not None:
            yield GaugeMetricFamily(
                "workqueue_removals_held",
                "Items that left the source all at once whose cancels are held (see status).",
                value=self.removals_held(),
            )
        info = GaugeMetricFamily(
            "workqueue_build_info", "The workqueue build that runs.", labels=["version"]
        )
        info.add_metric([installed_version()], 1)
        yield info


def item_durations(registry):
    """The histogram of run times by outcome; `.labels(outcome).observe(seconds)`."""
    from prometheus_client import Histogram

    return Histogram(
        "workqueue_item_duration_seconds",
        "Run time of units of work that ended, by outcome.",
        ["outcome"],
        buckets=DURATION_BUCKETS,
        registry=registry,
    )


class ClaimsCollector:
    """The shared ledger's claim counters of one manager (see the module docstring)."""

    NAMES = {
        "claims": ("workqueue_claims", "Items this manager claimed."),
        "refused": ("workqueue_claims_refused", "Claims that found the line taken."),
        "lost": ("workqueue_claims_lost", "Claims lost before the item was recorded."),
        "expired": ("workqueue_leases_expired", "Other managers' run-out claims let go."),
        "done": ("workqueue_claimed_done", "Outcomes this manager recorded."),
    }

    def __init__(
        self,
        counters: Callable[[], dict[str, float]],
        manager: str,
        latencies: Callable[[], list[float]] | None = None,
        unmet: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.counters = counters
        self.manager = manager
        self.latencies = latencies
        self.unmet = unmet

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        counters = self.counters()
        for key, (name, text) in self.NAMES.items():
            family = CounterMetricFamily(name, text, labels=["manager"])
            family.add_metric([self.manager], counters.get(key, 0))
            yield family
        recent = sorted(self.latencies()[-10_000:]) if self.latencies is not None else []
        if recent:
            family = GaugeMetricFamily(
                "workqueue_claim_seconds", "A claim's round trip.", labels=["manager", "quantile"]
            )
            for quantile in (0.5, 0.99):
                at = min(len(recent) - 1, int(quantile * len(recent)))
                family.add_metric([self.manager, str(quantile)], recent[at])
            yield family
        if self.unmet is not None:
            family = GaugeMetricFamily(
                "workqueue_items_unmet",
                "Items waiting for a manager that offers what they need (none live does).",
                labels=["manager", "need"],
            )
            for need, count in sorted(self.unmet().items()):
                family.add_metric([self.manager, need], count)
            yield family
