"""Every place a run option is set, held to its one declaration (`manager.runtime.run_options`):
the chart's `values.schema.json` and `values.yaml`, the manager's arguments the chart renders,
and the WorkQueue CRD's fields. A place that admits a value the flag refuses, a default that
is not the flag's, a value the template forgets to pass on, or a row without its place fails
here - with the row's flag and the place in the message."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml

from kube_workqueue.manager.runtime import run_options
from kube_workqueue.manager.runtime.run_options import RUN_OPTIONS, RunOption

from .rendering import CHART, CRD_FILE, containers, render

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
CRDS = [
    version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for version in yaml.safe_load((CHART / "crds" / CRD_FILE).read_text())["spec"]["versions"]
]
CHARTED = [row for row in RUN_OPTIONS if row.chart]
IN_CRD = [row for row in RUN_OPTIONS if row.crd]
# what a place may add to a declared schema: words about it, or a bound on its size
ANNOTATIONS = {
    "description",
    "default",
    "format",
    "minLength",
    "maxLength",
    "maxItems",
    "x-kubernetes-list-type",
}


def schema_at(schema: dict, dotted: str) -> dict | None:
    for key in dotted.split("."):
        schema = (schema.get("properties") or {}).get(key)
        if schema is None:
            return None
    return schema


def value_at(values: dict, dotted: str):
    for key in dotted.split("."):
        values = values[key]
    return values


def set_at(values: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        values = values.setdefault(key, {})
    values[last] = value


def no_looser(place: dict, declared: dict, where: str) -> None:
    """`place` admits no value `declared` refuses: the same type, pattern and choices, bounds
    as tight or tighter; only annotations and size bounds besides."""
    extra = set(place) - set(declared) - ANNOTATIONS
    extra -= {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern"}
    assert not extra, f"{where}: says {sorted(extra)} the declaration does not"
    for key in ("type", "pattern", "enum"):
        if key == "pattern" and key not in declared:
            continue  # a place may shape what the flag takes as it is (a host name's form)
        assert place.get(key) == declared.get(key), (
            f"{where}: {key} {place.get(key)!r}, declared {declared.get(key)!r}"
        )
    for key in ("minimum", "exclusiveMinimum"):
        if key in declared:
            assert place.get(key, float("-inf")) >= declared[key], f"{where}: {key} looser"
    for key in ("maximum", "exclusiveMaximum"):
        if key in declared:
            assert place.get(key, float("inf")) <= declared[key], f"{where}: {key} looser"
    if "items" in declared:
        no_looser(place["items"], declared["items"], f"{where}[]")


@pytest.mark.parametrize("row", RUN_OPTIONS, ids=lambda row: row.flag)
def test_each_kind_s_examples_pass_both_its_parser_and_its_schema(row: RunOption):
    for place in ("chart", "crd"):
        kind = row.place_kind(place)
        for example in kind.examples:
            jsonschema.validate(example, dict(kind.schema))
            kind.read(example)  # raises InputError if the parser refuses what the schema admits


@pytest.mark.parametrize("row", CHARTED, ids=lambda row: row.flag)
def test_the_chart_s_schema_and_default_are_the_row_s(row: RunOption):
    place = schema_at(SCHEMA, row.chart)
    assert place is not None, f"{row.flag}: values.schema.json has no {row.chart}"
    no_looser(place, row.place_schema("chart"), f"{row.flag} at values.schema.json {row.chart}")
    default, expected = value_at(VALUES, row.chart), row.place_default("chart")
    if expected is not None and default not in ("", None):
        assert row.read(default, "chart") == expected, f"{row.flag}: values.yaml {row.chart}"


def test_a_value_set_in_the_chart_reaches_the_manager_as_its_flag():
    from kube_workqueue.manager.cli import build_parser

    values: dict = {"autoscaling": {"mode": "builtin"}, "dashboard": {"enabled": True}}
    samples = {}
    for row in CHARTED:
        kind = row.place_kind("chart")
        if row.repeat:
            sample = list(kind.examples)
        elif row.switch:
            sample = not row.default
        else:
            sample = next(e for e in reversed(kind.examples) if e != row.default)
        samples[row.flag] = sample
        set_at(values, row.chart, sample)
    found, _ = containers(render(values))
    args = [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    parsed = build_parser().parse_args(args)
    for row in CHARTED:
        got, want = getattr(parsed, row.name), row.read(samples[row.flag], "chart")
        if not row.repeat:
            got, want = row.kind.field_value(got), row.kind.field_value(want)
        assert got == want, (
            f"{row.chart} = {samples[row.flag]!r} did not reach the manager as {row.flag}"
        )


@pytest.mark.parametrize("row", IN_CRD, ids=lambda row: row.flag)
def test_the_workqueue_field_is_the_row_s(row: RunOption):
    for spec in CRDS:  # every served version
        place = schema_at(spec, row.crd)
        assert place is not None, f"{row.flag}: the WorkQueue CRD has no spec.{row.crd}"
        no_looser(place, row.place_schema("crd"), f"{row.flag} at spec.{row.crd}")


def test_the_operator_reads_each_field_as_the_flag_reads_its_word():
    spec: dict = {}
    for row in IN_CRD:
        kind = row.place_kind("crd")
        set_at(spec, row.crd, list(kind.examples) if row.repeat else kind.examples[-1])
    values = run_options.from_spec(spec)
    assert set(values) == {row.name for row in IN_CRD}
    for row in IN_CRD:
        if row.kind is row.place_kind("crd"):
            words = value_at(spec, row.crd)
            typed = [row.kind.parse(str(w)) for w in words] if row.repeat else None
            want = typed if row.repeat else row.kind.read(words)
            assert row.kind.field_value(values[row.name]) == row.kind.field_value(want)


def test_a_field_the_flag_would_refuse_is_named_in_one_line():
    with pytest.raises(run_options.InputError, match=r"^spec\.maxAttempts: .*>= 1"):
        run_options.from_spec({"maxAttempts": 0})
    with pytest.raises(run_options.InputError, match=r"^spec\.limits: .*0 to 4096"):
        run_options.from_spec({"limits": ["acme=5000"]})


def test_every_flag_the_chart_writes_for_the_manager_is_declared():
    """A flag the manager's container gets is a run option's row or a backend's declared
    option: never one spelled only in the template."""
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.declared import flags

    declared = {row.flag for row in RUN_OPTIONS} | {f.metadata["flag"] for f in flags(KubeOptions)}
    template = (CHART / "templates" / "deployment.yaml").read_text()
    manager = template[template.index("- manager") :]
    written = set(re.findall(r"(--[a-z][a-z-]+)[=\"]", manager)) | set(
        re.findall(r"- (--[a-z][a-z-]+)\s*$", manager, re.MULTILINE)
    )
    written |= set(re.findall(r'list "(--[a-z][a-z-]+)"', manager))
    assert written - declared - {"--source", "--backend"} == set()


def test_every_source_field_of_the_workqueue_is_an_ambassador_option():
    """`spec.source`'s fields the operator passes on are the ambassador's declared options
    (`ambassador.source_options`), and each declared one is in the CRD."""
    from kube_workqueue.ambassador.source_options import SOURCE_OPTIONS

    declared = {o.crd for o in SOURCE_OPTIONS if o.crd}
    # where, and as whom, not how it is read
    structural = {"url", "volume", "credentialsSecret", "serviceAccountName"}
    for spec in CRDS:
        fields = set(spec["properties"]["source"]["properties"])
        assert fields - structural == declared


def test_the_operator_passes_a_source_s_options_to_its_ambassador():
    from kube_workqueue.manager.operator.queue_spec import Settings, plan

    queue = {"metadata": {"name": "thumbs", "namespace": "media"}, "spec": {
        "worker": {"image": "w"},
        "source": {"url": "s3://bucket/videos/", "suffixes": [".mp4", ".mov"], "recursive": True,
                   "endpointUrl": "http://minio:9000", "region": "eu-west-1",
                   "settleSeconds": 5}}}  # fmt: skip
    ambassador = plan(queue, Settings()).ambassador
    assert ambassador.args == ["--source=s3://bucket/videos/", "--suffix=.mp4", "--suffix=.mov",
                               "--recursive", "--endpoint-url=http://minio:9000"]  # fmt: skip
    assert ambassador.env == {"AWS_REGION": "eu-west-1"}  # (a bucket does not settle)


# -- a backend's options (`manager.declared.option(chart=, crd=)`) ---------------------------


def _kube_placed(place: str):
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.declared import placed

    return placed(KubeOptions, place)


def _sample(schema: dict):
    """A value `schema` admits that is no field's default."""
    kind = schema["type"][0] if isinstance(schema["type"], list) else schema["type"]
    if kind == "array":
        return [_sample(schema["items"]), _sample(schema["items"]) + 1]
    if kind == "integer":
        return min(schema.get("minimum", 0) + 2, schema.get("maximum", 10**9))
    if kind == "number":
        return 2.5
    if "pattern" in schema:  # a duration's
        return "90s"
    return "sample-1"


