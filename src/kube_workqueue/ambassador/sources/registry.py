"""Which source serves the items: one module per source type, found by the URL's scheme.

Burns' ambassador is where reuse happens: the same items API over an NFS folder, an object store
or Redis, and "only swap which ambassador you deploy". Here each source type is one module that
only lists and describes items; everything above it - the one published snapshot per ambassador
(`publication.py`), paging and `continue` tokens, `resourceVersion`, the watch stream, `?view=full`,
`/readyz`, OpenAPI, metrics - is the same code for all of them.

    folder path, file:///path   filesystem    (`--root DIR` is the same)
    s3://bucket/prefix/         s3            S3 and S3-compatible stores (MinIO, Ceph, R2)
    gs://bucket/prefix/         gcs           Google Cloud Storage   } over the object-store
    azblob://ACCT/CONTAINER/    azure_blob    Azure Blob Storage     } core `objects.py`
    redis://host:port/db?set=K  redis_set     the members of a Redis set (rediss:// with TLS)
    redis://…/db?stream=K       redis_stream  a Redis stream's records, over the log core
                                              `log_records.py`
    nats://host:4222/STREAM     nats_stream   a NATS JetStream stream's messages, over the same
                                              log core
    kafka://host:9092/TOPIC     kafka_topic   a Kafka topic's records, over the same log core

Each is one line of `BUILT_IN` (a `Registered`: its kind, module, schemes, the query key that
picks it among types of one scheme, its URL's form, and the environment variables its client
reads - credentials, which no worker inherits, and settings), and every help text and error
that lists the sources is made from those lines (`forms()`): a new scheme is its module, its
line and its test (`tests/architecture/test_credentials.py` fails for a variable read and not
declared).

A source type (`SourceType`) turns a URL and the common options into an app configuration - a
flat JSON-able dict, so the snapshot publisher (a process of its own) and every gunicorn worker
rebuild the same source from it - and from that configuration opens the live source and
describes one item for a worker. Third-party types register under the entry-point group
`workqueue.sources` (name = scheme, value = an object with the attributes below); a built-in
scheme cannot be replaced.

What a type says of itself: `extra` (the pip extra its libraries come with: a missing one is
named in the error), `shown(config)` (how logs and the server's first line name the source).
Capabilities a type declares: `events` (changes pushed: file events, SQS notifications,
keyspace notifications - else, or as well, found by re-listing), `content_versions` (an item's
version follows its bytes: ETag, a content digest), `settles` (`--settle` applies),
`data_groups` (an item's data may say its group - a tenant - itself: a Redis hash's JSON, a log
record's fields; a file or an object has none, so group rules need `--group`). Caller's
duty: `check(config)` before serving, so a bad source is one line at start, not a 503 later.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol
from urllib.parse import parse_qs, urlsplit

ENTRY_POINT_GROUP = "workqueue.sources"


class Registered(NamedTuple):
    kind: str  # the SOURCE_TYPE of its app configurations
    module: str  # the module of this package whose SOURCE_TYPE it is
    schemes: tuple[str, ...]
    form: str  # its URL, as help texts show it
    query_key: str = ""  # among types of one scheme, the one whose URL's query holds this key
    # the environment variables its client reads: credentials (never a worker's: see
    # `credential_variables`) and settings (an endpoint, a protocol: nothing to hide)
    credentials: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()


# What the cloud clients read (boto3, google-cloud-storage, `clouds.azure_client`): a source's
# and fetch-run-put's, one rule for both
AWS_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                   "AWS_SECURITY_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")  # fmt: skip
AWS_SETTINGS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_REGION",
                "AWS_PROFILE", "AWS_EC2_METADATA_DISABLED")  # fmt: skip
GCP_CREDENTIALS = ("GOOGLE_APPLICATION_CREDENTIALS",)
GCP_SETTINGS = ("STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")
AZURE_CREDENTIALS = ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY",
                     "AZURE_STORAGE_SAS_TOKEN", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID",
                     "AZURE_TENANT_ID")  # fmt: skip
AZURE_SETTINGS = ("AZURE_AUTHORITY_HOST",)
REDIS_CREDENTIALS = ("REDIS_PASSWORD",)

BUILT_IN = (
    Registered("filesystem", "filesystem", ("file",), "a folder, file:///path"),
    Registered(
        "s3",
        "s3",
        ("s3",),
        "s3://bucket/prefix/",
        credentials=AWS_CREDENTIALS,
        settings=AWS_SETTINGS,
    ),  # fmt: skip
    Registered(
        "gcs",
        "gcs",
        ("gs",),
        "gs://bucket/prefix/",
        credentials=GCP_CREDENTIALS,
        settings=GCP_SETTINGS,
    ),  # fmt: skip
    Registered(
        "azure",
        "azure_blob",
        ("azblob",),
        "azblob://account/container/prefix/",
        credentials=AZURE_CREDENTIALS,
        settings=AZURE_SETTINGS,
    ),  # fmt: skip
    Registered(
        "redis",
        "redis_set",
        ("redis", "rediss"),
        "redis://host:port/db?set=KEY (or zset=KEY)[&data=HASH]",
        credentials=REDIS_CREDENTIALS,
    ),  # fmt: skip
    Registered(
        "redis-stream",
        "redis_stream",
        ("redis", "rediss"),
        "redis://host:port/db?stream=KEY[&name=FIELD]",
        query_key="stream",
        credentials=REDIS_CREDENTIALS,
    ),  # fmt: skip
    Registered(
        "nats",
        "nats_stream",
        ("nats",),
        "nats://host:4222/STREAM[?subject=F][&name=KEY]",
        credentials=("NATS_USER", "NATS_PASSWORD", "NATS_TOKEN"),
    ),  # fmt: skip
    Registered(
        "kafka",
        "kafka_topic",
        ("kafka",),
        "kafka://host:9092/TOPIC[?name=key|FIELD]",
        credentials=("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"),
        settings=("KAFKA_SASL_MECHANISM", "KAFKA_SECURITY_PROTOCOL"),
    ),  # fmt: skip
)


def credential_variables() -> frozenset[str]:
    """Every credential a built-in source's client reads from the environment (each line's
    `credentials`, the cloud clients' among them): the list no local worker inherits - the
    manager withholds them, and `--worker-env NAME` passes one on by name
    (`manager.backends.local.spawn`). A third-party type's client is its author's to keep out
    of workers' way."""
    return frozenset(name for entry in BUILT_IN for name in entry.credentials)


