"""The chart per source type: `source.type: filesystem | s3 | gcs | azure | redis | nats | kafka`
renders an
ambassador the CLI accepts and resolves to that source, with credentials only from Secrets or
the service account (IRSA) - never in clear - and values the schema refuses."""

from __future__ import annotations

import pytest
from helm_python import lint

from kube_workqueue.ambassador.sources.registry import resolve
from tests.support.kube_schemas import validate as validate_strictly

from .rendering import CHART, VERSIONS, by_kind, containers, render

S3 = {
    "source": {
        "type": "s3",
        "s3": {
            "bucket": "media-in", "prefix": "videos/", "endpointUrl": "http://minio:9000",
            "region": "eu-west-1", "sqsQueueUrl": "https://sqs.eu-west-1.amazonaws.com/1/q",
            "credentialsSecret": "minio-keys",
        },
    },
    "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}},
}  # fmt: skip
REDIS = {
    "source": {
        "type": "redis",
        "redis": {
            "url": "rediss://redis.cache:6380/2", "set": "to do", "data": "item-data",
            "passwordSecret": {"name": "redis-auth", "key": "pw"},
        },
    },
}  # fmt: skip


def ambassador_of(values):
    docs = render(values)
    for doc in docs:
        if doc["kind"] != "ServiceMonitor":
            for version in VERSIONS:
                validate_strictly(doc, version, strict=True)
    found, _ = containers(docs)
    return found["ambassador"], docs


def parsed(container):
    from kube_workqueue.manager.cli import build_parser

    return build_parser().parse_args(container["args"])


def options_of(args):
    from kube_workqueue.ambassador.source_options import folder_config

    return folder_config(args)


def test_the_default_is_the_shared_folder():
    ambassador, _ = ambassador_of(None)
    args = parsed(ambassador)
    assert args.root == "/data" and args.source is None
    assert resolve(args.root, options_of(args)).kind == "filesystem"


def test_s3_renders_the_bucket_with_credentials_from_a_secret_or_irsa():
    ambassador, docs = ambassador_of(S3)
    args = parsed(ambassador)
    spec = resolve(args.source, options_of(args))
    assert spec.kind == "s3"
    assert spec.config["S3_BUCKET"] == "media-in" and spec.config["S3_PREFIX"] == "videos/"
    assert spec.config["S3_ENDPOINT_URL"] == "http://minio:9000"
    assert spec.config["SQS_QUEUE_URL"].startswith("https://sqs.")
    assert ambassador["envFrom"] == [{"secretRef": {"name": "minio-keys"}}]
    assert {"name": "AWS_REGION", "value": "eu-west-1"} in ambassador["env"]
    (account,) = by_kind(docs, "ServiceAccount")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(":role/r")
    assert "--settle" not in " ".join(ambassador["args"])


def test_an_object_store_s_workers_may_read_the_objects_it_lists_and_no_other_source_s_do():
    """The manager gives workers the source's prefix (fetch-run-put reads those objects
    without an --input-url, and no other bucket a record names); a user's own value wins."""
    for values, listed in ((S3, "s3://media-in/videos/"), (REDIS, None)):
        found, _ = containers(render(values))
        args = found["manager"]["args"]
        told = [a for a in args if a.startswith("--env=WORKQUEUE_SOURCE_OBJECTS=")]
        assert told == ([f"--env=WORKQUEUE_SOURCE_OBJECTS={listed}"] if listed else []), args
    own = {**S3, "worker": {"env": {"WORKQUEUE_SOURCE_OBJECTS": "s3://media-in/"}}}
    args = containers(render(own))[0]["manager"]["args"]
    assert [a for a in args if "WORKQUEUE_SOURCE_OBJECTS" in a] == [
        "--env=WORKQUEUE_SOURCE_OBJECTS=s3://media-in/"
    ]


def test_redis_renders_the_set_with_the_password_from_a_secret():
    ambassador, _ = ambassador_of(REDIS)
    args = parsed(ambassador)
    spec = resolve(args.source, options_of(args))
    assert spec.kind == "redis"
    assert spec.config["REDIS_SET"] == "to do" and spec.config["REDIS_DATA"] == "item-data"
    assert spec.config["REDIS_URL"] == "rediss://redis.cache:6380/2"
    (password,) = [e for e in ambassador["env"] if e["name"] == "REDIS_PASSWORD"]
    assert password["valueFrom"]["secretKeyRef"] == {"name": "redis-auth", "key": "pw"}
    assert "pw" not in " ".join(ambassador["args"]) and "--recursive" not in ambassador["args"]


