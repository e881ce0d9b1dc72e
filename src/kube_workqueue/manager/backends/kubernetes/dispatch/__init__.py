"""Running the work: a Job (or an Indexed Job) per unit, and settling what ended.

    backend.py   `KubernetesBackend`: the Job, its ConfigMap, cancels and retries
    outcome.py   the wait for a Job's recorded outcome, and what the record says of it
    batches.py   `--batch-size`: up to that many items dispatched as one Indexed Job
    adopted.py   one-item Jobs found running at start, taken over like this manager's own
    adopted_batches.py  the members of batches found unrecorded at start, awaited to their record
    orphans.py   what a crash between a Job and its ConfigMap leaves, and its cleaning
    settler.py   the controller that settles finished Jobs (record, finalizer, history)

The top layer of the backend's parts; only the set-up and the queue commands sit above it.
"""
