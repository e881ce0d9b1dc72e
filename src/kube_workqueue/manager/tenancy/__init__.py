"""A queue's tenants: groups of items, and the rules each group runs under.

rules.py   the flags as data (`TenancyOptions`), their parsers, an item's group (`Grouping`)
           and each group's first matching limit, rate and weight (`GroupRules`)
gate.py    `GroupGate`: what each group runs and started; whether it may start another now
line.py    `Grouped`: the line of a queue with tenants - one line per group, the next item from
           the best group the gate lets go (an order of the dedup queue, beside its FIFO and
           priority orders)

The line asks the gate on one manager's queue;
a fleet on a shared ledger counts the same rules in its claims (`manager.fleet.claims`); the
manager holds both together in `manager.runtime.tenants`.
"""