def forms(*, third_party: bool = True) -> str:
    """Every source a URL may name, as help texts and errors list them (third-party types by
    their scheme; `third_party=False`: the built-in ones alone, without reading the installed
    distributions' entry points - a command's parser is built at every start)."""
    built_in = [entry.form for entry in BUILT_IN]
    if not third_party:
        return ", ".join(built_in)
    others = sorted({e.name for e in _third_party()} - _schemes())
    return ", ".join(built_in + [f"{scheme}://…" for scheme in others])


def _third_party():
    """The installed distributions' source types (their entry points), read when asked:
    importing `importlib.metadata` costs a command tens of ms of CPU (the `email` package with
    it), and a built-in source never needs it."""
    from importlib.metadata import entry_points

    return entry_points(group=ENTRY_POINT_GROUP)


def _schemes() -> set[str]:
    return {scheme for entry in BUILT_IN for scheme in entry.schemes}


def _built_in(kind_or_scheme: str, query: str | None) -> Registered | None:
    """The built-in type of a configuration's kind, or of a URL's scheme with its query (not
    None: "redis" is a kind and a scheme, and its URL's `?stream=` names the other type)."""
    if query is None:
        for entry in BUILT_IN:
            if entry.kind == kind_or_scheme:
                return entry
    keys = set(parse_qs(query or "", keep_blank_values=True))
    by_scheme = [entry for entry in BUILT_IN if kind_or_scheme in entry.schemes]
    for entry in by_scheme:
        if entry.query_key and entry.query_key in keys:
            return entry
    return next((entry for entry in by_scheme if not entry.query_key), None)


class SourceConfigError(ValueError):
    """A source that cannot be served as given: one line for the user (exit 2)."""


class SourceType(Protocol):
    kind: str  # the SOURCE_TYPE of an app configuration: "filesystem", "s3", "redis", ...
    extra: str  # the distribution's extra that installs its libraries ("" for none)
    secret_variables: str  # where its password comes from instead of the URL ("" for none)
    events: bool
    content_versions: bool
    settles: bool
    data_groups: bool

    def shown(self, config: dict) -> str:
        """The source as a person would name it in a log line: never a secret of its URL."""

    def config_from_url(self, url: str, options: Mapping[str, Any]) -> dict:
        """The app configuration of `url` with the common options (SUFFIXES, RECURSIVE,
        SETTLE, POLL_INTERVAL, ...); raises SourceConfigError for a malformed URL."""

    def check(self, config: dict) -> None:
        """Reach the source once (the bucket exists, credentials work, the server answers);
        raises SourceConfigError saying what is wrong."""

    def open(self, config: dict):
        """The live source (`base.Source`), not started."""

    def describe(self, config: dict, name: str, meta: str | None) -> dict | None:
        """An item's data for a worker of the shared snapshot: from `meta`, the string the
        live source published for `name` (sources whose listing carries it), or read afresh
        when `meta` is None (the file system stats the file)."""


class SourceSpec(NamedTuple):
    kind: str
    config: dict


