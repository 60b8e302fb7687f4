"""Wang–Landau (WL) frontier with region competition.

Liu, Chen, Zhao, "Focused crawler method based on Wang–Landau sampling", J. UESTC 2023. The
energy of a queued link is its relevance E(l) = R(l) (paper eq. 5), binned into 50 bins of width
0.02. The sampler keeps the density of states ln g(E) and the visit histogram H(E) per bin; a
proposal X2 comes from the domain with the highest mean R(l) (region competition, §2.3) by a
roulette wheel on R(l), and is fetched with the WL acceptance probability
P(X1→X2) = min(g(E1)/g(E2), 1). Every decision is O(log n): per-domain sums and sum trees are
kept incrementally, never recomputed over the frontier. Options and our reading of the paper's
open points: docs/wl.md.
"""

from __future__ import annotations

import heapq
import math
import random
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from topiccrawl.strategies.base import FrontierBase, Link, StrategyOptions, option_field

BINS = 50
#: roulette weights are integers: round(R·QUANTUM) + 1, so a zero-relevance link can still be drawn
QUANTUM = 1 << 20
STAGE_RULES = ("paper", "flat", "zhou-bhatt", "one-over-t")
VISITED = ("ever", "stage", "nonempty")
PROPOSALS = ("region-roulette", "uniform")


def clip01(x: float) -> float:
    """``x`` clipped to [0, 1]; NaN becomes 0."""
    return x if 0.0 <= x <= 1.0 else (1.0 if x > 1.0 else 0.0)


def energy_bin(energy: float) -> int:
    """The one binning function: b = min(floor(E·50 + 1e-9), 49), E = R(l) clipped to [0, 1]."""
    if not 0.0 <= energy <= 1.0:  # clip01, inlined: this runs several times per decision
        energy = 1.0 if energy > 1.0 else 0.0
    b = int(energy * BINS + 1e-9)
    return b if b < BINS else BINS - 1


def accepts(lng_from: float, lng_to: float, u: float) -> bool:
    """WL acceptance of X1→X2 with P = min(g(E1)/g(E2), 1), in log space: log u ≤ ln g(E1) − ln g(E2).

    ``u`` is uniform in (0, 1]; the log form never overflows however large ln g grows.
    """
    return math.log(u) <= lng_from - lng_to


def stage_done(rule: str, hist: list[float], lnf: float) -> bool:
    """Whether the current WL stage is over, given H over the visited bins.

    ``paper``: every bin's g at least doubled this stage, H(E) ≥ ln 2 / ln f;
    ``flat``: min H ≥ 0.8 · mean H (classic flatness, Wang & Landau 2001);
    ``zhou-bhatt``: H(E) ≥ 1/√(ln f) (Zhou & Bhatt 2005); ``one-over-t``: every bin visited,
    H(E) ≥ 1 (Belardinelli & Pereyra 2007, first phase). No visited bin: never done.
    """
    if not hist or min(hist) <= 0:
        return False
    low = min(hist)
    if rule == "paper":
        return low >= math.log(2) / lnf
    if rule == "flat":
        return low >= 0.8 * sum(hist) / len(hist)
    if rule == "zhou-bhatt":
        return low >= 1.0 / math.sqrt(lnf)
    return low >= 1


class SumTree:
    """Fenwick tree of non-negative integer weights over a growable array (append / drop last).

    ``find(u)`` for 0 ≤ u < total returns ``(i, u − prefix(i))``: index i is drawn with
    probability weight[i] / total when u is uniform (roulette wheel), in O(log n).
    """

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = array("q", [0])

    def __len__(self) -> int:
        return len(self.t) - 1

    def prefix(self, i: int) -> int:
        """Sum of the first ``i`` weights."""
        t, s = self.t, 0
        while i:
            s += t[i]
            i &= i - 1
        return s

    def add(self, i: int, delta: int) -> None:
        t, n = self.t, len(self.t)
        i += 1
        while i < n:
            t[i] += delta
            i += i & -i

    def append(self, weight: int) -> None:
        # node i covers weights (i − lowbit(i), i]: the new weight plus the nodes that tile the rest
        t = self.t
        i = len(t)
        stop, j = i - (i & -i), i - 1
        while j > stop:
            weight += t[j]
            j &= j - 1
        t.append(weight)

    def drop_last(self) -> None:
        # node n only feeds prefix sums of indices >= n, so removing it leaves the rest exact
        self.t.pop()

    def find(self, u: int) -> tuple[int, int]:
        t, n, pos = self.t, len(self.t) - 1, 0
        step = 1 << (n.bit_length() - 1) if n else 0
        while step:
            nxt = pos + step
            if nxt <= n and t[nxt] <= u:
                pos = nxt
                u -= t[nxt]
            step >>= 1
        return pos, u


