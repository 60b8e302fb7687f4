"""Fault injection for the offline web lab: which fault, if any, a request meets.

A fault spec is a comma-separated list of ``KIND[=VALUE]@RATE`` items plus the options ``seed=N``
and ``heal=N``, for example::

    latency=0.05-0.2@0.1,timeout@0.01,5xx@0.02,reset@0.01,truncate@0.01,badlength@0.01,drip@0.01,loop@0.01,seed=7

Kinds (VALUE in brackets is optional):

``latency=A-B`` (or ``latency=A``)
    delay the answer by a uniform A..B seconds; drawn independently of the other kinds.
``timeout[=S]``
    never answer; the connection is closed after S seconds (default 3600).
``5xx[=CODE/CODE...]``
    answer with a 5xx status (default one of 500/502/503/504, fixed per URL).
``reset``
    abort the connection with a TCP RST before any byte of the answer.
``truncate``
    send the headers with the true Content-Length, then half of the body, then close.
``badlength``
    declare a Content-Length of half the body, send the whole body, then close (the client
    silently keeps a cut body).
``drip[=S]``
    send the body in 16 pieces spread over S seconds (default 2).
``loop[=N]``
    a redirect cycle of N hops (default 2): ``302`` to the URL with ``_loop=1`` appended to its
    query, which answers ``302`` to ``_loop=2`` … and hop N-1 redirects back to the URL itself
    (``loop=1``: the URL redirects to itself). N above the crawler's redirect limit makes an
    endless chain for that crawler.

Each kind (and ``seed``, ``heal``) may appear once. The kinds other than ``latency`` are
mutually exclusive: their rates partition [0, 1) in the order above, so their sum must be at
most 1. The decision is a pure function of ``seed`` and the URL (BLAKE2b), so the same URL meets
the same fault on the same seed in every run. With ``heal=N`` a faulty URL gets its fault on its
first N requests only and is served normally from request N+1 on (so a crawler retrying N times
recovers); the default ``heal=0`` means never heal: retries meet the same fault again.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

#: exclusive kinds in the order their rates partition [0, 1)
KINDS = ("timeout", "5xx", "reset", "truncate", "badlength", "drip", "loop")
DEFAULT_VALUES = {"timeout": 3600.0, "drip": 2.0, "loop": 2.0}
#: the query parameter that numbers the hops of a ``loop`` fault
LOOP_PARAM = "_loop"
_LOOP_RE = re.compile(rf"[?&]{LOOP_PARAM}=([1-9][0-9]*)$")
DEFAULT_5XX = (500, 502, 503, 504)
_2_64 = float(1 << 64)


class FaultSpecError(ValueError):
    """A malformed fault spec (one-line message)."""


@dataclass(frozen=True)
class Fault:
    """What happens to one request: an extra delay and at most one exclusive fault."""

    delay: float = 0.0
    kind: str | None = None
    #: hang seconds (timeout), drip seconds (drip), status code (5xx) or cycle length (loop)
    value: float = 0.0


NO_FAULT = Fault()


@dataclass
class FaultPlan:
    rates: dict[str, float] = field(default_factory=dict)
    latency: tuple[float, float] = (0.0, 0.0)
    latency_rate: float = 0.0
    codes: tuple[int, ...] = DEFAULT_5XX
    values: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_VALUES))
    seed: int = 0
    heal: int = 0
    spec: str = ""

    def decide(self, url: str, attempt: int = 0) -> Fault:
        """The fault of the ``attempt``-th (0-based) request of ``url``."""
        if self.heal and attempt >= self.heal:
            return NO_FAULT
        h = hashlib.blake2b(f"{self.seed}\0{url}".encode("utf-8", "surrogatepass"),
                            digest_size=32).digest()
        u_kind, u_lat, u_delay, u_code = (int.from_bytes(h[i:i + 8], "big") / _2_64
                                          for i in (0, 8, 16, 24))
        delay = 0.0
        if u_lat < self.latency_rate:
            lo, hi = self.latency
            delay = lo + (hi - lo) * u_delay
        edge = 0.0
        for kind in KINDS:
            edge += self.rates.get(kind, 0.0)
            if u_kind < edge:
                if kind == "5xx":
                    return Fault(delay, kind, self.codes[int(u_code * len(self.codes))])
                return Fault(delay, kind, self.values.get(kind, 0.0))
        return Fault(delay) if delay else NO_FAULT

    def loop_hop(self, url: str) -> tuple[str, int] | None:
        """For a hop ``URL?…&_loop=K`` of a URL whose fault is ``loop``: (the URL, K); else None."""
        m = _LOOP_RE.search(url)
        if m is None:
            return None
        base = url[:m.start()]
        return (base, int(m.group(1))) if self.decide(base).kind == "loop" else None

    def loop_next(self, url: str, hop: int) -> str:
        """Where hop ``hop`` (0 = the URL itself) of ``url``'s redirect cycle points."""
        hop += 1
        if hop >= self.values["loop"]:
            return url
        return f"{url}{'&' if '?' in url else '?'}{LOOP_PARAM}={hop}"

    def describe(self) -> dict:
        return {"spec": self.spec, "seed": self.seed, "heal": self.heal}


