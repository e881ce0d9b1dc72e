"""The running manager: what turns a source's listing into units of work, one per item.

    runner.py        the Manager: runs its parts until stopped or `--once`
    once_run.py      a `--once` run: its targets, recorded first, followed until settled
    cannot_finish.py  a `--once` run nothing may finish: its causes said, its end after
                     --wait-for
    wiring.py        the one place its parts are built, each after what it is handed
    intake.py        from a listing to the line (new names, changed versions, returns)
    priorities.py    each waiting item's priority (rules, then the source), recorded and placed
    tenants.py       the queue's groups (tenants): its line's order and gate, held by the manager
    dispatcher.py    a capacity slot first, then the head of the line: the line's order kept
    batching.py      the same in batches, for a backend that runs many items as one
    modes.py         alone or one of a fleet: the line (`Line`), what counts against the
                     parallelism, what is let go at the end - chosen once, never branched on
    claims.py        the line when the ledger is shared: claims feed the dispatcher, leases
                     renewed
    others.py        what a --once run on a shared ledger hears of items others ended
    reconciler.py    one item: begin (fetch, record the start), finish (run, record)
    cancellation.py  every cancel of an item that left the source, in one place
    leaving.py       between a proved removal and its cancels: removal_guard.py holds a
                     listing that suddenly lost most of what was known
    adoption.py      work a manager that died left running, awaited by its successor
    asked.py         what is asked of the queue (pause, parallelism), and the reports back
    run_report.py    what a `--once` run did, item by item
    manager_options.py
                     the manager's options, as data
    run_options.py   each option declared once: flag, kind, default, chart value, WorkQueue
                     field - read by the command line, the operator, the chart's tests, docs
    fault_hold.py    a record that cannot be written: hold, say so, carry on when it can
    poller.py        polling or watching the source; removals.py proves what left it
    capacity.py      how many units of work may run at once; autoscaler.py moves the limit

It speaks only to the ports (`manager.ports`): never to a source adapter or the ambassador.
"""
