"""The Kubernetes backend's options, checked where they are declared: each bad value is one
`UserError` naming its flag, before any API call; good values build the worker pod's options."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.backends.kubernetes.options import KubeOptions, KubeQueue
from kube_workqueue.manager.declared import from_words
from kube_workqueue.manager.errors import UserError


def typed(**words):
    return from_words(KubeOptions, {f"declared_{k}": v for k, v in words.items()})


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ({"queue": "Bad_Q"}, "--queue: "),
        ({"backoff_limit": "-1"}, "--backoff-limit: must be >= 0"),
        ({"keep_failed": "many"}, "--keep-failed: not a whole number"),
        ({"kube_api_qps": "-5"}, "--kube-api-qps: must be >= 0"),
        ({"kube_api_qps": "inf"}, "--kube-api-qps: must be >= 0"),
        ({"active_deadline": "0"}, "--active-deadline: a duration must be > 0"),
        ({"ttl_after_finished": "soon"}, "--ttl-after-finished: not a duration"),
        ({"env": ["NOEQUALS"]}, "--env: takes KEY=VALUE"),
        ({"tolerations": ["gpu:Sometimes"]}, "--toleration: takes KEY[=VALUE]:EFFECT"),
        ({"command": "'unbalanced"}, "--command: cannot split"),
        ({"pod_spec": "/nonexistent/pod.yaml"}, "--pod-spec: cannot read"),
        ({"cpu": "lots"}, "--cpu: not a resource quantity"),
        ({"cpu": "0"}, "--cpu: must be more than 0"),
        ({"memory": "-5"}, "--memory: must not be negative"),
        ({"memory": "12 Mi"}, "--memory: not a resource quantity"),
        ({"namespace": "Bad_NS"}, "--namespace: not a DNS-1123 label"),
        ({"namespace": "a" * 64}, "--namespace: not a DNS-1123 label"),
        ({"pvc": "My.Claim"}, "--pvc: not a DNS-1123 subdomain"),
        ({"service_account": "robot_1"}, "--service-account: not a DNS-1123 subdomain"),
        ({"mount_path": "data"}, "--mount-path: must be an absolute path"),
        ({"mount_path": "/data/../etc"}, "--mount-path: must be an absolute path"),
        ({"env": ["1ST=x"]}, "--env: not an environment variable name"),
        ({"node_selector": ["disk=ssd fast"]}, "--node-selector: not a label value"),
        ({"node_selector": ["-bad=x"]}, "--node-selector: not a qualified name"),
        ({"image": "my image:1"}, "--image: not an image reference"),
    ],
)
def test_bad_values_are_one_user_error_naming_the_flag(words, message):
    with pytest.raises(UserError) as refused:
        typed(**words)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_good_values_build_the_pod():
    options = typed(
        namespace="media",
        queue="thumbs",
        image="thumbnailer:1.0",
        command="thumbnail --fast",
        env=["A=1", "B=x=y"],
        tolerations=["gpu=yes:NoExecute"],
        active_deadline="1h30m",
        ttl_after_finished="0",
        cpu="500m",
    )
    pod = options.pod()
    assert pod.command == ["thumbnail", "--fast"]
    assert pod.env == {"A": "1", "B": "x=y"}
    assert pod.tolerations == [
        {"key": "gpu", "effect": "NoExecute", "operator": "Equal", "value": "yes"}
    ]
    assert pod.active_deadline_seconds == 5400 and pod.ttl_seconds_after_finished == 0
    assert pod.resources == {"requests": {"cpu": "500m"}}  # a request is not a cap
    assert options.where == KubeQueue("media", "thumbs", None)


def test_a_queue_needs_namespace_and_name_and_a_pod_needs_an_image():
    with pytest.raises(UserError, match="--namespace and --queue are required"):
        KubeQueue(namespace="media").check()
    with pytest.raises(UserError, match="--image is required"):
        typed(namespace="media", queue="thumbs").pod()


@pytest.mark.parametrize(
    "amount", ["500m", "2", "1.5Gi", "256Mi", "1e3", "0.5", ".5", "+1", "100k", "1E6"]
)
def test_quantities_the_api_server_accepts_are_accepted(amount):
    assert typed(image="x:1", cpu=amount).pod().resources["requests"]["cpu"] == amount


def test_names_the_api_server_accepts_are_accepted():
    options = typed(
        image="registry.example:5000/team/thumb@sha256:" + "ab" * 32,
        namespace="media-1",
        pvc="videos.shared",
        service_account="thumbnailer",
        mount_path="/data/in",
        env=["OUTPUT_DIR=/data/out", "my.var-x=1"],
        node_selector=["kubernetes.io/os=linux", "disk="],
    )
    assert options.pod().mount_path == "/data/in"
