"""The running manager: what turns a source's listing into units of work, one per item.

    runner.py        the Manager: wires the parts below, runs until stopped or `--once`
    intake.py        from a listing to the line (new names, changed versions, returns)
    dispatcher.py    a capacity slot first, then the head of the line: the line's order kept
    reconciler.py    one item: begin (fetch, record the start), finish (run, record)
    cancellation.py  every cancel of an item that left the source, in one place
    fault_hold.py    a record that cannot be written: hold, say so, carry on when it can
    poller.py        polling or watching the source; removals.py proves what left it
    capacity.py      how many units of work may run at once; autoscaler.py moves the limit

It speaks only to the ports (`manager.ports`): never to a source adapter or the ambassador.
"""