def weight(score: float) -> int:
    """Roulette weight of a link: round(R·QUANTUM) + 1, R clipped to [0, 1]."""
    if not 0.0 <= score <= 1.0:
        score = 1.0 if score > 1.0 else 0.0
    return round(score * QUANTUM) + 1


class WLLink(Link):
    """A link queued in the WL frontier: a :class:`Link` plus ``pos``, its index in its domain's
    array (−1 once it left the queue). The region structures and the highest-R heap hold these
    links themselves; weight and energy bin are recomputed from ``score`` when needed. No entry
    object per queued link (~100 bytes, docs/benchmarks.md "Scale")."""

    __slots__ = ("pos",)

    def __lt__(self, other: Link) -> bool:
        """Order of the highest-R heap: highest clipped R(l) first, then earlier insertion."""
        s, t = self.score, other.score
        if not (0.0 <= s <= 1.0 and 0.0 <= t <= 1.0):
            s, t = clip01(s), clip01(t)
        return s > t or (s == t and self.seq < other.seq)


class _Domain:
    """One region: its queued links packed in ``entries`` (swap-remove) with a sum tree of weights."""

    __slots__ = ("name", "index", "entries", "tree", "total", "version")

    def __init__(self, name: str, index: int) -> None:
        self.name, self.index = name, index
        self.entries: list[WLLink] = []
        self.tree = SumTree()
        self.total = 0
        self.version = 0


