"""What steers a queue from outside its work: pause, the WorkQueue, leadership, stuck pods.

    control.py         pause and resume: the queue's control ConfigMap
    queue_resource.py  the queue's `WorkQueue` (kubectl, an HPA and KEDA read and scale it)
    leader.py          one manager per queue on a Lease
    stuck.py           pods that cannot start, failed after --stuck-timeout

Above `records/`; below `dispatch/`.
"""