def _number(text: str, what: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FaultSpecError(f"{what}: {text!r} is not a number in fault spec {spec!r}") from None
    if not value >= 0 or value == float("inf"):
        raise FaultSpecError(f"{what}: {text!r} must be a finite number >= 0 in fault spec {spec!r}")
    return value


def parse_faults(spec: str) -> FaultPlan:
    """Parse a fault spec (module docstring); raise :class:`FaultSpecError` on any mistake."""
    plan = FaultPlan(spec=spec.strip())
    given: set[str] = set()
    for raw in filter(None, (s.strip() for s in spec.split(","))):
        head, at, rate_text = raw.partition("@")
        kind, eq, value = (s.strip() for s in head.partition("="))
        kind = kind.lower()
        if kind in given:  # a second value would silently replace the first
            raise FaultSpecError(f"{kind!r} given twice in fault spec {spec!r}; give each kind once")
        given.add(kind)
        if not at:
            if kind in ("seed", "heal") and eq:
                try:
                    setattr(plan, kind, int(value))
                except ValueError:
                    raise FaultSpecError(f"{kind}={value!r} must be an integer in fault spec {spec!r}") from None
                if plan.heal < 0:
                    raise FaultSpecError(f"heal={value!r} must be >= 0 in fault spec {spec!r}")
                continue
            raise FaultSpecError(f"item {raw!r} needs '@RATE' (e.g. {kind or '5xx'}@0.01) in fault spec {spec!r}")
        if kind != "latency" and kind not in KINDS:
            raise FaultSpecError(
                f"unknown fault {kind!r} in {spec!r}; expected latency, {', '.join(KINDS)}, seed, heal"
            )
        rate = _number(rate_text, f"rate of {kind}", spec)
        if rate > 1:
            raise FaultSpecError(f"rate of {kind} must be between 0 and 1, got {rate_text!r} in fault spec {spec!r}")
        if kind == "latency":
            if not eq:
                raise FaultSpecError(f"latency needs seconds, e.g. latency=0.05-0.2@{rate_text}, in fault spec {spec!r}")
            lo_text, dash, hi_text = value.partition("-")
            lo = _number(lo_text, "latency", spec)
            hi = _number(hi_text, "latency", spec) if dash else lo
            if hi < lo:
                raise FaultSpecError(f"latency range {value!r} is reversed in fault spec {spec!r}")
            plan.latency, plan.latency_rate = (lo, hi), rate
            continue
        if eq and kind == "5xx":
            try:
                plan.codes = tuple(int(c) for c in value.split("/"))
            except ValueError:
                raise FaultSpecError(f"5xx codes {value!r} must be like 503 or 500/503 in fault spec {spec!r}") from None
            if not all(500 <= c <= 599 for c in plan.codes):
                raise FaultSpecError(f"5xx codes {value!r} must be between 500 and 599 in fault spec {spec!r}")
        elif eq and kind in DEFAULT_VALUES:
            plan.values[kind] = _number(value, kind, spec)
            hops = plan.values[kind]
            if kind == "loop" and (hops < 1 or not hops.is_integer()):
                raise FaultSpecError(f"loop={value!r} must be a whole number of hops >= 1 in fault spec {spec!r}")
        elif eq:
            raise FaultSpecError(f"fault {kind!r} takes no value (got {raw!r}) in fault spec {spec!r}")
        plan.rates[kind] = rate
    if sum(plan.rates.values()) > 1 + 1e-9:
        raise FaultSpecError(f"the rates of {', '.join(plan.rates)} add up to more than 1 in fault spec {spec!r}")
    return plan
