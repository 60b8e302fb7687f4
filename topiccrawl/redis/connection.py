"""The Redis client of a crawl, its key layout, one-line connection errors, and the Lua loader."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from urllib.parse import urlsplit

from topiccrawl.crawl.errors import redact  # the masking of every URL in messages
from topiccrawl.crawl.settings import ConfigError

#: key suffixes under ``topiccrawl:<crawl_id>:`` (docs/deploy.md, "Redis settings")
KEYS = ("requests", "requests:data", "requests:seq", "leases", "leases:owner", "done", "dupefilter",
        "stats", "graph", "meta")


class RedisStoreError(ConfigError):
    """Redis unreachable, a wrong password, or a URL that is not redis:// or rediss:// (one line)."""


def crawl_keys(crawl_id: str) -> dict[str, str]:
    """``{"requests": "topiccrawl:<crawl_id>:requests", ...}``."""
    return {name: f"topiccrawl:{crawl_id}:{name}" for name in KEYS}


def client_for(url: str, timeout: float = 10.0):
    """A ``redis.Redis`` client for ``url`` (redis://[:password@]host:port/db, rediss:// for TLS,
    unix://path), not yet connected: it connects at its first command."""
    import redis

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked
    except ValueError as exc:  # "redis://host:notaport", "redis://[::1"
        raise RedisStoreError(f"TOPICCRAWL_REDIS_URL={redact(url)!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise RedisStoreError(f"TOPICCRAWL_REDIS_URL={redact(url)!r} must start with redis://, rediss:// or unix://")
    database = parts.path.strip("/")
    if parts.scheme != "unix" and database and not (database.isascii() and database.isdigit()):
        # redis-py reads a path it cannot parse as database 0: another crawl's database, maybe
        raise RedisStoreError(f"TOPICCRAWL_REDIS_URL={redact(url)!r}: the database after the port must be a number "
                              "(redis://host:6379/0)")
    try:
        return redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout,
                                    health_check_interval=30, decode_responses=True)
    except (ValueError, TypeError) as exc:  # an option of the query redis-py cannot read (?socket_timeout=abc)
        raise RedisStoreError(f"TOPICCRAWL_REDIS_URL={redact(url)!r} is not a valid URL: {exc}") from None


def connect(url: str, timeout: float = 10.0):
    """:func:`client_for` ``url``, checked with PING; :class:`RedisStoreError` when that fails."""
    import redis

    client = client_for(url, timeout)  # a malformed URL is said to be one
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        raise RedisStoreError(f"Redis at {redact(url)} refused the password: {exc}") from None
    except redis.ResponseError as exc:  # NOAUTH: the server wants a password the URL lacks
        raise RedisStoreError(f"Redis at {redact(url)} answered: {exc}") from None
    except TypeError as exc:  # an option of the query this scheme does not take (?ssl_cert_reqs= on redis://)
        raise RedisStoreError(f"TOPICCRAWL_REDIS_URL={redact(url)!r} is not a valid URL: {exc}") from None
    except (redis.RedisError, OSError, ValueError) as exc:
        raise RedisStoreError(f"cannot reach Redis at {redact(url)}: {exc}") from None
    return client


def check_redis(url: str) -> None:
    """Raise :class:`RedisStoreError` unless ``url`` answers PING (the crawl command's pre-flight
    check, so ``scrapy crawl`` stops with one line before the engine starts)."""
    connect(url, timeout=5.0).close()


@cache
def lua_source(name: str) -> str:
    """The text of ``topiccrawl/redis/lua/<name>`` (read from the installed package: a checkout,
    a wheel or a Scrapyd egg)."""
    return (files("topiccrawl.redis") / "lua" / name).read_text(encoding="utf-8")


def load_script(client, *names: str):
    """Register the Lua script made of the files ``names`` of ``topiccrawl/redis/lua/``, joined in
    that order with newlines: libraries first (each names its keys and defines ``local``
    functions that the files after it use; its first line says which files it must follow), the
    script's own file last. One script, one ``EVALSHA``; returns redis-py's ``Script``."""
    return client.register_script("\n".join(lua_source(name) for name in names))
