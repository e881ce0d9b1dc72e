"""The chart's observability objects: the dashboard's token Secret, the Grafana dashboard
ConfigMap and the PrometheusRule - rendered by the real Helm engine, core objects validated by
kubernetes-validate (strict), the rules checked and unit-tested by the real `promtool`
(Debian's prometheus package, installed by `make test`), and every Grafana query checked by
promtool too (as recording rules: the same PromQL parser)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess

import pytest
import yaml

from tests.support.kube_schemas import validate as validate_strictly

from .rendering import VERSIONS, by_kind, containers, render

ALL_ON = {
    "serviceMonitor": {"enabled": True},
    "grafanaDashboard": {"enabled": True},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
}


DURATION_COUNT = "workqueue_item_duration_seconds_count"
LONGEST = "workqueue_longest_running_processor_seconds"


def firing(rule: dict, name: str, value: str, at: str = "30m", labels: dict | None = None) -> dict:
    """promtool's expectation that alert `name` fires at `at`, its annotations rendered with
    `value` as Prometheus would humanize it (and `labels`, the alert's own, as `$labels`)."""
    found = next(r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == name)
    annotations = {}
    for key, text in found["annotations"].items():
        text = re.sub(r"\{\{ \$value \| humanize\w* \}\}", value, text)
        for label, said in (labels or {}).items():
            text = text.replace(f"{{{{ $labels.{label} }}}}", said)
        annotations[key] = text
    return {
        "eval_time": at,
        "alertname": name,
        "exp_alerts": [
            {"exp_labels": {**found["labels"], **(labels or {})}, "exp_annotations": annotations}
        ],
    }


def promtool(*args, cwd) -> subprocess.CompletedProcess:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: run `make test` (it installs Debian's prometheus)"
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_the_new_objects_render_and_core_ones_are_valid():
    docs = render(ALL_ON)
    for kind in ("Secret", "ConfigMap"):
        for doc in by_kind(docs, kind):
            for version in VERSIONS:
                validate_strictly(doc, version, strict=True)
    grafana = by_kind(docs, "ConfigMap")[0]
    assert grafana["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(grafana["data"]["workqueue.json"])
    assert dashboard["uid"] == "workqueue" and len(dashboard["panels"]) >= 6
    rule = by_kind(docs, "PrometheusRule")[0]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert alerts == {
        "WorkqueueBacklogGrowing",
        "WorkqueueUtilizationHigh",
        "WorkqueueOldestItemWaiting",
        "WorkqueueItemStuck",
        "WorkqueueFailureRateHigh",
        "WorkqueueItemsNoManagerCanRun",
    }
    assert not by_kind(render(), "PrometheusRule") and len(by_kind(render(), "ConfigMap")) == 0


def ui_token_source(docs) -> tuple[dict, str] | None:
    """(the Secret volume the manager reads its dashboard token from, the file it is told to
    read), or None when it is given none."""
    found, pod = containers(docs)
    args = [a for a in found["manager"]["args"] if a.startswith("--ui-token-file=")]
    if not args:
        return None
    path = args[0].split("=", 1)[1]
    mount = next(m for m in found["manager"]["volumeMounts"] if path.startswith(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert mount["readOnly"] is True
    return volume["secret"], path[len(mount["mountPath"]) + 1 :]


def test_the_dashboard_token_comes_from_a_secret():
    docs = render()
    secret = by_kind(docs, "Secret")[0]
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 40 and token.isalnum()
    volume, file_name = ui_token_source(docs)
    assert volume["secretName"] == secret["metadata"]["name"]
    assert volume["items"] == [{"key": "token", "path": file_name}]
    found, _ = containers(docs)
    assert "WORKQUEUE_UI_TOKEN" not in {e["name"] for e in found["manager"]["env"]}  # a file
    # the manager accepts it (16+ characters of the allowed kind)
    from kube_workqueue.manager.cli.argtypes import token as token_type

    assert token_type(token) == token
    mine = render({"dashboard": {"existingSecret": "my-ui", "secretKey": "t"}})
    assert not by_kind(mine, "Secret")
    volume, file_name = ui_token_source(mine)
    assert volume["secretName"] == "my-ui" and volume["items"] == [{"key": "t", "path": "t"}]
    off = render({"dashboard": {"enabled": False}})
    assert ui_token_source(off) is None


def test_the_dashboard_answers_only_to_the_host_names_given():
    found, _ = containers(render({"dashboard": {"allowedHosts": ["queue.example.org"]}}))
    assert "--allowed-host=queue.example.org" in found["manager"]["args"]
    found, _ = containers(render({}))
    assert not [a for a in found["manager"]["args"] if a.startswith("--allowed-host")]


def test_promtool_checks_the_rules(tmp_path):
    rule = by_kind(render(ALL_ON), "PrometheusRule")[0]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    r = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 6 rules found" in r.stdout


def test_promtool_fires_the_alerts_on_series_that_should_fire_them(tmp_path):
    """promtool's rule unit tests: a queue over capacity and failing fires its alerts; a calm
    queue fires none."""
    rule = by_kind(render(ALL_ON), "PrometheusRule")[0]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    sel = 'namespace="media", job="demo-workqueue-metrics"'
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"workqueue_utilization_ratio{{{sel}}}", "values": "1.4x40"},
                    {"series": f'workqueue_depth{{{sel}, name="items"}}', "values": "1+2x40"},
                    {"series": f"workqueue_oldest_waiting_seconds{{{sel}}}", "values": "60+60x40"},
                    {
                        "series": f'{DURATION_COUNT}{{{sel}, outcome="failed"}}',
                        "values": "0+3x40",
                    },
                    {
                        "series": f"workqueue_item_duration_seconds_count"
                        f'{{{sel}, outcome="succeeded"}}',
                        "values": "0+2x40",
                    },
                    {
                        "series": f'{LONGEST}{{{sel}, name="items"}}',
                        "values": "0x40",
                    },
                    {  # a pod that cannot start, from minute 10 on
                        "series": f'workqueue_items_stuck{{{sel}, reason="ImagePullBackOff"}}',
                        "values": "0x10 1x30",
                    },
                    {  # three renders no live manager offers a gpu for, said by two managers
                        "series": f'workqueue_items_unmet{{{sel}, manager="a", need="gpu"}}',
                        "values": "3x40",
                    },
                    {
                        "series": f'workqueue_items_unmet{{{sel}, manager="b", need="gpu"}}',
                        "values": "3x40",
                    },
                ],
                "alert_rule_test": [
                    firing(rule, "WorkqueueUtilizationHigh", "1.4"),
                    firing(rule, "WorkqueueBacklogGrowing", "61"),
                    firing(rule, "WorkqueueFailureRateHigh", "60%"),
                    firing(rule, "WorkqueueItemStuck", "1", at="40m"),
                    firing(rule, "WorkqueueItemsNoManagerCanRun", "3", labels={"need": "gpu"}),
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"workqueue_utilization_ratio{{{sel}}}", "values": "0.5x40"},
                    {"series": f'workqueue_depth{{{sel}, name="items"}}', "values": "0x40"},
                    {
                        "series": f'{DURATION_COUNT}{{{sel}, outcome="succeeded"}}',
                        "values": "0+5x40",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "40m", "alertname": name, "exp_alerts": []}
                    for name in (
                        "WorkqueueUtilizationHigh",
                        "WorkqueueBacklogGrowing",
                        "WorkqueueFailureRateHigh",
                        "WorkqueueOldestItemWaiting",
                        "WorkqueueItemsNoManagerCanRun",
                    )
                ],
            },
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    r = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("panel_index", range(8))
def test_every_grafana_query_is_promql_promtool_accepts(tmp_path, panel_index):
    grafana = by_kind(render(ALL_ON), "ConfigMap")[0]
    panels = json.loads(grafana["data"]["workqueue.json"])["panels"]
    if panel_index >= len(panels):
        pytest.fail(f"the dashboard has {len(panels)} panels; update this test's range")
    rules = [
        {
            "record": f"grafana:panel_{panel_index}:{k}",
            "expr": t["expr"].replace("$namespace", "media").replace("$job", ".*"),
        }
        for k, t in enumerate(panels[panel_index]["targets"])
    ]
    (tmp_path / "q.yaml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    r = promtool("check", "rules", "q.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
