"""Leases: the one lease mechanism of the Redis store, for the frontier's requests and the site
finder's tasks.

A worker leases a member (a request of :class:`~topiccrawl.redis.frontier.RedisFrontier`, a task
of :class:`~topiccrawl.redis.sites.RedisSiteTasks`) for ``lease_seconds``, renews its leases while
it works, and settles a member when done; a lease that expires (its worker died) is reclaimed:
the member goes back to its store's queue. A *lease set* is two keys, named by each store and
unchanged by this module: a ZSET member → expiry (Redis ``TIME``, seconds) and a HASH member →
worker (``leases`` / ``leases:owner`` of the frontier, ``sites:leases`` / ``sites:owner`` of the
site finder).

The operations are the Lua functions of ``lua/leases.lua`` (:data:`LIB`), run inside each store's
scripts so that the queue and the lease change in one atomic step; ``back(m)`` is the store's way
of putting a member back in its queue:

``lease``          ZADD the expiry, HSET the owner (a frontier pop or decision; a site task claim)
``lease_reclaim``  expired leases back to the queue, counted (every pop, claim and status)
``lease_renew``    the worker's own leases extended (:meth:`Leases.renew`, the same script for both)
``lease_release``  the worker's leases back to the queue, counted ``released`` (a clean stop)
``lease_settle``   a member is done: its lease ends, whoever holds it; whether it was the worker's
"""

from __future__ import annotations

from collections.abc import Iterable

from topiccrawl.redis.connection import load_script

#: the Lua lease library: first in every script that leases (see :func:`load_script`)
LIB = "leases.lua"


class Leases:
    """One lease set (``leases`` ZSET, ``owners`` HASH) as the stores' scripts see it."""

    def __init__(self, client, leases: str, owners: str) -> None:
        self.r, self.leases, self.owners = client, leases, owners
        self._renew = self.script("leases_renew.lua")  # KEYS: leases, owners

    def script(self, *names: str):
        """A script of the files ``names`` (``topiccrawl/redis/lua/``) after the lease library."""
        return load_script(self.r, LIB, *names)

    def renew(self, members: Iterable[str], *, worker: str, seconds: float) -> int:
        """Extend ``worker``'s leases of ``members`` to ``seconds`` from now (Redis time); the
        number still owned by ``worker`` (the others expired and went to someone else)."""
        members = list(members)
        if not members:
            return 0
        return int(self._renew(keys=[self.leases, self.owners], args=[seconds, worker, *members]))
