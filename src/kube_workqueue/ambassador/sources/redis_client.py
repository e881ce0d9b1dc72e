"""A client of a Redis source's server, made one way for every Redis source (a set's lister, a
stream's): the URL's address and database, the password from the URL or `REDIS_PASSWORD` (out
of process listings and Helm values), timeouts on connecting and on every answer; and the one
look at start at what the source's key holds (`key_type`), its failures said in one line; and
the URL's server and database, read one way for both (`address`)."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, urlsplit

from .registry import SourceConfigError

FORMS = "redis://host:port/db?set=KEY (or zset=KEY)[&data=HASH], or ?stream=KEY[&name=FIELD]"


def address(url: str, allowed: set[str], keys: tuple[str, ...]) -> tuple[str, int, dict, str]:
    """(the server's URL with the database as its path and no query, the database, the query,
    which of `keys` it gives) of a Redis source URL whose query holds only `allowed` keys and
    exactly one of `keys`; raises SourceConfigError naming both forms otherwise."""
    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    given = [k for k in keys if (query.get(k) or [""])[0]]
    if set(query) - allowed or len(given) != 1 or not parts.hostname:
        raise SourceConfigError(f"a Redis source is {FORMS}, not {url!r}")
    db = parts.path.strip("/") or "0"
    if not db.isdigit():
        raise SourceConfigError(f"the Redis database must be a number, not {db!r}")
    try:
        _ = parts.port
    except ValueError:
        raise SourceConfigError(f"not a port number in {url!r}") from None
    base = parts._replace(query="", fragment="", path=f"/{db}").geturl()
    return base, int(db), query, given[0]


def connect(config: dict, *, timeout: float = 5.0, decode: bool = True):
    """A client of the source's server; `decode=False`: answers as bytes (members are read
    so, and decoded one by one: one that is not UTF-8 is skipped, never the listing)."""
    import redis

    return redis.Redis.from_url(
        config["REDIS_URL"],
        password=os.environ.get("REDIS_PASSWORD") or None,  # one in the URL wins
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        decode_responses=decode,
    )


def key_type(client, config: dict, where: str) -> str:
    """What the source's key holds (`TYPE`: "set", "stream", "none", ...), asked once at start;
    a server that refuses or cannot be reached is a `SourceConfigError` (one line, exit 2)."""
    import redis

    from .registry import SourceConfigError

    key = config.get("REDIS_STREAM") or config["REDIS_SET"]
    try:
        return client.type(key)
    except redis.AuthenticationError:
        raise SourceConfigError(f"{where}: the password was refused") from None
    except redis.ResponseError as exc:  # reached, and refused: a wrong database number
        raise SourceConfigError(f"{where}: the server refused it: {exc}") from None
    except redis.RedisError as exc:
        hint = ""
        if config["REDIS_URL"].lower().startswith("rediss://") and \
                isinstance(exc, redis.TimeoutError):  # fmt: skip
            hint = " (rediss:// - does the server speak TLS? a plain one never answers "\
                "a TLS handshake: use redis://)"  # fmt: skip
        raise SourceConfigError(f"{where}: cannot reach the server: {exc}{hint}") from None
