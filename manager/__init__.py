"""The generic work-queue manager.

It turns a source's list of item names into exactly one unit of work per item. Its heart is
`manager.workqueue`, a dedup queue with client-go semantics; around it sit the source client,
the reconciler, the backends (local processes, Kubernetes Jobs) and the scaling math.
"""
