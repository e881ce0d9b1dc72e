"""The kube-apiserver's validation of built-in objects, where the manager relies on it: what a
batch of items as one Indexed Job depends on, and a ConfigMap's size. A breach is 422 Invalid,
with the field path first, as the real server words it.

From the API reference (batch/v1 JobSpec, v1 ConfigMap) and the Job documentation:

  * `completionMode` is `NonIndexed` (the default) or `Indexed`;
  * `backoffLimitPerIndex` and `maxFailedIndexes` need `completionMode: Indexed`, and
    `maxFailedIndexes` needs `backoffLimitPerIndex`; with `backoffLimitPerIndex` set,
    `completions` and `maxFailedIndexes` are at most 100,000 and the second at most the first;
  * `completions` may not change, except with `parallelism` to the same value (elastic
    Indexed Jobs); `completionMode` and the pod template's spec may not change;
  * a `podFailurePolicy` needs the template's `restartPolicy: Never`; its `FailIndex` action
    needs `backoffLimitPerIndex`;
  * a ConfigMap's `data` and `binaryData` together hold at most 1 MiB (1,048,576 bytes);
  * a pod template's `restartPolicy` is `Never` or `OnFailure` (a Job's pods never restart
    `Always`); `podReplacementPolicy` is `TerminatingOrFailed` or `Failed`, and must be
    `Failed` when a `podFailurePolicy` is set;
  * names and labels as `check_meta` says.
"""

from __future__ import annotations

import re

from .errors import ApiError

MAX_INDEXED = 100_000
MAX_CONFIG_MAP_BYTES = 1024 * 1024


def _invalid(kind: str, name: str, problems: list[str]) -> ApiError:
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: ' + "; ".join(problems))


def check_job(job: dict, current: dict | None = None) -> None:
    """422 when `job` (replacing `current`, when given) breaks the rules above."""
    spec = job.get("spec") or {}
    name = (job.get("metadata") or {}).get("name", "")
    problems = []
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        problems.append(f"spec.completionMode: Unsupported value: {mode!r}")
    per_index = spec.get("backoffLimitPerIndex")
    max_failed = spec.get("maxFailedIndexes")
    completions = spec.get("completions")
    if per_index is not None and mode != "Indexed":
        problems.append(
            "spec.backoffLimitPerIndex: Invalid value: requires Indexed completion mode"
        )
    if max_failed is not None and per_index is None:
        problems.append("spec.maxFailedIndexes: Invalid value: requires backoffLimitPerIndex")
    if per_index is not None and completions is not None and completions > MAX_INDEXED:
        problems.append(f"spec.completions: Invalid value: {completions}: must be less than or "
                        f"equal to {MAX_INDEXED} when backoffLimitPerIndex is set")  # fmt: skip
    if max_failed is not None and (
        max_failed > MAX_INDEXED or (completions is not None and max_failed > completions)
    ):
        problems.append(f"spec.maxFailedIndexes: Invalid value: {max_failed}: must be less than "
                        "or equal to completions")  # fmt: skip
    if mode == "Indexed" and completions is None:
        problems.append("spec.completions: Required value: when completion mode is Indexed")
    policy = spec.get("podFailurePolicy")
    template = (spec.get("template") or {}).get("spec") or {}
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None and replacement not in ("TerminatingOrFailed", "Failed"):
        problems.append(f"spec.podReplacementPolicy: Unsupported value: {replacement!r}")
    if template.get("restartPolicy") not in ("Never", "OnFailure"):
        problems.append("spec.template.spec.restartPolicy: Required value: valid values: "
                        '"OnFailure", "Never"')  # fmt: skip
    if policy is not None:
        if replacement is not None and replacement != "Failed":
            problems.append(f"spec.podReplacementPolicy: Not supported: {replacement!r}: "
                            "must be Failed when podFailurePolicy is set")  # fmt: skip
        if template.get("restartPolicy") != "Never":
            problems.append("spec.podFailurePolicy: Invalid value: only allowed with "
                            "restartPolicy Never")  # fmt: skip
        for i, rule in enumerate(policy.get("rules") or []):
            if rule.get("action") == "FailIndex" and per_index is None:
                problems.append(f"spec.podFailurePolicy.rules[{i}].action: Invalid value: "
                                "FailIndex requires backoffLimitPerIndex")  # fmt: skip
    if current is not None:
        before = current.get("spec") or {}
        if before.get("completionMode", "NonIndexed") != mode:
            problems.append("spec.completionMode: Invalid value: field is immutable")
        if before.get("completions") != completions and not (
            mode == "Indexed" and completions == spec.get("parallelism")
            and before.get("completions") == before.get("parallelism")
        ):  # fmt: skip
            problems.append("spec.completions: Invalid value: field is immutable")
        if ((before.get("template") or {}).get("spec") or {}) != template:
            problems.append("spec.template: Invalid value: field is immutable")
    if problems:
        raise _invalid("Job", name, problems)


def check_config_map(config_map: dict) -> None:
    """422 when the ConfigMap's data holds more than 1 MiB."""
    size = sum(len(k) + len(v.encode("utf-8")) for k, v in (config_map.get("data") or {}).items())
    size += sum(len(k) + len(v) * 3 // 4 for k, v in (config_map.get("binaryData") or {}).items())
    if size > MAX_CONFIG_MAP_BYTES:
        name = (config_map.get("metadata") or {}).get("name", "")
        raise _invalid("ConfigMap", name, [
            f"[]: Too long: must have at most {MAX_CONFIG_MAP_BYTES} bytes",
        ])  # fmt: skip


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
KINDS = {"jobs": "Job", "configmaps": "ConfigMap", "leases": "Lease", "pods": "Pod",
         "events": "Event", "deployments": "Deployment"}  # fmt: skip


def check_meta(resource: str, obj: dict) -> None:
    """422 for a name or a label the API server refuses
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/ and
    .../labels/#syntax-and-character-set): every object's name is a DNS-1123 subdomain of at
    most 253 characters - a Job's at most 63, as its pods carry it in their `job-name` label -
    and a label's name (its optional prefix a subdomain) and value at most 63 characters of
    [A-Za-z0-9-_.], starting and ending alphanumeric."""
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    kind = KINDS.get(resource, resource)
    problems = []
    longest = 63 if resource == "jobs" else 253
    if len(name) > longest or not _DNS_SUBDOMAIN.match(name):
        problems.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 "
                        f"subdomain of at most {longest} characters")  # fmt: skip
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = key.rpartition("/")
        if not label or len(label) > 63 or not _LABEL_NAME.match(label) or (
            prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))
        ):  # fmt: skip
            problems.append(f"metadata.labels: Invalid value: {key!r}: name part must be no "
                            "more than 63 characters of [-A-Za-z0-9_.], alphanumeric at the "
                            "ends")  # fmt: skip
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_NAME.match(value):
            problems.append(f"metadata.labels: Invalid value: {value!r}: must be no more than "
                            "63 characters")  # fmt: skip
    if problems:
        raise _invalid(kind, name, problems)


def check(resource: str, obj: dict, current: dict | None = None) -> None:
    """The checks of `resource`, if it has any here."""
    check_meta(resource, obj)
    if resource == "jobs":
        check_job(obj, current)
    elif resource == "configmaps":
        check_config_map(obj)