class WangLandauFrontier(FrontierBase):
    """The WL strategy (``wl``). Constructor arguments = the fields of :class:`WLOptions`."""

    name = "wl"
    #: the scheduler builds its queue entries with this class (no copy in ``push``)
    link_type = WLLink

    def __init__(self, *, stage_rule: str = "paper", visited: str = "ever", proposal: str = "region-roulette",
                 lnf0: float = 1.0, lnf_floor: float = 0.0, lnf_min: float = 1e-8, max_steps: int = 10**6,
                 stage_steps: int = 1000, max_rejections: int = 5, link_threshold: float = 0.0,
                 seed: int = 0) -> None:
        self.stage_rule, self.visited, self.proposal = stage_rule, visited, proposal
        self.lnf_floor, self.lnf_min, self.max_steps = lnf_floor, lnf_min, max_steps
        self.stage_steps, self.max_rejections, self.link_threshold = stage_steps, max_rejections, link_threshold
        self._clear_queue()
        self._next_seq = 0
        self._rng = random.Random(seed)
        self._lng = [0.0] * BINS
        self._hist = [0] * BINS
        self._seen: set[int] = set()  # S: bins that have a g value
        self._fetches = [0] * BINS
        self._lnf = lnf0
        self._x1: int | None = None  # bin of the current state X1
        self._stage = self._steps = self._m = 0
        self._accepted = self._rejected = self._forced = self._dropped = 0
        self._frozen = self._inv_t = False

    # -- queue structures ---------------------------------------------------------------------------
    def _clear_queue(self) -> None:
        self._domains: list[_Domain] = []
        self._by_name: dict[str, _Domain] = {}
        self._dheap: list[tuple] = []  # (−mean R, domain index, version), stale entries skipped
        self._dcount = SumTree() if self.proposal == "uniform" else None  # queued links per domain index
        self._lheap: list[WLLink] = []  # highest-R link first (WLLink.__lt__), removed links skipped
        self._queued = [0] * BINS
        self._size = self._live = 0

    def _domain(self, name: str) -> _Domain:
        d = self._by_name.get(name)
        if d is None:
            d = self._by_name[name] = _Domain(name, len(self._domains))
            self._domains.append(d)
            if self._dcount is not None:
                self._dcount.append(0)
        return d

    def _touch(self, d: _Domain) -> None:
        d.version += 1
        n = len(d.entries)
        if n:
            heapq.heappush(self._dheap, ((n - d.total) / n, d.index, d.version))
        if len(self._dheap) > 2 * self._live + 64:
            self._dheap = [((len(x.entries) - x.total) / len(x.entries), x.index, x.version)
                           for x in self._domains if x.entries]
            heapq.heapify(self._dheap)

    def _add(self, link: Link) -> None:
        if type(link) is not WLLink:  # a link from a JOBDIR state or a caller that did not use link_type
            link = WLLink(link.url, link.score, link.depth, link.domain, link.potential, link.payload, link.seq)
        d = self._domain(link.domain)
        w = weight(link.score)
        entries = d.entries
        if not entries:
            self._live += 1
        link.pos = len(entries)
        entries.append(link)
        d.tree.append(w)
        d.total += w
        if self._dcount is not None:
            self._dcount.add(d.index, 1)
        self._touch(d)
        heapq.heappush(self._lheap, link)
        self._queued[energy_bin(link.score)] += 1
        self._size += 1

    def _remove(self, e: WLLink) -> None:
        d, p, w = self._by_name[e.domain], e.pos, weight(e.score)
        entries = d.entries
        last = entries.pop()
        if last is not e:
            d.tree.add(p, weight(last.score) - w)
            entries[p] = last
            last.pos = p
        d.tree.drop_last()
        d.total -= w
        e.pos = -1
        if not entries:
            self._live -= 1
        if self._dcount is not None:
            self._dcount.add(d.index, -1)
        self._touch(d)
        self._queued[energy_bin(e.score)] -= 1
        self._size -= 1
        if len(self._lheap) > 2 * self._size + 64:
            self._lheap = [x for d in self._domains for x in d.entries]
            heapq.heapify(self._lheap)

    def _top(self) -> WLLink:
        """The queued link with the highest R(l) (earliest on ties)."""
        h = self._lheap
        while h[0].pos < 0:
            heapq.heappop(h)
        return h[0]

    def _best_domain(self) -> _Domain:
        """Region competition (§2.3): the domain whose queued links have the highest mean R(l)."""
        h = self._dheap
        while True:
            _, index, version = h[0]
            d = self._domains[index]
            if d.version == version:
                return d
            heapq.heappop(h)

    def _propose_entry(self) -> WLLink:
        if self.proposal == "uniform":
            index, offset = self._dcount.find(self._rng.randrange(self._size))
            return self._domains[index].entries[offset]
        d = self._best_domain()
        return d.entries[d.tree.find(self._rng.randrange(d.total))[0]]

    # -- Frontier protocol ---------------------------------------------------------------------------
    def push(self, link: Link) -> None:
        """Queue a link; below ``link_threshold`` it is dropped unless it has potential value."""
        if link.score < self.link_threshold and not link.potential:
            self._dropped += 1
            return
        if link.seq < 0:
            link.seq = self._next_seq
            self._next_seq += 1
        self._add(link)

    def propose(self) -> Link | None:
        """Draw a proposal X2 without fetching it (region competition + roulette, or uniform)."""
        return self._propose_entry() if self._size else None

    def pop(self) -> Link | None:
        """The next link to fetch: WL Metropolis steps until a proposal is accepted or forced."""
        if not self._size:
            return None
        if self._x1 is None:  # start: X1 = the highest-relevance link, g = 1, H = 1
            e = self._top()
            b = energy_bin(e.score)
            self._enter(b)
            self._x1 = b
            return self._fetch(e, b)
        lng, hist = self._lng, self._hist
        while True:
            e = self._propose_entry()
            b = energy_bin(e.score)
            self._enter(b)
            if accepts(lng[self._x1], lng[b], 1.0 - self._rng.random()):
                self._accepted += 1
                return self._move(e, b)
            lng[self._x1] += self._lnf
            hist[self._x1] += 1
            self._rejected += 1
            self._m += 1
            self._step()
            if self._m >= self.max_rejections:
                self._forced += 1
                e = self._top()
                return self._move(e, energy_bin(e.score))

    def __len__(self) -> int:
        return self._size

    # -- WL bookkeeping ------------------------------------------------------------------------------
    def _enter(self, b: int) -> None:
        if b not in self._seen:  # a new energy state: g = 1, H = 1
            self._seen.add(b)
            self._lng[b] = 0.0
            self._hist[b] = 1

    def _move(self, e: WLLink, b: int) -> Link:
        """X1 ← e in bin b (accepted or forced): ln g(E) += ln f, H(E) += 1, and fetch it."""
        self._enter(b)
        self._lng[b] += self._lnf
        self._hist[b] += 1
        self._x1 = b
        self._m = 0
        self._step()
        return self._fetch(e, b)

    def _fetch(self, e: WLLink, b: int) -> Link:
        self._remove(e)
        self._fetches[b] += 1
        # the highest-R heap drops removed links lazily (it is rebuilt at twice the queue), so it may
        # still hold ``e``: hand out a plain copy and keep in ``e`` only what the heap order reads
        # (score, seq), or every fetched Request (the scheduler stores it in the link it hands out)
        # and URL would stay alive until the rebuild
        link = Link(e.url, e.score, e.depth, e.domain, e.potential, e.payload, e.seq)
        e.payload = e.url = e.domain = None
        return link

    def _visited_hist(self) -> list[int]:
        h = self._hist
        if self.visited == "stage":
            return [x for x in h if x > 0]
        if self.visited == "nonempty":
            return [h[b] for b in self._seen if self._queued[b] > 0]
        return [h[b] for b in self._seen]

    def _step(self) -> None:
        """One WL update done: every T steps test the stage rule; ln f ← ln f / 2 when it holds."""
        self._steps += 1
        if self._frozen:
            return
        if self._inv_t:
            self._lnf = max(len(self._seen) / self._steps, self.lnf_floor)
        elif self._steps % self.stage_steps == 0 and stage_done(self.stage_rule, self._visited_hist(), self._lnf):
            self._lnf = max(self._lnf / 2, self.lnf_floor)
            self._stage += 1
            self._hist[:] = [0] * BINS
            if self.stage_rule == "one-over-t" and self._lnf <= len(self._seen) / self._steps:
                self._inv_t = True
        if self._steps > self.max_steps or self._lnf < self.lnf_min:
            self._frozen = True

    # -- reporting and persistence ------------------------------------------------------------------
    def stats(self) -> dict:
        return {
            "wl/lnf": self._lnf,
            "wl/stage": self._stage,
            "wl/accepted": self._accepted,
            "wl/rejected": self._rejected,
            "wl/forced": self._forced,
            "wl/steps": self._steps,
            "wl/dropped": self._dropped,
            "wl/visited_bins": len(self._seen),
            "wl/fetches_per_bin": list(self._fetches),
        }

    def ln_g(self) -> dict[int, float]:
        """ln g(E) of every visited bin."""
        return {b: self._lng[b] for b in sorted(self._seen)}

    def write_report(self, out_dir: Path) -> Path:
        """Write ``wl-histogram.png``: H (this stage) and ln g per energy bin."""
        from matplotlib.figure import Figure

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        x = [b / BINS for b in range(BINS)]
        fig = Figure(figsize=(8, 5), dpi=100)
        top, bottom = fig.subplots(2, 1, sharex=True)
        top.bar(x, self._hist, width=1 / BINS, align="edge", color="tab:blue")
        top.set_ylabel("H(E), this stage")
        bottom.bar(x, [self._lng[b] if b in self._seen else 0.0 for b in range(BINS)], width=1 / BINS,
                   align="edge", color="tab:orange")
        bottom.set_ylabel("ln g(E)")
        bottom.set_xlabel("energy E = R(l)")
        bottom.set_xlim(0, 1)
        fig.suptitle(f"Wang–Landau frontier: ln f = {self._lnf:.3g}, stage {self._stage}, {self._steps} steps, "
                     f"{self._forced} forced", fontsize=9)
        path = out_dir / "wl-histogram.png"
        fig.savefig(path)
        return path

    def state(self) -> dict:
        """Queued links plus every sampler variable; ``load_state`` continues identically."""
        return {
            "links": [link for d in self._domains for link in d.entries],
            "next_seq": self._next_seq,
            "wl": {
                "domains": [(d.name, len(d.entries)) for d in self._domains],
                "lng": list(self._lng), "hist": list(self._hist), "seen": sorted(self._seen),
                "fetches": list(self._fetches), "lnf": self._lnf, "x1": self._x1, "stage": self._stage,
                "steps": self._steps, "m": self._m, "accepted": self._accepted, "rejected": self._rejected,
                "forced": self._forced, "dropped": self._dropped, "frozen": self._frozen,
                "inv_t": self._inv_t, "rng": self._rng.getstate(),
            },
        }

    def load_state(self, state: dict) -> None:
        self._clear_queue()
        self._next_seq = state["next_seq"]
        wl = state.get("wl")
        if wl is None:  # written by another strategy: keep its links, start a fresh sampler
            for link in sorted(state["links"], key=lambda l: l.seq):
                self._add(link)
            return
        links = iter(state["links"])
        for name, n in wl["domains"]:
            self._domain(name)
            for _ in range(n):
                self._add(next(links))
        self._lng, self._hist, self._fetches = list(wl["lng"]), list(wl["hist"]), list(wl["fetches"])
        self._seen = set(wl["seen"])
        self._lnf, self._x1, self._stage, self._steps, self._m = wl["lnf"], wl["x1"], wl["stage"], wl["steps"], wl["m"]
        self._accepted, self._rejected, self._forced = wl["accepted"], wl["rejected"], wl["forced"]
        self._dropped, self._frozen, self._inv_t = wl["dropped"], wl["frozen"], wl["inv_t"]
        self._rng.setstate(wl["rng"])


