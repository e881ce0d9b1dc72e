"""A client of a NATS source's server, made one way for the lister and the start-up check:
the URL's address, credentials from the URL or the environment (NATS_USER / NATS_PASSWORD,
NATS_TOKEN: out of process listings and Helm values), a bounded connect; the one look at start
at the stream and the subject filter (`check`), its failures said in one line; and the URL's
form (`config_from_url`) with the subject grammar it is checked against.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .listers import SourceUnreachable, intervals
from .log_records import name_field, removals

CONNECT_SECONDS = 5.0


def literal_prefix(subject_filter: str) -> int:
    """How many leading tokens of `subject_filter` are literal (no `*`, `>`)."""
    count = 0
    for token in subject_filter.split(".") if subject_filter else ():
        if token in ("*", ">"):
            break
        count += 1
    return count


def overlaps(a: str, b: str) -> bool:
    """Whether two subjects (wildcards allowed) can match one subject."""
    left, right = a.split("."), b.split(".")
    for x, y in zip(left, right, strict=False):
        if ">" in (x, y):
            return True
        if x != y and "*" not in (x, y):
            return False
    return len(left) == len(right)


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def connect(config: dict, on_dropped=None):
    """A client of the source's server. A user and password come from the URL or, better
    (out of process listings and Helm values), from NATS_USER / NATS_PASSWORD; a token from
    NATS_TOKEN. The client never reconnects by itself: a lost connection is a closed client,
    the feed ends (an outage, `listed.py` polls), and the next listing connects anew - one
    path back, the same after a blip as after a restart of the server. `on_dropped()` is told
    each message nats-py dropped for a slow consumer - which it reports through the error
    callback alone, and which an ordered consumer does not see as a gap (it counts the
    message as delivered when it arrives, before it is queued): the caller acts on it.
    Raises SourceUnreachable."""
    import nats
    from nats.errors import SlowConsumerError

    async def quiet(exc) -> None:  # nats-py logs every failed attempt with a traceback
        if isinstance(exc, SlowConsumerError) and on_dropped is not None:
            on_dropped()

    options: dict[str, Any] = {
        "servers": [config["NATS_URL"]],
        "connect_timeout": CONNECT_SECONDS,
        "error_cb": quiet,
        "allow_reconnect": False,
        "max_reconnect_attempts": 1,  # (0 or less: nats-py tries the first connection for ever)
    }
    if os.environ.get("NATS_USER"):
        options["user"] = os.environ["NATS_USER"]
        options["password"] = os.environ.get("NATS_PASSWORD", "")
    if os.environ.get("NATS_TOKEN"):
        options["token"] = os.environ["NATS_TOKEN"]
    try:
        return await nats.connect(**options)
    except Exception as exc:
        where = urlsplit(config["NATS_URL"])
        raise SourceUnreachable(
            f"cannot reach the NATS server at {where.hostname}:{where.port or 4222}: "
            f"{describe_error(exc)}"
        ) from None


def check(config: dict) -> None:
    """The server answers, the stream is there, and the subject filter can match what it
    holds: each a one-line SourceConfigError."""
    from .registry import SourceConfigError

    stream, subject_filter = config["NATS_STREAM"], config.get("NATS_SUBJECT") or ""
    where = f"nats stream {stream!r}"

    async def look() -> None:
        from nats.js.errors import NotFoundError

        client = await connect(config)
        try:
            try:
                info = await client.jetstream().stream_info(stream)
            except NotFoundError:
                raise SourceConfigError(f"{where}: no such stream (nats stream add {stream} "
                                        "makes it)") from None  # fmt: skip
            subjects = list(info.config.subjects or [])
            if subject_filter and subjects and \
                    not any(overlaps(subject_filter, s) for s in subjects):  # fmt: skip
                raise SourceConfigError(
                    f"{where}: the subject filter {subject_filter!r} matches none of the "
                    f"stream's subjects ({', '.join(subjects)})"
                )
        finally:
            await client.close()

    try:
        asyncio.run(asyncio.wait_for(look(), CONNECT_SECONDS * 3))
    except (SourceConfigError, ImportError):  # (a missing client: its extra is named above)
        raise
    except SourceUnreachable as exc:
        raise SourceConfigError(f"{where}: {exc}") from None
    except Exception as exc:  # a JetStream not enabled, an answer refused, a timeout
        raise SourceConfigError(f"{where}: {describe_error(exc)}") from None


def config_from_url(url: str, options: dict) -> dict:
    """`nats://[user:password@]host[:port]/STREAM[?subject=FILTER][&name=KEY]`."""
    from .registry import SourceConfigError

    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    stream = unquote(parts.path.strip("/"))
    unknown = sorted(set(query) - {"subject", "name"})
    if unknown or not parts.hostname or not stream or "/" in stream:
        raise SourceConfigError(
            "a NATS source is nats://host:4222/STREAM[?subject=FILTER][&name=subject|"
            f"subject.last|FIELD], not {url!r}"
        )
    try:
        _ = parts.port
    except ValueError:
        raise SourceConfigError(f"not a port number in {url!r}") from None
    if any(c in stream for c in " .*>\t"):
        raise SourceConfigError(f"{stream!r} cannot be a stream's name (no spaces, ., * or >)")
    try:
        keyed_by = name_field(query)
    except ValueError as exc:
        raise SourceConfigError(f"{exc}: {url!r}") from None
    subject_filter = (query.get("subject") or [""])[0]
    if subject_filter and not valid_subject(subject_filter):
        raise SourceConfigError(f"{subject_filter!r} is not a subject filter")
    return {
        "NATS_URL": parts._replace(path="", query="", fragment="").geturl(),
        "NATS_STREAM": stream,
        "NATS_SUBJECT": subject_filter or None,
        "NATS_NAME": keyed_by,
        "REMOVALS": removals(keyed_by),
        "SUFFIXES": [],  # (a message is an item whatever its name ends with)
        **intervals(options, 2.0),
    }


def valid_subject(subject: str) -> bool:
    tokens = subject.split(".")
    return (
        all(t and " " not in t for t in tokens)
        and ">" not in tokens[:-1]
        and all(t in ("*", ">") or ("*" not in t and ">" not in t) for t in tokens)
    )