def test_redis_renders_a_stream_keyed_by_a_field():
    redis = {"url": "redis://redis:6379/1", "stream": "renders", "nameField": "file"}
    values = {"source": {"type": "redis", "redis": redis}}
    ambassador, _ = ambassador_of(values)
    spec = resolve(parsed(ambassador).source, options_of(parsed(ambassador)))
    assert spec.kind == "redis-stream" and spec.config["REDIS_STREAM"] == "renders"
    assert spec.config["REDIS_NAME_FIELD"] == "file" and spec.config["REDIS_URL"].endswith("/1")


def test_nats_renders_a_jetstream_source_with_credentials_from_a_secret():
    nats = {"url": "nats://nats.messaging:4222", "stream": "RENDERS", "subject": "renders.>",
            "name": "subject", "credentialsSecret": "nats-auth"}  # fmt: skip
    values = {"source": {"type": "nats", "nats": nats}, "ambassador": {"recursive": True}}
    ambassador, _ = ambassador_of(values)
    spec = resolve(parsed(ambassador).source, options_of(parsed(ambassador)))
    assert spec.kind == "nats" and spec.config["NATS_STREAM"] == "RENDERS"
    assert (spec.config["NATS_SUBJECT"], spec.config["NATS_NAME"]) == ("renders.>", "subject")
    assert spec.config["NATS_URL"] == "nats://nats.messaging:4222"
    assert ambassador["envFrom"] == [{"secretRef": {"name": "nats-auth"}}]
    assert "--recursive" not in ambassador["args"]  # (a folder's and a bucket's only)
    every, _ = ambassador_of({"source": {"type": "nats", "nats": {"stream": "RENDERS"}}})
    plain = resolve(parsed(every).source, options_of(parsed(every)))
    assert plain.config["NATS_NAME"] is None and plain.config["REMOVALS"] == "retention"


def test_kafka_renders_a_topic_source_with_credentials_from_a_secret():
    kafka = {"brokers": "kafka-0.kafka:9092,kafka-1.kafka:9092", "topic": "renders",
             "name": "key", "credentialsSecret": "kafka-sasl"}  # fmt: skip
    ambassador, _ = ambassador_of({"source": {"type": "kafka", "kafka": kafka}})
    spec = resolve(parsed(ambassador).source, options_of(parsed(ambassador)))
    assert spec.kind == "kafka" and spec.config["KAFKA_TOPIC"] == "renders"
    assert spec.config["KAFKA_BROKERS"] == "kafka-0.kafka:9092,kafka-1.kafka:9092"
    assert spec.config["KAFKA_NAME"] == "key" and spec.config["REMOVALS"] is None
    assert ambassador["envFrom"] == [{"secretRef": {"name": "kafka-sasl"}}]
    every, _ = ambassador_of({"source": {"type": "kafka", "kafka": {"topic": "renders"}}})
    plain = resolve(parsed(every).source, options_of(parsed(every)))
    assert plain.config["KAFKA_NAME"] is None and plain.config["REMOVALS"] == "retention"
    assert "envFrom" not in every


def test_gcs_renders_a_bucket_source_with_a_key_file_from_a_secret_or_none():
    gcs = {"bucket": "media-in", "prefix": "videos/", "pollIntervalSeconds": 30,
           "credentialsSecret": "gcs-key", "credentialsKey": "sa.json"}  # fmt: skip
    ambassador, docs = ambassador_of({"source": {"type": "gcs", "gcs": gcs},
                                      "ambassador": {"recursive": True}})  # fmt: skip
    args = parsed(ambassador)
    spec = resolve(args.source, options_of(args))
    assert spec.kind == "gcs" and spec.config["GCS_BUCKET"] == "media-in"
    assert spec.config["GCS_PREFIX"] == "videos/" and spec.config["RECURSIVE"] is True
    assert spec.config["POLL_INTERVAL"] == 30
    path = "/var/run/secrets/workqueue/gcs/sa.json"
    assert ambassador["env"] == [{"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": path}]
    assert {"name": "gcs-key", "mountPath": "/var/run/secrets/workqueue/gcs",
            "readOnly": True} in ambassador["volumeMounts"]  # fmt: skip
    pod = by_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "gcs-key")
    assert volume["secret"]["secretName"] == "gcs-key"
    assert volume["secret"]["items"] == [{"key": "sa.json", "path": "sa.json"}]
    manager = containers(docs)[0]["manager"]
    assert "gcs-key" not in str(manager)  # the key reaches the ambassador alone
    bare, _ = ambassador_of({"source": {"type": "gcs", "gcs": {"bucket": "media-in"}}})
    assert "env" not in bare and "gcs-key" not in str(bare)  # Workload Identity: nothing to mount


