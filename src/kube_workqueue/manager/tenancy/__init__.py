"""A queue's tenants: groups of items, and the rules each group runs under.

rules.py   the flags as data (`TenancyOptions`), their parsers, an item's group (`Grouping`)
           and each group's first matching limit, rate and weight (`GroupRules`)
gate.py    `GroupGate`: what each group runs and started; whether it may start another now

The line that asks the gate is `manager.workqueue.grouped.Grouped` (one manager on its queue);
a fleet on a shared ledger counts the same rules in its claims (`manager.fleet.claims`); the
manager holds both together in `manager.runtime.tenants`.
"""
