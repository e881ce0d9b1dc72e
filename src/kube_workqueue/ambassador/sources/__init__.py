"""Where items come from: one module per source type behind one registry (registry.py).

`Source` is the interface (base.py); the registry turns a source URL into a source type and
opens it. The modules:

  filesystem.py       a folder: its scan, file events and settling (folder_refresh.py keeps
                      it current: events, polling, the settle ticks)
  listed.py           a source found by listing a remote store, diffed and watched; its
                      listing held packed as two blobs (packed_listing.py), its delta as
                      the publisher writes it whole or a version's changes (delta_format.py)
  listers.py          what a listed source asks of its store (`Lister`) and what a lister
                      may also be (resumes, holds a backlog or a connection)
  objects.py          the object-store core: which keys are items, the meta kept of each
                      object, versions from its MD5, the item data
  s3.py               an S3 bucket's keys, with S3 notifications through SQS (s3_events.py),
                      over the object-store core
  gcs.py              a Google Cloud Storage bucket's objects, over the object-store core
  azure_blob.py       an Azure Blob Storage container's blobs, over the object-store core
  redis_set.py        a Redis set's members, with keyspace notifications
  redis_client.py     a client of a Redis source's server (password, timeouts)
  redis_stream.py     a Redis stream's records (XRANGE, XREAD BLOCK), over the log core
  nats_stream.py      a NATS JetStream stream's messages (an ordered consumer's feed), over
                      the log core
  nats_listing.py     a stream's listing, pulled and held to the server's count; what a
                      message is to the log core
  nats_client.py      a client of a NATS source's server; the URL, the start-up check
  kafka_topic.py      a Kafka topic's records (assigned partitions, never a group), over the
                      log core
  kafka_client.py     a client of a Kafka source's brokers; the URL, the start-up check, the
                      topic's id; what a record is to the log core
  log_records.py      the log core: records as items, keyed or every one, named within the
                      log's identity, and the backlog
  log_lives.py        a log's identity, and what is said when it starts over
  items.py            what every source's item data shares (content types, RFC 3339 times)
"""

from .base import Source
from .filesystem import FilesystemSource
from .registry import SourceConfigError, SourceSpec, open_source, resolve, source_type

__all__ = [
    "FilesystemSource",
    "Source",
    "SourceConfigError",
    "SourceSpec",
    "open_source",
    "resolve",
    "source_type",
]
