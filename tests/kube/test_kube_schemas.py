"""The kept validators (`tests.support.kube_schemas`) judge as kubernetes-validate does: the
same objects pass against the same versions, the same mistakes fail with the same errors."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
from kubernetes_validate import utils

from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.support.kube_schemas import validate

VERSIONS = ["1.30.0", "v1.30.0", kubernetes_validate.latest_version()]


def a_job() -> dict:
    return ko.job("thumbs", "media", "a.mp4", 1, ko.PodOptions(image="thumbnailer:1"))


def outcome(check, data: dict, version: str, strict: bool):
    try:
        return "passes", check(data, version, strict=strict)
    except (utils.ValidationError, utils.SchemaNotFoundError,
            utils.VersionNotSupportedError) as refused:  # fmt: skip
        return type(refused).__name__, refused.message if hasattr(refused, "message") else ""


def unknown_field() -> dict:
    job = a_job()
    job["spec"]["template"]["spec"]["containers"][0]["nonsense"] = True
    return job


def wrong_type() -> dict:
    job = a_job()
    job["spec"]["backoffLimit"] = "three"
    return job


def unknown_kind() -> dict:
    return {**a_job(), "kind": "Gadget"}


@pytest.mark.parametrize("make", [a_job, unknown_field, wrong_type, unknown_kind])
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("version", VERSIONS)
def test_the_kept_validators_judge_as_kubernetes_validate(make, strict, version):
    data = make()
    ours = outcome(validate, copy.deepcopy(data), version, strict)
    theirs = outcome(kubernetes_validate.validate, copy.deepcopy(data), version, strict)
    assert ours == theirs


def test_a_version_newer_than_any_schema_is_refused_alike():
    assert outcome(validate, a_job(), "9.99.0", True) == \
        outcome(kubernetes_validate.validate, a_job(), "9.99.0", True)  # fmt: skip
    assert outcome(validate, a_job(), "9.99.0", True)[0] == "VersionNotSupportedError"


def test_a_strict_mistake_is_found_on_every_call():
    for _ in range(3):  # the validator is kept: its second use judges as its first
        assert outcome(validate, unknown_field(), VERSIONS[-1], True)[0] == "ValidationError"
        assert outcome(validate, a_job(), VERSIONS[-1], True)[0] == "passes"
