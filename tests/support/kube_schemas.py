"""Strict validation of Kubernetes objects against the official schemas (kubernetes-validate),
each schema's validator made once per test process.

`kubernetes_validate.validate` finds the schema version by listing its package's folders,
reads and parses the version's `_definitions.json` (megabytes of JSON) and builds a validator
on every call: 15-19 ms an object, about 400 calls a run in the chart's, the operator's and
the Kubernetes backend's tests. `validate` here takes the same steps in the same order - the
same version chosen, the same schema files, the same registry, the same Draft 2020-12
validator, the same `ValidationError` raised - and keeps what they make, keyed by the schema it
is for. Validating an object is then the validation alone.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jsonschema
from kubernetes_validate import utils
from referencing import Registry, Resource


@functools.cache
def _versions() -> tuple[str, ...]:
    return tuple(utils.all_versions())


@functools.cache
def _validator(schema_dir: str, kind: str, api_version: str, desired: str):
    """The validator of one kind's schema in one version's folder (`utils.validate`'s)."""
    try:
        schema = utils.schema_contents(
            f"kubernetes-json-schema/{schema_dir}/{kind}-{api_version}.json", desired
        )
    except FileNotFoundError:
        return None
    definitions = utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json",
                                        desired)  # fmt: skip
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def validate(data: dict[str, Any], desired_version: str, strict: bool = False) -> str:
    """`validate_strictly(data, desired_version, strict)`, its validators kept: the
    major.minor validated against, or its `ValidationError`, `SchemaNotFoundError` or
    `VersionNotSupportedError`."""
    desired = desired_version.removeprefix("v")
    if utils.major_minor(desired) > _versions()[-1]:
        raise utils.VersionNotSupportedError(version=utils.major_minor(desired))
    version = [v for v in _versions() if utils.major_minor(v) <= utils.major_minor(desired)][-1]
    api_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", data["apiVersion"])
    schema_dir = f"v{version}-local" + ("-strict" if strict else "")
    validator = _validator(schema_dir, data["kind"].lower(), api_version, desired)
    if validator is None:
        raise utils.SchemaNotFoundError(version=utils.major_minor(desired), kind=data["kind"],
                                        api_version=data["apiVersion"])  # fmt: skip
    try:
        validator.validate(data)
    except jsonschema.ValidationError as e:
        raise utils.ValidationError(e, version=utils.major_minor(version)) from None
    return utils.major_minor(version)
