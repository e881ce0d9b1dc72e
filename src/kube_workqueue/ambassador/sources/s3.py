"""Items are objects in an S3 bucket, or in any store that speaks S3 (MinIO, Ceph, R2, GCS).

    workqueue ambassador --source s3://bucket/videos/ --suffix .mp4 [--recursive]
                         [--endpoint-url URL] [--sqs-queue-url URL] [--poll-interval 10s]

Configuration is boto3's own: the credentials chain (environment, shared files and profiles -
`AWS_PROFILE` -, web identity / IRSA, instance roles), the region, and the endpoint from
`AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3` (boto3 reads both) or `--endpoint-url`.

Names, the meta kept of each object and the item data are the object-store core's (objects.py):
a key is a name, never a path. Versions: an object's version is made from its ETag - an MD5 of
the bytes for a plain upload, so the same bytes copied again keep their version and new bytes
make a new one (a multipart upload's ETag also depends on its part size: the same bytes
uploaded with other parts are a new version).

Changes: a ListObjectsV2 listing every `--poll-interval` - one request per 1,000 objects, none
per object: 100 requests for 100,000 objects. With `--sqs-queue-url` (the bucket's event
notifications delivered to SQS; s3_events.py) changes are applied as they arrive and the full
listing runs every `--relist-interval` as the safety net.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from .listers import SourceUnreachable
from .objects import ObjectLister, ObjectStoreType, common_config, meta_of, split_bucket_url
from .registry import SourceConfigError

PAGE_SIZE = 1000  # ListObjectsV2's most keys per response
# Bucket names as S3 allows them (3-63 of a-z 0-9 . -), and the dotted names of older buckets.
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-_]{2,254}$")


def client(config: dict, service: str = "s3"):
    """A boto3 client with the standard configuration (see the module docstring); a few
    quick retries so that a store that is down is noticed in seconds, not minutes."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session()  # AWS_PROFILE and the rest as boto3 reads them
    endpoint = config.get("S3_ENDPOINT_URL") if service == "s3" else None
    return session.client(
        service,
        endpoint_url=endpoint or None,
        config=Config(
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30 if service == "s3" else 25,  # SQS long polls wait 20 s
        ),
    )


def split_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix/` - the prefix ends with `/` unless empty."""
    return split_bucket_url(url, BUCKET, "an S3 source is s3://bucket/prefix/")


class S3Lister(ObjectLister):
    """The `Lister` (listers.py) for one bucket and prefix."""

    scheme = "s3"
    tag_keys = ("etag", "etag")

    @staticmethod
    def located(config: dict) -> tuple[str, str]:
        return config["S3_BUCKET"], config.get("S3_PREFIX") or ""

    def __init__(self, config: dict) -> None:
        super().__init__(config)
        self.s3 = client(config)

    def list_all(self) -> Iterator[tuple[str, str]]:
        """(name, meta) of every item, page by page as the store answers, in its order (UTF-8
        binary: the listing's own, so nothing is sorted or held twice; packed_listing.py)."""
        from botocore.exceptions import BotoCoreError, ClientError

        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix}
        if not self.recursive:
            args["Delimiter"] = "/"
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(
                **args, PaginationConfig={"PageSize": PAGE_SIZE}
            ):
                for obj in page.get("Contents") or ():
                    name = self.name_of(obj["Key"])
                    if name is not None:
                        yield name, meta_of(obj["ETag"], obj["Size"], obj["LastModified"])
        except (BotoCoreError, ClientError) as exc:
            raise SourceUnreachable(describe_error(exc, self.where)) from None

    def head(self, name: str) -> str | None:
        """The meta of the object named `name` as the store has it now; None when gone."""
        from botocore.exceptions import ClientError

        try:
            obj = self.s3.head_object(Bucket=self.bucket, Key=self.prefix + name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return meta_of(obj["ETag"], obj["ContentLength"], obj["LastModified"])

    def changes(self, stop):
        queue_url = self.config.get("SQS_QUEUE_URL")
        if not queue_url:
            return None
        from .s3_events import notifications

        return notifications(self, client(self.config, "sqs"), queue_url, stop)


def describe_error(exc: Exception, where: str) -> str:
    """One line for what boto3 raised, naming the likely cause."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return f"{where}: no AWS credentials found (environment, profile, web identity or role)"
    if isinstance(exc, EndpointConnectionError):
        return f"{where}: cannot reach the endpoint {exc.kwargs.get('endpoint_url', '')}".strip()
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), error.get("Message", "")
        if code == "NoSuchBucket":
            return f"{where}: the bucket does not exist"
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
            return f"{where}: access denied ({code}): check the credentials and the policy"
        return f"{where}: {code} {message}".strip()
    return f"{where}: {exc}"


class S3Type(ObjectStoreType):
    """The S3 source type of the registry (`registry.py`)."""

    kind = "s3"
    extra = "s3"
    secret_variables = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile, web identity)"
    events = True  # with --sqs-queue-url; polling otherwise
    lister = S3Lister

    def config_from_url(self, url: str, options: dict) -> dict:
        config = common_config("s3", options, 10.0)
        bucket, prefix = split_url(url)
        endpoint = options.get("S3_ENDPOINT_URL")
        if endpoint and urlsplit(endpoint).scheme not in ("http", "https"):
            raise SourceConfigError(f"--endpoint-url must be an http(s) URL, not {endpoint!r}")
        for variable in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):  # boto3 reads them too
            value = os.environ.get(variable)
            if not endpoint and value and urlsplit(value).scheme not in ("http", "https"):
                raise SourceConfigError(f"{variable} must be an http(s) URL, not {value!r}")
        return {
            **config,
            "S3_BUCKET": bucket,
            "S3_PREFIX": prefix,
            "S3_ENDPOINT_URL": endpoint or None,
            "SQS_QUEUE_URL": options.get("SQS_QUEUE_URL") or None,
        }

    def check(self, config: dict) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        lister = S3Lister(config)
        try:
            lister.s3.list_objects_v2(Bucket=lister.bucket, Prefix=lister.prefix, MaxKeys=1)
            if config.get("SQS_QUEUE_URL"):
                client(config, "sqs").get_queue_attributes(
                    QueueUrl=config["SQS_QUEUE_URL"], AttributeNames=["QueueArn"]
                )
        except (BotoCoreError, ClientError) as exc:
            raise SourceConfigError(describe_error(exc, lister.where)) from None
        except ValueError as exc:  # botocore's own refusal of an endpoint or a region
            raise SourceConfigError(f"{lister.where}: {exc}") from None


SOURCE_TYPE = S3Type()
