"""The cluster connection: the one module that imports the `kubernetes` client, and the cache.

    api.py      `KubeApi`: every API call goes through it (paging, retries, conflicts, errors)
    routes.py   where a call goes: a verb on a kind as an HTTP method, path, headers, query
    answers.py  what an answer means: `KubeError` and its reason, `KubeUnavailable`
    cache.py    `ClusterCache`: one list + watch of the queue's Jobs, pods or ConfigMaps

The bottom layer of the backend with `manifests/`: it imports nothing else of it.
"""
