"""S3 event notifications, delivered to an SQS queue, as batches of changes to the listing.

A large bucket re-listed every few seconds costs O(objects) per poll; notifications make it
O(changes). S3 delivers them at least once, possibly late and out of order, so nothing here
trusts an event's own account of the object: each key an event names is looked up with one
HeadObject and the answer is what the store holds *now* (there: its ETag, size and time; gone:
removed). That makes a duplicate a no-op (the same meta again - `ListedSource.apply` changes
nothing) and a stale event harmless (a late "created" for a deleted key finds it gone). A
message is deleted from the queue only after its changes are applied; one that fails is
delivered again after its visibility timeout. The periodic full listing stays the safety net
for a notification that never comes (a misconfigured rule, a purged queue).

Message bodies, as S3 sends them (keys URL-encoded, spaces as `+`):
    {"Records": [{"eventName": "ObjectCreated:Put",
                  "s3": {"bucket": {"name": "b"}, "object": {"key": "in/a+b.mp4", ...}}}]}
S3's `s3:TestEvent` (sent when a notification is configured), bodies from other buckets and
bodies that are not S3 events are deleted and ignored. An SNS envelope (S3 -> SNS -> SQS without
raw delivery) is unwrapped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from urllib.parse import unquote_plus

from .listers import Change, SourceUnreachable

log = logging.getLogger(__name__)

WAIT_SECONDS = 20  # SQS long polling: one request per 20 s when the bucket is quiet


def keys_of(body: str, bucket: str) -> list[str]:
    """The object keys an S3 notification body names, for `bucket` (decoded)."""
    try:
        message = json.loads(body)
        if isinstance(message, dict) and message.get("Type") == "Notification":
            message = json.loads(message.get("Message") or "{}")  # through SNS
    except ValueError:
        return []
    records = message.get("Records") if isinstance(message, dict) else None
    keys = []
    for record in records or ():
        try:
            s3 = record["s3"]
            if s3["bucket"]["name"] != bucket:
                continue
            keys.append(unquote_plus(s3["object"]["key"]))
        except (KeyError, TypeError):
            continue
    return keys


def notifications(lister, sqs, queue_url: str, stop: threading.Event) -> Iterator[list[Change]]:
    """Batches of (name, meta | None) from the queue, until `stop`. Raises SourceUnreachable
    when the queue cannot be read (the source then polls)."""
    from botocore.exceptions import BotoCoreError, ClientError

    while not stop.is_set():
        try:
            answer = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=WAIT_SECONDS
            )
        except (BotoCoreError, ClientError) as exc:
            raise SourceUnreachable(f"{queue_url}: {exc}") from None
        messages = answer.get("Messages") or []
        if not messages:
            continue
        names: dict[str, None] = {}
        for message in messages:
            for key in keys_of(message.get("Body") or "", lister.bucket):
                name = lister.name_of(key)
                if name is not None:
                    names[name] = None
        try:
            batch = [(name, lister.head(name)) for name in names]
        except (BotoCoreError, ClientError) as exc:
            log.warning("cannot look up notified objects (%s); they are delivered again", exc)
            continue  # not deleted: SQS delivers them again after the visibility timeout
        yield batch
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
        ]
        try:
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
        except (BotoCoreError, ClientError) as exc:  # delivered again: applying twice is a no-op
            log.warning("cannot delete notifications from %s: %s", queue_url, exc)
