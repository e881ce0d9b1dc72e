"""A partial pod spec merged into the one a Job's pod would have (`--pod-spec`, a WorkQueue's
`spec.worker.podTemplate`), as `kubectl patch --type strategic` merges it.

Kubernetes' strategic merge patch knows, for each list of the pod spec, whether it is a set
of elements keyed by one field (containers by `name`, volume mounts by `mountPath`, ports by
`containerPort`, ...) or a value replaced whole; `MERGE_KEYS` holds the pod spec's lists that
have a key (their `x-kubernetes-patch-merge-key` in the API's OpenAPI document). Only merging
is done, none of the patch's directives (`$patch: delete`, `$retainKeys`, ...). Pure data, no
API call: the same patch gives the same pod on every manager. Neither argument is changed;
what the result takes from the patch is a copy.
"""

from __future__ import annotations

import copy
from typing import Any

# The patch merge keys of the pod spec's lists (Kubernetes' strategic merge patch): a list
# field named here merges element by element on that key; any other list is replaced whole.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "env": "name",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
}


def merge(base: Any, patch: Any, field: str | None = None) -> Any:
    """Merge a partial pod spec into one, as `kubectl patch --type strategic` would: dicts
    merge key by key; a list whose field has a merge key (`MERGE_KEYS`: containers by name,
    volumeMounts by mountPath, ports by containerPort, …) merges element by element on it;
    any other value in the patch replaces the base's."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base[key], value, key) if key in base else copy.deepcopy(value)
        return out
    key = MERGE_KEYS.get(field or "")
    if (
        key is not None
        and isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(x, dict) and key in x for x in base + patch)
    ):
        merged = {x[key]: x for x in base}
        order = [x[key] for x in base]
        for x in patch:
            if x[key] in merged:
                merged[x[key]] = merge(merged[x[key]], x)
            else:
                merged[x[key]] = copy.deepcopy(x)
                order.append(x[key])
        return [merged[k] for k in order]
    return copy.deepcopy(patch)
