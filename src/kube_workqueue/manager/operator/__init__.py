"""One operator, many queues: `workqueue operator` runs every WorkQueue (workqueue.dev/v1beta1)
of the namespaces it watches.

    queue_spec          a WorkQueue's spec as the options one queue runs with, or why not
    ambassador_objects  a queue's own ambassador (Deployment + Service), owned by its WorkQueue
    queue_runner        one queue's manager in this process, isolated and restarted on failure
    conditions          what the operator says on a WorkQueue: conditions and Events
    reconciler          the controller: WorkQueue watches -> a dedup queue -> reconcile(key)

It sits above the assembly (it assembles one manager per queue, as `workqueue manager` does)
and below the command line.
"""