@dataclass(frozen=True)
class WLOptions(StrategyOptions):
    """Options of ``wl`` (docs/wl.md); each field is read from the setting of its name."""

    wl_stage_rule: str = option_field("paper", choices=STAGE_RULES)
    wl_visited: str = option_field("ever", choices=VISITED)
    wl_proposal: str = option_field("region-roulette", choices=PROPOSALS)
    wl_lnf0: float = option_field(1.0, low=1e-300)
    wl_lnf_floor: float = option_field(0.0, low=0.0, high="wl_lnf0")
    wl_lnf_min: float = option_field(1e-8, low=0.0)
    wl_max_steps: int = option_field(10**6, low=1)
    wl_stage_steps: int = option_field(1000, low=1)
    wl_max_rejections: int = option_field(5, low=1)
    wl_link_threshold: float = option_field(0.0, low=0.0, high=1.0)
    wl_seed: int = 0

    def kwargs(self) -> dict:
        """The :class:`WangLandauFrontier` arguments."""
        return {"stage_rule": self.wl_stage_rule, "visited": self.wl_visited, "proposal": self.wl_proposal,
                "lnf0": self.wl_lnf0, "lnf_floor": self.wl_lnf_floor, "lnf_min": self.wl_lnf_min,
                "max_steps": self.wl_max_steps, "stage_steps": self.wl_stage_steps,
                "max_rejections": self.wl_max_rejections, "link_threshold": self.wl_link_threshold,
                "seed": self.wl_seed}


def make_wl(options: WLOptions | Mapping | None = None,
            is_relevant: Callable[[str], bool] | None = None) -> WangLandauFrontier:
    """Factory of ``wl`` (:class:`WLOptions`, or a settings mapping: ``WLOptions.coerce``)."""
    return WangLandauFrontier(**WLOptions.coerce(options).kwargs())
