"""Offers from the nodes a Kubernetes manager's Jobs may use (`--offers-node-label KEY`).

A cluster's facts are on its nodes already: `nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB`,
`topology.kubernetes.io/region=eu-west-1`, `karpenter.sh/capacity-type=spot`. Writing them
again as `--offers` is a second place to keep true. With `--offers-node-label KEY` (repeatable)
the manager reads, at its start, the nodes its worker pods may be scheduled on, and offers
`KEY=VALUE` when every one of them carries that label with that one value.

    may be scheduled on   the node matches the pods' node selector (`--node-selector`), is not
                          cordoned (`spec.unschedulable`), and each of its NoSchedule and
                          NoExecute taints is tolerated by the pods' tolerations (`--toleration`)
    offered               a KEY every such node has with one value; a KEY they disagree on, or
                          that some lack, is not offered (the log line says which and why)
    pinned                an offered KEY=VALUE is added to the pods' node selector: a node
                          that joins later without it never runs this manager's Jobs, so the
                          offer stays true for as long as the manager runs (it is read once,
                          at start: a restart reads the nodes again)

A label already in `--node-selector` is offered as it is: the pods can run nowhere else. An
`--offers` that names the same key with another value is a contradiction, refused in one line
at start. Reading nodes is the one cluster-wide permission this needs (`list` on `nodes`); the
chart grants it, alone, only when its placement's nodeLabels are set.

Caller duty: `pin` once, before the pod options are used for any Job.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping

from ...errors import UserError
from .client.api import KubeError, KubeUnavailable

log = logging.getLogger(__name__)

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")  # what keeps a pod off a node (not Prefer*)


def tolerated(taint: Mapping, tolerations: Iterable[Mapping]) -> bool:
    """Whether a pod with `tolerations` tolerates `taint`, as the scheduler judges it: a
    toleration with an empty key and `Exists` tolerates everything; otherwise the keys match,
    the effect matches (or the toleration gives none), and `Exists`, or `Equal` with the
    taint's value."""
    for given in tolerations:
        operator = given.get("operator") or "Equal"
        key = given.get("key") or ""
        if given.get("effect") and given["effect"] != taint.get("effect"):
            continue
        if not key and operator == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (given.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def usable(node: Mapping, selector: Mapping[str, str], tolerations: Iterable[Mapping]) -> bool:
    """Whether the worker pods may be scheduled on `node` (the module docstring)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    spec = node.get("spec") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    if spec.get("unschedulable"):
        return False
    tolerations = list(tolerations)
    return all(tolerated(taint, tolerations) for taint in spec.get("taints") or ()
               if taint.get("effect") in SCHEDULING_EFFECTS)  # fmt: skip


def facts(nodes: list[Mapping], keys: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(offered KEY -> VALUE, KEY -> why it is not) over the usable `nodes`."""
    offered: dict[str, str] = {}
    not_offered: dict[str, str] = {}
    for key in keys:
        values = [((n.get("metadata") or {}).get("labels") or {}).get(key) for n in nodes]
        found = sorted({v for v in values if v is not None})
        if not nodes:
            not_offered[key] = "no node its Jobs may use"
        elif None in values:
            missing = sum(v is None for v in values)
            not_offered[key] = f"{missing} of the {len(nodes)} nodes its Jobs may use lack it"
        elif len(found) > 1:
            not_offered[key] = f"the nodes its Jobs may use disagree ({', '.join(found)})"
        else:
            offered[key] = found[0]
    return offered, not_offered


def pin(api, pod, keys: list[str], offers: Mapping[str, str]):
    """The pod options with each node-derived offer pinned in their node selector, and the
    offers (KEY -> VALUE): see the module docstring. `offers` are the manager's `--offers`,
    checked against what the nodes say."""
    selector = dict(pod.node_selector or {})
    wanted = [key for key in keys if key not in selector]
    offered = {key: selector[key] for key in keys if key in selector}
    if wanted:
        try:
            nodes, _ = api.list("nodes")
        except KubeUnavailable as exc:  # no answer: the API server, not the rights
            raise UserError(
                f"--offers-node-label: cannot list the cluster's nodes: the API server does "
                f"not answer ({exc.message})"
            ) from None
        except KubeError as exc:
            cause = ("the manager's service account needs list on nodes"
                     if exc.status in (401, 403) else exc.message)  # fmt: skip
            raise UserError(
                f"--offers-node-label: cannot list the cluster's nodes ({exc.status} "
                f"{exc.reason}): {cause}"
            ) from None
        fit = [node for node in nodes if usable(node, selector, pod.tolerations or ())]
        found, missing = facts(fit, wanted)
        offered.update(found)
        for key, why in missing.items():
            log.warning("not offering %s from node labels: %s", key, why)
    for key, value in offered.items():
        if key in offers and offers[key] != value:
            raise UserError(f"--offers {key}={offers[key]}, but the nodes its Jobs may use "
                            f"all have {key}={value}")  # fmt: skip
    if offered:
        log.info("offers from node labels: %s (and its Jobs pinned to them)",
                 ", ".join(f"{k}={v}" for k, v in sorted(offered.items())))  # fmt: skip
    return dataclasses.replace(pod, node_selector={**selector, **offered} or None), offered