def scheme_of(url: str) -> str:
    """The URL's scheme; a plain path (no `scheme://`) is a folder: "file"."""
    if "://" not in url:
        return "file"
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:  # `http://[::1`: still its scheme; `resolve` says what is wrong
        return url.split("://", 1)[0].lower()


def source_type(kind_or_scheme: str, query: str | None = None) -> SourceType:
    """The source type of a configuration's SOURCE_TYPE ("redis-stream"), or of a scheme
    ("s3"); with the URL's query, of that URL (`?stream=` picks the Redis stream among the
    `redis://` types)."""
    entry = _built_in(kind_or_scheme, query)
    if entry is not None:
        return importlib.import_module(f"{__package__}.{entry.module}").SOURCE_TYPE
    for found in _third_party():
        if found.name == kind_or_scheme:
            return found.load()
    raise SourceConfigError(f"unknown source scheme {kind_or_scheme!r}: use {forms()}")


def resolve(url: str, options: Mapping[str, Any] | None = None) -> SourceSpec:
    """The source type and app configuration of `url` (see the module docstring)."""
    if not url or not url.strip():
        raise SourceConfigError("the source is empty: give a folder path or a URL")
    try:
        query = urlsplit(url).query if "://" in url else ""
    except ValueError as exc:  # (the URL itself is not repeated: it may hold a secret)
        raise SourceConfigError(f"the source is not a URL: {exc}") from None
    kind = source_type(scheme_of(url), query)
    config = kind.config_from_url(url, dict(options or {}))
    config["SOURCE_TYPE"] = kind.kind
    return SourceSpec(kind.kind, config)


def typed_secret(url: str, *, instead: str = "") -> str | None:
    """Why `url`, typed on a command line, must not be taken - it holds a password or a token
    (`user:PASSWORD@`, a lone `TOKEN@` for NATS, `?password=`), which every user of the
    machine sees in `ps` for the process's whole life - or None. `instead`: where else the
    whole URL may be given (`WORKQUEUE_SOURCE`)."""
    from urllib.parse import parse_qsl

    scheme = scheme_of(url)
    if scheme == "file":
        return None
    from kube_workqueue.safelog.redaction import SLASHED_USERINFO

    try:
        parts = urlsplit(url.strip())
        query = {k.lower() for k, _ in parse_qsl(parts.query, keep_blank_values=True)}
        secret = parts.password is not None or bool(query & {"password", "token"})
        secret = secret or bool(SLASHED_USERINFO.match(url.strip()))  # (a key with a `/`)
        if scheme == "nats" and parts.username and parts.password is None:
            secret = True  # nats://TOKEN@host: a token
    except ValueError:
        return None  # not a URL: the source's own parser says so
    if not secret:
        return None
    try:
        variables = source_type(scheme).secret_variables
    except (SourceConfigError, ImportError):
        variables = ""
    where = f"give it in {variables}" if variables else "leave it out"
    if instead:
        where += f", or the whole URL in {instead}"
    return ("a password in the source URL is visible to every user of this machine (ps) and "
            f"kept in shell history: {where}")  # fmt: skip


def kind_of(config: Mapping[str, Any]) -> str:
    """The SOURCE_TYPE of an app configuration (one with only ROOT is a folder's)."""
    return str(config.get("SOURCE_TYPE") or "filesystem")


def open_source(config: dict):
    """The live source an app configuration describes, not started."""
    return source_type(kind_of(config)).open(config)


# the options only a folder takes: given for a log or a Redis set, they would mislead (an S3
# prefix takes RECURSIVE too)
FOLDER_ONLY = ("SETTLE", "VERSION_BY", "FORCE_POLLING", "RECURSIVE")
S3_ONLY = ("S3_ENDPOINT_URL", "SQS_QUEUE_URL")  # the options only an S3 source takes


def neither_folder_nor_s3(kind: str, options: Mapping[str, Any]) -> None:
    """Refuse, for a source of `kind` that is neither, what only a folder or S3 takes (an
    `--endpoint-url` given for Kafka was taken without a word)."""
    not_for(kind, options, FOLDER_ONLY)
    not_for(kind, options, S3_ONLY, only="S3 sources")


def not_for(kind: str, options: Mapping[str, Any], folder_only: tuple[str, ...],
            *, only: str = "folder sources") -> None:  # fmt: skip
    """Refuse options (given, not defaulted: None) that apply to `only` for a source of
    `kind`: given and ignored, they would mislead."""
    for flag in folder_only:
        if options.get(flag) is not None:
            name = "--" + flag.lower().replace("_", "-")
            if flag == "S3_ENDPOINT_URL":
                name = "--endpoint-url"
            raise SourceConfigError(f"{name} applies to {only} only, not to {kind}")
