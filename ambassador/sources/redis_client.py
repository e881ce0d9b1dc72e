"""A client of a Redis source's server, made one way for every Redis source (a set's lister, a
stream's): the URL's address and database, the password from the URL or `REDIS_PASSWORD` (out
of process listings and Helm values), timeouts on connecting and on every answer."""

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
