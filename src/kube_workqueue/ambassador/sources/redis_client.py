"""A client of a Redis source's server, made one way for every Redis source (a set's lister, a
stream's): the URL's address and database, the password from the URL or `REDIS_PASSWORD` (out
of process listings and Helm values), timeouts on connecting and on every answer; and the one
look at start at what the source's key holds (`key_type`), its failures said in one line."""

from __future__ import annotations

import os


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
