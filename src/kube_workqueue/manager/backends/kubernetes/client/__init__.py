"""The cluster connection: the one module that imports the `kubernetes` client, and the cache.

    api.py     `KubeApi`: every API call goes through it (paging, retries, conflicts, errors)
    cache.py   `ClusterCache`: one list + watch of the queue's Jobs, pods or ConfigMaps

The bottom layer of the backend with `manifests/`: it imports nothing else of it.
"""
