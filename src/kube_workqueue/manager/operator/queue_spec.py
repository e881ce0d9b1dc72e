"""A WorkQueue's spec (workqueue.dev/v1beta1) as the typed options one queue runs with - or the
one reason it cannot run.

`plan(obj, settings)` reads the spec the API server admitted (the CRD's schema and CEL rules
have checked types, ranges and the cross-field rules already) and builds what the chart's
per-queue manager gets from flags: `KubeOptions` (the worker pod, the Jobs, the Lease) and
`ManagerOptions` (parallelism, retries, tenancy, removals). What only the operator can judge -
a source URL of no known kind, a regular expression that does not compile - is a
`SpecProblem(reason, message)`: the queue's `Ready=False` condition and an Event, never an
exception that stops other queues.

Three kinds of source:
  * an items-API URL (http, https): the manager reads it as it is;
  * a source the ambassador serves (s3://, gs://, azblob://, redis://, nats://, kafka://): the
    queue gets its own ambassador Deployment + Service (`ambassador_objects`), whose pod alone
    holds the source's credentials (`source.credentialsSecret` as its environment);
  * a folder on a PersistentVolumeClaim (`source.volume`): the same, with the claim mounted
    read-only in the ambassador and (read-only unless `writable`) in every worker.

Every option is read through its one declaration: the manager's through the rows of
`manager.runtime.run_options` (`run_options.from_spec`), the ambassador's - suffixes,
recursion, settling, an S3 endpoint and region - through `ambassador.source_options`'s.

`Plan.fingerprint` digests everything but the fields a running manager follows by itself
(parallelism, paused, limits, rates - read from the WorkQueue within a watch event): when it
changes, the queue's manager is restarted with the new options (running Jobs run on and are
adopted; the next items get the new image).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from kube_workqueue.ambassador import source_options

from ..backends.kubernetes.options import KubeOptions
from ..declared import from_spec
from ..errors import InputError, UserError
from ..runtime import run_options
from ..runtime.manager_options import ManagerOptions
from ..tenancy import rules

LIVE_FIELDS = ("parallelism", "paused", "limits", "rates")  # a running manager follows these
DIRECT_SCHEMES = ("http", "https")  # an items API the manager reads itself
DEFAULT_MOUNT = "/data"


class SpecProblem(Exception):
    """A spec the operator cannot run: `reason` (CamelCase, the condition's) and a message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Settings:
    """The operator's own settings every queue shares."""

    kubeconfig: str | None = None
    image: str = "ghcr.io/kube-workqueue/workqueue:latest"  # the ambassador's image
    ambassador_url: str = "http://{service}.{namespace}.svc:{port}"
    ambassador_port: int = 8080
    kube_api_qps: float = 20.0


@dataclass(frozen=True)
class AmbassadorPlan:
    """What the queue's ambassador pod runs: its arguments, environment and mount."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    credentials_secret: str | None = None
    claim: str | None = None
    mount_path: str = DEFAULT_MOUNT
    # the pod's service account: its cloud identity (IRSA, GKE Workload Identity, Azure
    # workload identity), annotated by the user; None is the namespace's default
    service_account: str | None = None
    # an azblob:// source with a service account and no Secret: the only way it can sign in
    # is Azure workload identity, which the pod joins by AKS's label
    azure_workload_identity: bool = False
    # a gs:// source's Secret is a key file (GCS_KEY_IN_SECRET), mounted and named by
    # GOOGLE_APPLICATION_CREDENTIALS - Google's client reads no key from the environment -
    # in place of credentials_secret
    key_file_secret: str | None = None


@dataclass(frozen=True)
class Plan:
    namespace: str
    name: str
    source_url: str  # what the manager reads: the given items API, or the queue's ambassador
    ambassador: AmbassadorPlan | None
    kube: KubeOptions
    manager: ManagerOptions
    secrets: tuple[str, ...]  # Secrets the queue needs (checked before anything starts)
    ledger_secret: tuple[str, str] | None
    fingerprint: str


GCS_KEY_IN_SECRET = "key.json"  # a gs:// queue's credentialsSecret: the key file's key in it


def ambassador_name(queue: str) -> str:
    """The queue's ambassador Deployment and Service (a DNS label: the queue name is one of
    at most 63 characters, the suffix is cut from it when needed)."""
    return f"{queue[:52].rstrip('-')}-ambassador"


def fingerprint(spec: dict) -> str:
    steady = {k: v for k, v in spec.items() if k not in LIVE_FIELDS}
    return hashlib.sha256(json.dumps(steady, sort_keys=True).encode()).hexdigest()[:16]


def _source(spec: dict, name: str, namespace: str, settings: Settings):
    """(the URL the manager reads, the ambassador's plan or None, the Secrets it needs)."""
    source = spec.get("source") or {}
    url, volume = source.get("url"), source.get("volume")
    if not url and not volume:
        raise SpecProblem("InvalidSpec", "spec.source: give url or volume")
    secret = source.get("credentialsSecret")
    account = source.get("serviceAccountName") or None
    # the ambassador's own options, each a row of `ambassador.source_options.SOURCE_OPTIONS`
    given, env, config = source_options.from_spec(source, folder=bool(volume))
    served = settings.ambassador_url.format(
        service=ambassador_name(name), namespace=namespace, port=settings.ambassador_port
    )
    if volume:
        mount = volume.get("mountPath") or DEFAULT_MOUNT
        root = "/".join(p for p in (mount.rstrip("/"), (volume.get("path") or "").strip("/")) if p)
        if ".." in (volume.get("path") or "").split("/"):
            raise SpecProblem("InvalidSpec", "spec.source.volume.path may not leave the volume")
        plan = AmbassadorPlan([f"--root={root or '/'}", *given], env=env,
                              claim=volume["claimName"], mount_path=mount,
                              credentials_secret=secret, service_account=account)  # fmt: skip
        return served, plan, (secret,) if secret else ()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in DIRECT_SCHEMES:
        return url.rstrip("/"), None, ()
    from kube_workqueue.ambassador.sources.registry import SourceConfigError, resolve

    try:
        resolve(url, {})
    except SourceConfigError as exc:
        raise SpecProblem("UnknownSource", f"spec.source.url: {exc}") from None
    except ImportError:  # the ambassador's image has the client; this one need not
        pass
    try:
        resolve(url, config)  # an option the source does not take (settling a bucket)
    except SourceConfigError as exc:
        raise SpecProblem("InvalidSpec", f"spec.source: {exc}") from None
    except ImportError:
        pass
    plan = AmbassadorPlan(
        [f"--source={url}", *given],
        env=env,
        credentials_secret=secret if scheme != "gs" else None,
        key_file_secret=secret if scheme == "gs" else None,
        service_account=account,
        azure_workload_identity=scheme == "azblob" and bool(account) and not secret,
    )
    return served, plan, (secret,) if secret else ()


def _manager_options(spec: dict) -> ManagerOptions:
    """What the spec asks of the manager: each field a row of `manager.runtime.run_options`
    names, read through that row's kind (the flag's own parser), so a spec and the command
    line cannot mean different things by one option."""
    try:
        values = run_options.from_spec(spec)
    except InputError as exc:
        raise SpecProblem("InvalidSpec", str(exc)) from None
    fields, tenancy = run_options.options_fields(values)
    parallelism = values.get("parallelism", 1)
    fields.update(
        parallelism=parallelism,
        max_parallelism=max(parallelism, values.get("max_parallelism") or 0),
        autoscale=spec.get("autoscale") is not None,
        # a queue of many at rest: its spec looked at when its WorkQueue changes (a patch is
        # in force within a watch event), its status built every 15 s (an answer to a change
        # of spec: at once)
        follow_on_change=True,
        status_interval=15.0,
    )
    return ManagerOptions(**fields, tenancy=rules.TenancyOptions(**tenancy))


def _placement(placement: dict) -> dict[str, Any]:
    """`spec.placement` as the manager's --offers, --offers-node-label, --needs,
    --needs-from-data, --prefers, --spill-after (each read by its flag's parser; a list's
    items one by one: a need holds commas)."""
    from ..durations import parse_duration
    from ..placement import label_key, need_rules, offers, parse_need

    found: dict[str, Any] = {}
    for key, option, parse in (("offers", "offers", offers), ("needs", "needs", need_rules),
                               ("nodeLabels", "offers_node_labels",
                                lambda words: [label_key(word) for word in words])):  # fmt: skip
        words = placement.get(key) or []
        try:
            found[option] = parse(words)
        except UserError as exc:
            raise UserError(f"spec.placement.{key}: {exc}") from None
    if placement.get("needsFromData"):
        found["needs_from_data"] = True
    try:
        if placement.get("prefers"):
            found["prefers"] = parse_need(placement["prefers"])
        if placement.get("spillAfter"):
            found["spill_after"] = parse_duration(placement["spillAfter"])
    except UserError as exc:
        raise UserError(f"spec.placement: {exc}") from None
    return found


def _listed_objects(spec: dict) -> str | None:
    """The objects an object-store source lists (`s3://incoming/reports/`), which its
    workers may read without an `--input-url`; None for any other source."""
    url = (spec.get("source") or {}).get("url")
    if not url:
        return None
    from kube_workqueue.ambassador.sources.objects import listed_objects

    return listed_objects(url)


def _worker_patch(worker: dict) -> dict | None:
    """The parts of `spec.worker` the pod options have no field for, as a partial pod spec:
    env entries with valueFrom, envFrom, resources - over the given podTemplate."""
    container: dict[str, Any] = {"name": "worker"}
    from_refs = [e for e in worker.get("env") or () if "valueFrom" in e]
    if from_refs:
        container["env"] = from_refs
    for key in ("envFrom", "resources"):
        if worker.get(key):
            container[key] = worker[key]
    template = dict(worker.get("podTemplate") or {})
    if len(container) > 1:
        from ..backends.kubernetes.manifests.pod_patch import merge

        template = merge(template, {"containers": [container]})
    return template or None


def plan(obj: dict, settings: Settings) -> Plan:
    """The options `obj` (a WorkQueue) runs with; `SpecProblem` when it cannot run."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    name, namespace = meta["name"], meta["namespace"]
    worker = spec.get("worker") or {}
    if not worker.get("image"):
        raise SpecProblem("InvalidSpec", "spec.worker.image is required")
    source_url, ambassador, secrets = _source(spec, name, namespace, settings)
    volume = (spec.get("source") or {}).get("volume") or {}
    ledger = spec.get("ledgerSecret")
    ledger_secret = (ledger["name"], ledger.get("key") or "url") if ledger else None
    try:  # the backend's options a WorkQueue field sets, each read by its flag's parser
        declared = from_spec(KubeOptions, spec)
        declared.update(_placement(spec.get("placement") or {}))
    except UserError as exc:
        raise SpecProblem("InvalidSpec", str(exc)) from None
    env = {e["name"]: e.get("value", "") for e in worker.get("env") or () if "valueFrom" not in e}
    listed = _listed_objects(spec)
    if listed and "WORKQUEUE_SOURCE_OBJECTS" not in env:  # what fetch-run-put may read unasked
        env["WORKQUEUE_SOURCE_OBJECTS"] = listed
    kube = KubeOptions(
        namespace=namespace,
        queue=name,
        kubeconfig=settings.kubeconfig,
        command=list(worker.get("command") or []) or None,
        args=list(worker.get("args") or []) or None,
        env=env,
        leader_elect=False,  # the operator leads, once for all its queues (reconciler)
        kube_api_qps=settings.kube_api_qps,
        pvc=volume.get("claimName"),
        mount_path=volume.get("mountPath") or (DEFAULT_MOUNT if volume else None),
        volume_writable=bool(volume.get("writable")),
        node_selector=dict(worker.get("nodeSelector") or {}),
        tolerations=list(worker.get("tolerations") or []),
        pod_spec=_worker_patch(worker),
        instance=name,
        **declared,
    )
    manager = _manager_options(spec)
    if ledger_secret:
        secrets = (*secrets, ledger_secret[0])
    return Plan(namespace, name, source_url, ambassador, kube, manager, tuple(secrets),
                ledger_secret, fingerprint(spec))  # fmt: skip
