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
  * a ConfigMap's `data` and `binaryData` together hold at most 1 MiB (1,048,576 bytes).
"""

from __future__ import annotations

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
    if policy is not None:
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


def check(resource: str, obj: dict, current: dict | None = None) -> None:
    """The checks of `resource`, if it has any here."""
    if resource == "jobs":
        check_job(obj, current)
    elif resource == "configmaps":
        check_config_map(obj)
