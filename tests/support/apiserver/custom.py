"""Custom resources in the stand-in, as kube-apiserver serves a CustomResourceDefinition
(apiextensions.k8s.io/v1; the Kubernetes API reference, "CustomResourceDefinition" and
"Extend the Kubernetes API with CustomResourceDefinitions"):

  * the resource at /apis/GROUP/VERSION/namespaces/NS/PLURAL[/NAME], and discovery of the group
    version at /apis/GROUP/VERSION (an APIResourceList naming the resource and subresources);
  * several versions: each served one at /apis/GROUP/VERSION (a version not served is 404),
    objects stored at the storage version and answered at the version asked for, conversion
    strategy None (only apiVersion changes, which is all the chart's CRD asks for);
  * the structural schema: `default`s applied on every write (create, update, patch), and an
    object that breaks the schema - its types, ranges, patterns, sizes, or a CEL rule
    (`x-kubernetes-validations`, `cel.py`) - refused with 422 Invalid;
  * the status subresource: the main resource ignores `status` (it is kept as it was; dropped on
    create), /status changes nothing but `status`; `metadata.generation` moves only when
    `spec` changes;
  * the scale subresource: GET /scale answers an `autoscaling/v1` Scale whose `spec.replicas`
    is the object's `specReplicasPath` and whose status carries `statusReplicasPath` and
    `labelSelectorPath`; PUT or PATCH /scale sets `specReplicasPath` (guarded by the Scale's
    resourceVersion, which is the object's).
"""

from __future__ import annotations

import copy
import re

from .cel import broken_rules
from .errors import ApiError


def _path(json_path: str) -> list[str]:
    return [p for p in json_path.lstrip(".").split(".") if p]


_FILTER = re.compile(r'^(?P<field>[^\[]+)\[\?\(@\.(?P<key>\w+)=="(?P<value>[^"]*)"\)\]$')


def _read(obj: dict, json_path: str):
    """The value at a printer column's JSONPath: fields, and a list filtered by one field
    (`.status.conditions[?(@.type=="Ready")].status`, as kubectl's columns use)."""
    for part in _path(re.sub(r"\[\?\(@\.", "[?(@~", json_path)):
        found = _FILTER.match(part.replace("@~", "@."))
        if not isinstance(obj, dict):
            return None
        if found:
            entries = obj.get(found["field"]) or []
            obj = next((e for e in entries if isinstance(e, dict)
                        and e.get(found["key"]) == found["value"]), None)  # fmt: skip
        else:
            obj = obj.get(part)
    return obj


def _write(obj: dict, json_path: str, value) -> None:
    parts = _path(json_path)
    for part in parts[:-1]:
        obj = obj.setdefault(part, {})
    obj[parts[-1]] = value


def apply_defaults(schema: dict, value):
    """`value` with the schema's defaults filled in, as the API server does on every write."""
    if not isinstance(value, dict) or schema.get("type") != "object":
        return value
    for name, sub in (schema.get("properties") or {}).items():
        if name not in value and "default" in sub:
            value[name] = copy.deepcopy(sub["default"])
        if name in value:
            value[name] = apply_defaults(sub, value[name])
    return value


