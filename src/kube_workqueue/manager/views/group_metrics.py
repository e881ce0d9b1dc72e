"""The queue's tenants in the manager's metrics: one series per group this manager has seen.

    workqueue_group_running{group}        items of the group running now (this manager's)
    workqueue_group_waiting{group}        items of the group waiting in this manager's line
                                          (a manager alone on its queue; a fleet's line is the
                                          ledger's, read by `status`)
    workqueue_group_held{group}           1 while the group has items waiting that its limit
                                          or rate holds, else 0
    workqueue_group_started_total{group}  items of the group this manager started
    workqueue_group_limit{group}          the group's limit in force (absent: none)

Read at scrape time from the manager's `Tenants.groups()`, as every other figure is read
(`observe.py`): nothing is copied into gauges that could go stale. The group is a label: a
group's name is checked where it is made (`manager.tenancy.rules.valid_group`: no control
characters, at most 253 characters) and the number of series is the number of groups.
"""

from __future__ import annotations

from collections.abc import Callable


class GroupCollector:
    """A prometheus-client collector of the figures above."""

    def __init__(self, groups: Callable[[], dict[str, dict]]) -> None:
        """`groups()`: per group, its `running`, `waiting`, `started`, `limit` and `held`
        (a reason, or None) - `manager.runtime.tenants.Tenants.groups`."""
        self.groups = groups

    def describe(self):
        return []  # collected lazily

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        found = self.groups()
        families = {
            "running": GaugeMetricFamily("workqueue_group_running",
                                         "Items of the group running now.", labels=["group"]),
            "waiting": GaugeMetricFamily("workqueue_group_waiting",
                                         "Items of the group waiting in this manager's line.",
                                         labels=["group"]),
            "held": GaugeMetricFamily("workqueue_group_held", "1 while the group's limit or "
                                      "rate holds its waiting items.", labels=["group"]),
            "limit": GaugeMetricFamily("workqueue_group_limit", "The group's limit in force.",
                                       labels=["group"]),
        }  # fmt: skip
        started = CounterMetricFamily(
            "workqueue_group_started", "Items of the group this manager started.", labels=["group"]
        )
        for group, facts in found.items():
            families["running"].add_metric([group], facts["running"])
            families["waiting"].add_metric([group], facts["waiting"])
            families["held"].add_metric([group], 1 if facts["held"] else 0)
            if facts["limit"] is not None:
                families["limit"].add_metric([group], facts["limit"])
            started.add_metric([group], facts["started"])
        yield from families.values()
        yield started