def test_azure_renders_a_container_source_with_credentials_from_a_secret():
    azure = {"account": "mediastore", "container": "videos-in", "prefix": "new/",
             "credentialsSecret": "azure-storage"}  # fmt: skip
    ambassador, _ = ambassador_of({"source": {"type": "azure", "azure": azure}})
    args = parsed(ambassador)
    spec = resolve(args.source, options_of(args))
    assert spec.kind == "azure" and spec.config["AZURE_ACCOUNT"] == "mediastore"
    assert (spec.config["AZURE_CONTAINER"], spec.config["AZURE_PREFIX"]) == ("videos-in", "new/")
    assert ambassador["envFrom"] == [{"secretRef": {"name": "azure-storage"}}]


def test_azure_workload_identity_is_the_ambassadors_alone_and_no_secret():
    """On AKS: the pod joins workload identity (the webhook's label), the service account names
    the managed identity, the manager container is skipped, and nothing is read from a Secret."""
    azure = {"account": "mediastore", "container": "videos-in", "workloadIdentity": True}
    client_id = "00000000-1111-2222-3333-444444444444"
    values = {
        "source": {"type": "azure", "azure": azure},
        "serviceAccount": {"annotations": {"azure.workload.identity/client-id": client_id}},
    }
    ambassador, docs = ambassador_of(values)
    assert "envFrom" not in ambassador and "env" not in ambassador
    template = by_kind(docs, "Deployment")[0]["spec"]["template"]
    assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    assert template["metadata"]["annotations"] == {
        "azure.workload.identity/skip-containers": "manager"
    }
    selector = by_kind(docs, "Deployment")[0]["spec"]["selector"]["matchLabels"]
    assert "azure.workload.identity/use" not in selector  # a label of the pod, not its identity
    account = by_kind(docs, "ServiceAccount")[0]
    assert account["metadata"]["annotations"]["azure.workload.identity/client-id"] == client_id
    keyed, keyed_docs = ambassador_of(
        {"source": {"type": "azure", "azure": {**azure, "workloadIdentity": False,
                                                "credentialsSecret": "azure-storage"}}}
    )  # fmt: skip
    keyed_template = by_kind(keyed_docs, "Deployment")[0]["spec"]["template"]
    assert "azure.workload.identity/use" not in keyed_template["metadata"]["labels"]


@pytest.mark.parametrize(
    ("azure", "says"),
    [
        ({"workloadIdentity": True}, "set serviceAccount.annotations.azure"),
        ({}, "source.type azure needs credentials: source.azure.workloadIdentity=true"),
    ],
    ids=["identity-without-client-id", "no-credentials"],
)
def test_an_azure_source_without_a_way_to_authenticate_fails_to_render(azure, says):
    from helm_python.errors import HelmRenderError

    source = {"type": "azure", "azure": {"account": "acct", "container": "videos", **azure}}
    with pytest.raises(HelmRenderError) as refused:
        render({"source": source})
    assert says in str(refused.value)


@pytest.mark.parametrize(
    "values",
    [
        {"source": {"type": "ftp"}},
        {"source": {"type": "s3", "s3": {"bucket": ""}}},
        {"source": {"type": "s3", "s3": {"bucket": "ok-bucket", "accessKey": "AKIA..."}}},
        {"source": {"type": "redis", "redis": {"url": "redis://:secret@redis:6379/0", "set": "k"}}},
        {"source": {"type": "redis", "redis": {"url": "redis://redis:6379/0", "set": ""}}},
        {"source": {"type": "nats", "nats": {"stream": ""}}},
        {"source": {"type": "nats", "nats": {"url": "nats://me:pw@nats:4222", "stream": "S"}}},
        {"source": {"type": "kafka", "kafka": {"topic": ""}}},
        {"source": {"type": "kafka", "kafka": {"brokers": "me:pw@kafka:9092", "topic": "t"}}},
        {"source": {"type": "kafka", "kafka": {"brokers": "kafka:9092", "topic": "a topic"}}},
        {"source": {"type": "gcs", "gcs": {"bucket": ""}}},
        {"source": {"type": "gcs", "gcs": {"bucket": "ok-bucket", "keyJson": "{...}"}}},
        {"source": {"type": "azure", "azure": {"account": "acct", "container": ""}}},
        {
            "source": {
                "type": "azure",
                "azure": {"account": "acct", "container": "c1", "accountKey": "Eby8..."},
            }
        },  # fmt: skip
        {"source": {"type": "azure", "azure": {"account": "Bad_Acct", "container": "c1"}}},
    ],
    ids=[
        "unknown-type",
        "no-bucket",
        "keys-in-values",
        "password-in-url",
        "no-set",
        "no-stream",
        "nats-password-in-url",
        "no-topic",
        "kafka-password-in-brokers",
        "kafka-bad-topic",
        "no-gcs-bucket",
        "gcs-key-in-values",
        "no-container",
        "azure-key-in-values",
        "azure-bad-account",
    ],  # fmt: skip
)
def test_the_schema_refuses_bad_sources_and_credentials_in_clear(values):
    result = lint(str(CHART), values, strict=True)
    assert result["errors"], result