def validate(schema: dict, value, where: str = "") -> list[str]:
    """What breaks the schema (types, enums, ranges, required), as field paths and reasons."""
    problems = []
    kind = schema.get("type")
    checks = {
        "object": dict, "array": list, "string": str, "boolean": bool,
        "integer": int, "number": (int, float),
    }  # fmt: skip
    expected = checks.get(kind)
    if schema.get("x-kubernetes-int-or-string"):
        expected = (int, str)
    if expected is not None and (
        not isinstance(value, expected)
        or (kind in ("integer", "number") and value is True)
        or (kind in ("integer", "number") and value is False)
    ):
        return [f"{where or '<root>'}: must be of type {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: Unsupported value: {value!r}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(
                f"{where}: Invalid value: {value!r}: should match {schema['pattern']!r}"
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: Too long: may not be longer than {schema['maxLength']}")
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(
                f"{where}: Invalid value: should be at least {schema['minLength']} chars"
            )
    if isinstance(value, list) and "maxItems" in schema and len(value) > schema["maxItems"]:
        problems.append(
            f"{where}: Too many: {len(value)}: must have at most {schema['maxItems']} items"
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: should be greater than or equal to {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: should be less than or equal to {schema['maximum']}")
    if isinstance(value, dict):
        for name in schema.get("required") or ():
            if name not in value:
                problems.append(f"{where}.{name}: Required value".lstrip("."))
        for name, sub in (schema.get("properties") or {}).items():
            if name in value:
                problems += validate(sub, value[name], f"{where}.{name}".lstrip("."))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, sub_value in value.items():
                problems += validate(extra, sub_value, f"{where}.{name}".lstrip("."))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(schema["items"], item, f"{where}[{i}]")
    if not problems:  # as the API server: rules are evaluated on a value of the right shape
        problems += broken_rules(schema, value, where)
    return problems


def _cell(column: dict, value):
    """A Table cell as kube-apiserver makes it: a `date` column as an age ("42s", "3m")."""
    if column.get("type") != "date" or not isinstance(value, str):
        return value
    from datetime import UTC, datetime

    try:
        then = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return value
    seconds = int((datetime.now(UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


class Definition:
    """A CustomResourceDefinition: its served versions, the storage one's schema and
    subresources (the chart's versions share them)."""

    def __init__(self, crd: dict) -> None:
        spec = crd["spec"]
        strategy = (spec.get("conversion") or {}).get("strategy", "None")
        if strategy != "None":
            raise ValueError(f"conversion strategy {strategy} is not supported by the stand-in")
        version = next(v for v in spec["versions"] if v.get("storage"))
        self.group, self.version = spec["group"], version["name"]
        self.served = [v["name"] for v in spec["versions"] if v.get("served")]
        self.plural, self.kind = spec["names"]["plural"], spec["names"]["kind"]
        self.api_version = f"{self.group}/{self.version}"  # the storage version's
        self.schema = version["schema"]["openAPIV3Schema"]
        subresources = version.get("subresources") or {}
        self.has_status = "status" in subresources
        self.scale = subresources.get("scale")
        self.columns = version.get("additionalPrinterColumns") or []
        self.short_names = spec["names"].get("shortNames") or []

    def admit(self, obj: dict) -> dict:
        """The object as stored: defaults applied; 422 Invalid when it breaks the schema."""
        obj = apply_defaults(self.schema, obj)
        problems = validate(self.schema, {k: v for k, v in obj.items() if k != "metadata"})
        if problems:
            name = (obj.get("metadata") or {}).get("name", "")
            raise ApiError(
                422, "Invalid", f'{self.kind} "{name}" is invalid: ' + "; ".join(problems)
            )
        return obj

    def scale_of(self, obj: dict) -> dict:
        meta = obj["metadata"]
        status: dict = {"replicas": _read(obj, self.scale["statusReplicasPath"]) or 0}
        selector = _read(obj, self.scale.get("labelSelectorPath") or "")
        if self.scale.get("labelSelectorPath") and selector:
            status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },  # fmt: skip
            "spec": {"replicas": _read(obj, self.scale["specReplicasPath"]) or 0},
            "status": status,
        }

    def with_replicas(self, obj: dict, scale: dict) -> dict:
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(422, "Invalid", f"Scale.spec.replicas: Invalid value: {replicas!r}")
        new = copy.deepcopy(obj)
        _write(new, self.scale["specReplicasPath"], replicas)
        return new

    def table(self, objects: list[dict]) -> dict:
        """A list as a meta.k8s.io/v1 Table with the CRD's printer columns (what kubectl asks
        for to print `kubectl get`): NAME first, then each column's jsonPath value."""
        columns = [{"name": "Name", "type": "string", "format": "name"}]
        columns += [{"name": c["name"], "type": c["type"], "format": c.get("format", "")}
                    for c in self.columns]  # fmt: skip
        rows = []
        for obj in objects:
            cells = [obj["metadata"]["name"]]
            cells += [_cell(c, _read(obj, c["jsonPath"])) for c in self.columns]
            rows.append({"cells": cells, "object": {"kind": "PartialObjectMetadata",
                         "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}})  # fmt: skip
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                "columnDefinitions": columns, "rows": rows}  # fmt: skip

    def discovery(self, version: str | None = None) -> dict:
        subresources = [self.plural]
        if self.has_status:
            subresources.append(f"{self.plural}/status")
        if self.scale:
            subresources.append(f"{self.plural}/scale")
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{self.group}/{version or self.version}",
            "resources": [
                {
                    "name": name,
                    "singularName": "" if "/" in name else self.kind.lower(),
                    "shortNames": [] if "/" in name else self.short_names,
                    "namespaced": True,
                    "kind": "Scale" if name.endswith("/scale") else self.kind,
                    "verbs": ["get", "patch", "update"]
                    if "/" in name
                    else ["create", "delete", "get", "list", "patch", "update", "watch"],
                }  # fmt: skip
                for name in subresources
            ],
        }