def _no_looser_or_null(place: dict, declared: dict, where: str) -> None:
    """As `no_looser`, where a chart's `null` is the flag not given."""
    if isinstance(place.get("type"), list) and "null" in place["type"]:
        rest = [t for t in place["type"] if t != "null"]
        place = {**place, "type": rest[0] if len(rest) == 1 else rest}
    no_looser(place, declared, where)


@pytest.mark.parametrize("place", ["chart", "crd"])
def test_a_backend_option_s_places_admit_nothing_its_flag_refuses(place):
    assert _kube_placed(place)
    for field, path, declared in _kube_placed(place):
        flag = field.metadata["flag"]
        schemas = (
            [schema_at(SCHEMA, path)] if place == "chart" else [schema_at(s, path) for s in CRDS]
        )
        for found in schemas:
            assert found is not None, f"{flag}: no {path} in the {place}"
            _no_looser_or_null(found, declared, f"{flag} at {place} {path}")
        if place == "chart":
            default = value_at(VALUES, path)
            if default not in (None, "", []) and field.default is not None:
                parse = field.metadata["parse"]
                from kube_workqueue.manager.declared import word_of

                assert parse(word_of(default)) == field.default, f"{flag}: values.yaml {path}"


def test_a_backend_option_set_in_the_chart_reaches_the_manager_as_its_flag():
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.cli import build_parser
    from kube_workqueue.manager.declared import from_words, word_of

    values: dict = {"manager": {"parallelism": 8}}  # (a batch runs side by side)
    samples = {}
    for field, path, declared in _kube_placed("chart"):
        samples[field.name] = _sample(declared)
        set_at(values, path, samples[field.name])
    found, _ = containers(render(values))
    args = [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    options = from_words(KubeOptions, vars(build_parser().parse_args(args)))
    for field, path, _ in _kube_placed("chart"):
        want = field.metadata["parse"](word_of(samples[field.name]))
        assert getattr(options, field.name) == want, (
            f"{path} did not reach {field.metadata['flag']}"
        )


def test_the_operator_reads_a_backend_option_s_field_through_its_flag_s_parser():
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.declared import from_spec
    from kube_workqueue.manager.errors import UserError

    spec = {"batchSize": 8, "timeout": "1.5h", "failFastExitCodes": [3, 2, 3]}
    assert from_spec(KubeOptions, spec) == {
        "batch_size": 8, "active_deadline": 5400, "fail_fast_exit_codes": (2, 3)
    }  # fmt: skip
    with pytest.raises(UserError, match=r"^spec\.batchSize: must be 1 to 100000"):
        from_spec(KubeOptions, {"batchSize": 0})
