"""The DWDBRM UCB1 bandit (Algorithm 3, eq. 11) with its statistics in Redis, shared by processes.

Keys (``topiccrawl:<crawl_id>:`` + name):

``bandit``      HASH ``operators`` (JSON list, set by the first process), ``plays:<op>`` (n_op),
                ``totals:<op>`` (Σ rewards, ``%.17g``: exact doubles), ``n`` (Σ n_op),
                ``dropped:<op>`` (reason)
``bandit:log``  LIST of JSON iteration records; record i is iteration i and holds the plays and
                totals *before* its update, so its UCB scores (the ones the choice was made on)
                are recomputed exactly by :class:`~topiccrawl.discovery.dwdbrm.UCB1Bandit`

An update is one Lua script, ``lua/bandit_update.lua`` (read the snapshot, n_op += 1,
total_op += reward, n += 1, append the record), so concurrent updates never lose a play.
:meth:`select` and the scores are the memory bandit's own code run on a snapshot of the hash, so
the choice is the memory implementation's on the same statistics. :class:`RedisBandit` has
UCB1Bandit's interface; the discovery spiders use it under TOPICCRAWL_STORE=redis through
:mod:`topiccrawl.redis.discovery` (docs/dwdbrm.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from topiccrawl.crawl.settings import ConfigError
from topiccrawl.discovery.bandit import IterationRecord, UCB1Bandit
from topiccrawl.discovery.pages import OPERATORS, DWDBRMError
from topiccrawl.redis.connection import load_script


class RedisBandit:
    """UCB1Bandit's interface (``operators``, ``plays``, ``totals``, ``dropped``, ``active``,
    ``drop``, ``mean``, ``scores``, ``select``, ``update``, ``log``, ``state``) over Redis.

    ``prefix`` is the crawl's key prefix (``topiccrawl:<crawl_id>:``). Every process of a crawl
    must name the same operators (first one wins; others get a one-line :class:`ConfigError`).
    """

    def __init__(self, client, prefix: str, operators: Sequence[str] = OPERATORS) -> None:
        UCB1Bandit(operators)  # same checks (distinct, non-empty)
        self.r, self.key, self.log_key = client, prefix + "bandit", prefix + "bandit:log"
        self.operators = tuple(operators)
        mine = json.dumps(list(self.operators))
        self.r.hsetnx(self.key, "operators", mine)
        theirs = self.r.hget(self.key, "operators")
        if theirs != mine:
            raise ConfigError(f"the shared bandit {self.key} has operators {theirs}, not {mine}")
        self._update = load_script(client, "bandit_update.lua")  # KEYS: bandit, bandit:log

    @classmethod
    def for_backend(cls, client, prefix: str, backend, operators: Sequence[str] = OPERATORS) -> RedisBandit:
        """As :meth:`UCB1Bandit.for_backend`: the operators ``backend`` cannot serve are dropped."""
        bandit = cls(client, prefix, operators)
        for op in operators:
            if op != "FC" and op not in backend.capabilities:
                bandit.drop(op, f"the {backend.name} search backend cannot serve {op}")
        return bandit

    # -- the statistics ---------------------------------------------------------------------------
    def snapshot(self) -> UCB1Bandit:
        """The shared statistics now, as a memory bandit (without the log)."""
        h = self.r.hgetall(self.key)
        return UCB1Bandit.from_state({
            "operators": list(self.operators), "log": [],
            "plays": {op: int(h.get(f"plays:{op}", 0)) for op in self.operators},
            "totals": {op: float(h.get(f"totals:{op}", 0.0)) for op in self.operators},
            "dropped": {op: h[f"dropped:{op}"] for op in self.operators if f"dropped:{op}" in h}})

    @property
    def plays(self) -> dict[str, int]:
        return self.snapshot().plays

    @property
    def totals(self) -> dict[str, float]:
        return self.snapshot().totals

    @property
    def dropped(self) -> dict[str, str]:
        return self.snapshot().dropped

    @property
    def active(self) -> list[str]:
        return self.snapshot().active

    @property
    def n(self) -> int:
        """Total plays (the ``n`` of eq. 11), kept as its own counter."""
        return int(self.r.hget(self.key, "n") or 0)

    def _known(self, op: str) -> None:
        if op not in self.operators:
            raise DWDBRMError(f"unknown operator {op!r} (known: {', '.join(self.operators)})")

    def drop(self, op: str, reason: str) -> None:
        self._known(op)
        self.r.hset(self.key, f"dropped:{op}", reason)

    def mean(self, op: str) -> float:
        return self.snapshot().mean(op)

    def scores(self) -> dict[str, float]:
        return self.snapshot().scores()

    def select(self) -> str:
        """UCB1 (eq. 11) on the shared statistics: the memory bandit's choice on the snapshot."""
        return self.snapshot().select()

    def update(self, op: str, reward: float, seeds: Sequence[str] = (),
               new_pages: Sequence[str] = ()) -> IterationRecord:
        """Count one play of ``op`` with ``reward``, atomically for all processes; the record's
        scores are those before the update."""
        self._known(op)
        snap = self.snapshot()
        if op in snap.dropped:
            raise DWDBRMError(f"operator {op} was dropped: {snap.dropped[op]}")
        if not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise DWDBRMError(f"reward must be a finite number, got {reward!r}")
        raw = self._update(keys=[self.key, self.log_key],
                           args=[op, repr(float(reward)), json.dumps(list(seeds)), json.dumps(list(new_pages))])
        return self._record(raw, snap.dropped)

    def _record(self, raw: str, dropped: dict[str, str]) -> IterationRecord:
        d = json.loads(raw)
        before = UCB1Bandit.from_state({"operators": list(self.operators), "plays": d.pop("plays"),
                                        "totals": d.pop("totals"), "dropped": dropped, "log": []})
        return IterationRecord(**d, scores=before.scores())

    @property
    def log(self) -> list[IterationRecord]:
        dropped = self.dropped
        return [self._record(raw, dropped) for raw in self.r.lrange(self.log_key, 0, -1)]

    def state(self) -> dict:
        """The memory bandit's state (``UCB1Bandit.from_state`` restores it in one process)."""
        snap = self.snapshot()
        snap.log = self.log
        return snap.state()
