"""The generic work-queue manager.

It turns a source's list of item names into exactly one unit of work per item. Its heart is
`manager.workqueue`, a dedup queue with client-go semantics; around it sit the source client,
the reconciler, the backends (local processes, Kubernetes Jobs) and the scaling math.
"""

DISTRIBUTION = "kube-workqueue"  # the name on the package index; the command stays `workqueue`


def installed_version() -> str:
    """The version pyproject.toml gives (the one place it is written), as installed; "unknown" when
    the code runs uninstalled. Imported lazily by its callers: importlib.metadata costs 25 ms."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
