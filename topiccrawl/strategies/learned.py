"""``learned``: the frontier ordered by an online-learned link value (:mod:`topiccrawl.learning.linkvalue`).

The priority of a queued link is the model's value of the link (the expected γ^h of the nearest
relevant page h ≤ k hops below its target). Until the model is first fitted, the priority is the
link's R(l) (``Link.score`` clipped to [0, 1], WL paper eq. 5), so an untrained model orders as
``bestfirst`` does (ties by insertion order), apart from exploration. With probability
``epsilon`` a decision takes a uniformly random queued link instead (seeded), so one region cannot
starve the rest and the model sees links it would not pick.

The crawler reports every fetched page with :meth:`LearnedFrontier.observe_page` — its P(relevant)
and its out-links with their :class:`~topiccrawl.learning.linkvalue.LinkFeatures` — *before* the
page's links are pushed: the features of a pushed link are looked up by URL. A link pushed without
observed features (seeds) is encoded from its URL, depth and R(l) alone. The holder-page fields of
the features (``holder_probability``, ``host_yield``, ``distance``, ``holder_value``) are filled in
by ``observe_page``. Every ``retrain_every`` observed pages the model retrains.

Re-prioritisation: the first fit re-scores every queued link once (R(l) and model values are not on
one scale; the queue then holds about ``retrain_every`` pages' out-links). Each later retrain has
bounded cost: when at most ``rescore_all`` links are queued, all are re-scored (one batch
prediction and a heapify: cost linear in a bounded size); otherwise the ``rescore_top`` (M) links
with the highest current priority (the next ones to be fetched: the decisions a new model changes
first; M above ``retrain_every`` covers the pops until the next retrain) and a uniform random
sample of ``rescore_sample`` (R) others (links scored by an older model are revisited over time).
Cost O((M + R)·log n) per retrain, independent of the queue size; every link is scored by the model
current at its push. Queue: a heap of ``(−priority, seq, uid, entry)`` with lazy invalidation (an
entry's current ``uid``), plus a list of the live entries for O(1) uniform sampling.

Sibling yield (``siblings``, off by default): the priority v of a queued link is updated with the
yield of its holder page h, logit v' = logit v + logit y_h − logit g (:func:`sibling_shift`), y_h the
smoothed mean P(relevant) of the fetched pages h links to, g the crawl's; a page fetched through h
re-prioritises h's queued links (docs/learned.md, "Sibling yield").

Anchor association (``association="anchor"``; the ``learned`` setting's default in memory): the
priority gets max_t a_t − m over the link's anchor words, a_t the smoothed mean score of the
fetched pages whose text holds t (the ``relevance`` given to :meth:`LearnedFrontier.observe_page`:
the crawler hands R(P), or P where P is R(l)'s holder term), m the crawl's mean
(:class:`~topiccrawl.learning.association.TermAssociation`); recomputed for the whole queue every
``association_every`` pages while it holds at most ``rescore_all`` links, and for the re-scored
links at each retrain (docs/learned.md, "Anchor words judged by the pages that contain them").
With ``association_examples`` the fetched example pages join the statistics as pages of relevance
1, counter-examples 0 (:meth:`LearnedFrontier.observe_examples`). With ``example_links`` the crawler
marks the pages the example pages link to, and the links to them, with one more term
(:data:`~topiccrawl.learning.association.EXAMPLE_LINK`), which the association judges as any other.

Holder refresh (``holder_refresh``; on by default, in memory and on Redis): where R(l)'s holder term is the page
classifier's P, a refit of the classifier moves every queued link's R(l) by (1 − ∂)·(P_new − P_old)
of its holder page (eq. 5) and re-prioritises it (:meth:`LearnedFrontier.refresh_holders`).

Anchor judge (``anchor_judge`` = λ > 0; the ``learned`` setting's default is λ = 0.1, in memory
only): the crawler adds to each out-link's priority the page classifier's standardised score of
its anchor and context (:class:`~topiccrawl.learning.anchorjudge.AnchorJudge`, passed in
``LinkFeatures.shift``); the shift stays in the priority through re-scoring and refreshes. Kept
current (``judge_refresh``; the setting's default): a queued link keeps the judged words of every
fetched page's link to its target, its shift is the mean of their judgements, a new link to it
moves the shift at once, and each refit of the page classifier judges the whole queue's words
again (:meth:`LearnedFrontier.refresh_judge`); otherwise the shift is fixed at the push.

Holder mean (``holder_mean``; off by default, in memory only): where R(l)'s holder term is R(P), a
queued link's holder term is the mean over every fetched page linking to it; each new such page
moves its R(l) (eq. 5) and re-prioritises it (:meth:`LearnedFrontier._follow_holder`).

Guard (``guard="thompson"``; off by default, in memory only): a second heap over the same entries,
ordered by R(l) alone (best-first's order); at each decision that does not explore, discounted
Thompson sampling picks which heap gives the link, each rewarded by the P(relevant) of the pages
it chose (:meth:`LearnedFrontier._pop_guarded`; docs/learned.md, "A bandit between the learned
order and best-first's").
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from topiccrawl.learning.anchorjudge import AnchorJudge
from topiccrawl.learning.association import EXAMPLE_LINK, TermAssociation
from topiccrawl.learning.choices import check_choice
from topiccrawl.learning.linkvalue import (
    BLEND_LABELS,
    BLEND_SCORES,
    FIRST_BLENDS,
    LABEL_RULES,
    WORD_RULES,
    LinkFeatures,
    LinkValueModel,
    refreshed_row,
    row_score,
    shifted_score_row,
    url_tokens,
)
from topiccrawl.strategies.base import FrontierBase, Link, StrategyOptions, option_field
from topiccrawl.strategies.wanglandau import clip01

#: how a holder page's fetched targets shift the priority of its other links (docs/learned.md)
SIBLING_RULES = ("off", "yield")
#: ``association``: "anchor" shifts a link by its anchor terms' association (docs/learned.md)
ASSOCIATION_RULES = ("off", "anchor")
#: the setting's values: ``auto`` (the default) is ``anchor``, in memory and on Redis (``off`` there
#: before the association was shared; the name stays so settings written then keep working)
ASSOCIATION_SETTINGS = ("auto", *ASSOCIATION_RULES)
#: ``guard``: "thompson" lets a bandit choose, decision by decision, between the learned order and
#: best-first's (R(l) alone), rewarded by the fetched page's P (docs/learned.md, "A bandit between
#: the learned order and best-first's")
GUARD_RULES = ("off", "thompson")
#: the guard's discount of its arms' past rewards, applied at every rewarded page
GUARD_DISCOUNT = 0.98
#: the guard's arms (index into its statistics) and the mark of a decision both arms agreed on
LEARNED_ARM, BESTFIRST_ARM, BOTH_ARMS = 0, 1, 2


def example_link_stats(frontier) -> dict:
    """With ``example_links`` and the association on: the shift a link to a page an example links to
    gets now (a_t − m of the marker term; 0 before such a page is fetched)."""
    assoc = getattr(frontier, "association", None)
    if not getattr(frontier, "example_links", False) or assoc is None:
        return {}
    return {"learned/example_link_shift": round(float(assoc.shifts([(EXAMPLE_LINK,)])[0]), 6)}


def fallback_features(link: Link, k: int) -> LinkFeatures:
    """Features of a link pushed without observed ones (a seed): URL, depth and R(l) only; the
    distance is "none within ``k`` hops"."""
    return LinkFeatures(url=url_tokens(link.url), depth=link.depth, score=clip01(link.score), distance=k + 1)


def push_value(model: LinkValueModel, incoming: OrderedDict, link: Link) -> tuple[bytes, str | None, float]:
    """The encoded row, holder page and priority of ``link`` at its push: the row ``observe_page``
    left in ``incoming`` (taken out), else one from :func:`fallback_features`; the priority is the
    model's value (the one computed at observation if the model did not change since), or R(l)
    while the model is unfitted."""
    entry = incoming.pop(link.url, None)
    if entry is None:
        row, holder, value = model.encode([fallback_features(link, model.k)])[0], None, None
    else:
        row, holder, value, version = entry[:4]
        if version != model.version_:
            value = None
    if model.fitted:
        return row, holder, value if value is not None else model.predict_row(row)
    return row, holder, clip01(link.score)


def example_pages(examples: Iterable[Sequence[str]], counter_examples: Iterable[Sequence[str]] = ()) -> list[tuple]:
    """``(terms, relevance)`` of the example pages for the anchor association: 1 for an example,
    0 for a counter-example (docs/learned.md, "The example pages in the association")."""
    return [(terms, 1.0) for terms in examples] + [(terms, 0.0) for terms in counter_examples]


def remember(table: OrderedDict, key: str, value: tuple, limit: int) -> None:
    """``table[key] = value`` as the newest entry; the oldest go beyond ``limit`` entries."""
    table[key] = value
    table.move_to_end(key)
    if len(table) > limit:
        table.popitem(last=False)


def crawl_yield(good: float, seen: int) -> float:
    """g = (good + 1) / (seen + 2): the crawl's smoothed yield, the prior of a host's or a page's."""
    return (good + 1.0) / (seen + 2.0)


def shrunk(good: float, seen: int, prior: float, strength: float) -> float:
    """(good + a·prior) / (seen + a), a = ``strength``: a yield shrunk towards ``prior``."""
    return (good + strength * prior) / (seen + strength)


def smoothed_yield(hosts: Mapping[str, Sequence[int]], good: int, seen: int, domain: str, strength: float) -> float:
    """(good_h + a·g) / (seen_h + a) of host ``domain``, g = (Σ good + 1) / (Σ seen + 2), a = ``strength``."""
    good_h, seen_h = hosts.get(domain, (0, 0))
    return shrunk(good_h, seen_h, crawl_yield(good, seen), strength)


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


def sibling_shift(probabilities: Iterable[float], n: int, prior: float, strength: float) -> float:
    """logit y_h − logit g: y_h = (Σ P + a·g) / (n + a) over the ``n`` fetched pages a holder links
    to (:func:`shrunk`), g = ``prior`` (the crawl's yield), a = ``strength``; 0 when ``n`` is 0."""
    if not n:
        return 0.0
    return _logit(shrunk(math.fsum(probabilities), n, prior, strength)) - _logit(prior)


def shifted(value: float, shift: float) -> float:
    """``value`` with ``shift`` added to its logit (unchanged for a shift of 0)."""
    if not shift:
        return value
    z = _logit(value) + shift
    return 1.0 / (1.0 + math.exp(-z)) if z > -700.0 else 0.0


class _Entry:
    __slots__ = ("assoc", "base", "docs", "holder", "hn", "hsum", "jsum", "judged", "link", "pos", "priority", "row",
                 "terms", "uid")

    def __init__(self, link: Link, row: bytes, holder: str | None, priority: float, base: float | None = None,
                 terms: tuple = (), assoc: float = 0.0, judged: float = 0.0, hsum: float = 0.0, hn: int = 0,
                 docs: list | None = None, jsum: float = 0.0) -> None:
        self.link, self.row, self.holder, self.priority = link, row, holder, priority
        self.base = priority if base is None else base  # the value before the sibling shift (shifts included)
        self.terms, self.assoc = terms, assoc  # the anchor's terms and their association shift in base
        self.judged = judged  # the anchor judge's shift in base
        self.hsum, self.hn = hsum, hn  # holder mean: the sum and number of the holders' scores (0: none)
        self.docs, self.jsum = docs, jsum  # judge refresh: the judged words of each link, Σ of their shifts
        self.uid = -1
        self.pos = -1


class LearnedFrontier(FrontierBase):
    """Learned link values with ε-exploration and bounded re-scoring (module docstring).

    ``model``: a :class:`LinkValueModel` (default: its defaults with ``random_state=seed``);
    ``epsilon``: share of random decisions, each the best of ``explore_sample`` uniform picks
    (1: a uniform pick); ``rescore_all``: queue size up to which every link is
    re-scored after a retrain, ``rescore_top`` (M), ``rescore_sample`` (R): those re-scored above
    it; ``seed``: the exploration and sampling RNG; ``max_pending``: observed out-links (and
    handed-out links) kept waiting for their push (or their page), oldest dropped first;
    ``association``: ``"anchor"`` adds to a link's priority the association of its anchor's terms
    with the fetched pages' R(P) (:class:`~topiccrawl.learning.association.TermAssociation`),
    recomputed every ``association_every`` fetched pages for a queue of at most ``rescore_all``
    links and at re-scoring (``"off"``: none); ``association_examples``: the example pages join
    the association's statistics (:meth:`observe_examples`); ``example_links``: the crawler adds the
    marker term of "linked from an example page" to pages and links (module docstring);
    ``host_strength``: pseudo-count a of the host yield (good + a·g) / (seen + a), g the crawl's
    smoothed yield (and of the sibling yield); ``siblings``: shift priorities by the holder page's
    sibling yield (``"yield"``; ``"off"``: no shift; module docstring); ``holder_refresh``: queued
    links follow their holder page's new P at a refit of the page classifier
    (:meth:`page_probabilities`); ``anchor_judge``: λ > 0 keeps an
    :class:`~topiccrawl.learning.anchorjudge.AnchorJudge`, whose shift the crawler puts in each
    out-link's features (``LinkFeatures.shift``) and which stays in the link's priority;
    ``holder_mean``: a queued link's holder term follows every fetched page linking to it;
    ``judge_refresh``: with the anchor judge, a link's shift follows every link to its target and
    each refit of the page classifier (:meth:`refresh_judge`); ``guard``: ``"thompson"`` keeps a
    second heap ordered by R(l) alone and lets discounted Thompson sampling choose, at each
    non-exploring decision, which heap gives the link, rewarded by the fetched page's P
    (:meth:`_pop_guarded`).
    """

    name = "learned"

    def __init__(self, model: LinkValueModel | None = None, *, epsilon: float = 0.05, rescore_all: int = 4096,
                 rescore_top: int = 128, rescore_sample: int = 128, seed: int = 0, max_pending: int = 20_000,
                 host_strength: float = 2.0, explore_sample: int = 1, siblings: str = "off",
                 association: str = "off", association_every: int = 25, association_examples: bool = False,
                 holder_refresh: bool = False, example_links: bool = False, anchor_judge: float = 0.0,
                 holder_mean: bool = False, judge_refresh: bool = False, guard: str = "off") -> None:
        check_choice("guard", guard, GUARD_RULES)
        check_choice("siblings", siblings, SIBLING_RULES)
        check_choice("association", association, ASSOCIATION_RULES)
        self.association = TermAssociation() if association == "anchor" else None
        self.association_every = max(1, int(association_every))
        self.association_examples = association_examples
        self.example_links = example_links
        #: the page classifier's judgement of anchors and their context, λ > 0 (the crawler calls it)
        self.anchor_judge = AnchorJudge(anchor_judge) if anchor_judge > 0 else None
        #: holder mean: queued URL -> its live entry (None when off)
        self.holder_mean = holder_mean
        self.judge_refresh = judge_refresh and self.anchor_judge is not None
        self._by_url: dict[str, _Entry] | None = {} if holder_mean or self.judge_refresh else None
        self._holders_followed = 0
        self._judge_followed = self._judge_refreshed = 0
        self._example_pages = 0  # example pages counted in the association
        self.holder_refresh = holder_refresh
        self._holder_refreshed = 0  # queued links whose holder term followed a new P
        self.model = model if model is not None else LinkValueModel(random_state=seed)
        self.siblings = siblings != "off"
        self.sibling_rule = siblings
        #: holder URL -> model ids of the fetched pages it links to; holder URL -> its queued entries
        self._kids: dict[str, set[int]] = {}
        self._held: dict[str, list[_Entry]] = {}
        self._psum = 0.0  # with sibling yield: Σ P(relevant) of the fetched pages (the model's current figures)
        self.epsilon = epsilon
        self.explore_sample = max(1, int(explore_sample))
        self.rescore_all = rescore_all
        self.rescore_top = rescore_top
        self.rescore_sample = rescore_sample
        self.max_pending = max_pending
        self.host_strength = host_strength
        self._rng = random.Random(seed)
        self._heap: list[tuple] = []
        self._live: list[_Entry] = []
        #: the guard: a heap by R(l) alone, the arms' discounted [Σ reward, n], decisions per arm
        #: (learned, best-first, both agreed) and the arm of each handed-out URL
        self.guard = guard
        self._bestfirst_heap: list[tuple] | None = [] if guard != "off" else None
        self._arms = [[0.0, 0.0], [0.0, 0.0]]
        self._arm_pops = [0, 0, 0]
        self._armed: OrderedDict[str, int] = OrderedDict()
        self._next_seq = 0
        self._next_uid = 0
        #: target URL -> (row, holder URL, value, model version) of an observed, not yet pushed link
        self._incoming: OrderedDict[str, tuple] = OrderedDict()
        #: URL -> (row, holder URL) of a handed-out link whose page is not observed yet
        self._inflight: OrderedDict[str, tuple] = OrderedDict()
        #: URLs pushed and not observed yet (queued or in flight): their out-link rows would never be used
        self._queued_urls: set[str] = set()
        self._hosts: dict[str, list[int]] = {}  # domain -> [relevant pages, pages]
        self._good = self._seen = 0
        self._explored = self._rescored = self._retrains = 0
        self._retrain_ms = 0.0

    # -- queue ----------------------------------------------------------------------------------------
    def _enqueue(self, entry: _Entry) -> None:
        entry.uid = self._next_uid
        self._next_uid += 1
        heapq.heappush(self._heap, (-entry.priority, entry.link.seq, entry.uid, entry))
        if self._bestfirst_heap is not None:
            heapq.heappush(self._bestfirst_heap, (-row_score(entry.row), entry.link.seq, entry.uid, entry))

    def _remove(self, entry: _Entry) -> None:
        if self._by_url is not None:
            self._by_url.pop(entry.link.url, None)
        live = self._live
        last = live.pop()
        if last is not entry:
            live[entry.pos] = last
            last.pos = entry.pos
        entry.uid = entry.pos = -1

    def _compact(self) -> None:
        if len(self._heap) > 2 * len(self._live) + 1024:
            self._heap = [t for t in self._heap if t[2] == t[3].uid]
            heapq.heapify(self._heap)
        if self._bestfirst_heap is not None and len(self._bestfirst_heap) > 2 * len(self._live) + 1024:
            self._bestfirst_heap = [t for t in self._bestfirst_heap if t[2] == t[3].uid]
            heapq.heapify(self._bestfirst_heap)

    def _pop_best(self, heap: list | None = None) -> _Entry:
        heap = self._heap if heap is None else heap
        while True:
            t = heapq.heappop(heap)
            if t[2] == t[3].uid:
                return t[3]

    @staticmethod
    def _top(heap: list) -> _Entry:
        while heap[0][2] != heap[0][3].uid:
            heapq.heappop(heap)
        return heap[0][3]

    def _pop_guarded(self) -> _Entry:
        """The guard's decision: the learned order's best link, or best-first's (the best R(l)).
        When both are the same link it is taken and both arms are rewarded by its page; otherwise
        each arm draws θ ~ Beta(1 + Σ reward, 1 + n − Σ reward) from its discounted statistics and
        the higher θ gives the link (Thompson sampling)."""
        learned, best = self._top(self._heap), self._top(self._bestfirst_heap)
        if learned is best:
            arm = BOTH_ARMS
        else:
            draw = [self._rng.betavariate(1.0 + s, 1.0 + max(n - s, 0.0)) for s, n in self._arms]
            arm = BESTFIRST_ARM if draw[BESTFIRST_ARM] > draw[LEARNED_ARM] else LEARNED_ARM
        entry = self._pop_best(self._bestfirst_heap if arm == BESTFIRST_ARM else self._heap)
        self._arm_pops[arm] += 1
        self._remember(self._armed, entry.link.url, arm)
        return entry

    def _reward(self, url: str, probability: float) -> None:
        """The guard's reward of the decision that handed out ``url``: the page's P, after every
        arm's past rewards are discounted by :data:`GUARD_DISCOUNT`."""
        arm = self._armed.pop(url, None)
        if arm is None:
            return
        for stat in self._arms:
            stat[0] *= GUARD_DISCOUNT
            stat[1] *= GUARD_DISCOUNT
        for a in ((LEARNED_ARM, BESTFIRST_ARM) if arm == BOTH_ARMS else (arm,)):
            self._arms[a][0] += probability
            self._arms[a][1] += 1.0

    def _requeue(self, e: _Entry) -> None:
        """``e`` queued again at its base (with its sibling shift); the old heap item goes stale."""
        e.priority = shifted(e.base, self.sibling_shift(e.holder)) if self.siblings and e.holder else e.base
        self._enqueue(e)

    def _fallback_features(self, link: Link) -> LinkFeatures:
        return fallback_features(link, self.model.k)

    def _add(self, link: Link, row: bytes, holder: str | None, priority: float, terms: tuple = (),
             judged: float = 0.0, held: float | None = None, doc: tuple = ()) -> None:
        entry = _Entry(link, row, holder, priority + judged, terms=terms, judged=judged)
        if self.judge_refresh and doc:
            entry.docs, entry.jsum = [doc], judged
        if self._by_url is not None:
            self._by_url[link.url] = entry
            if held is not None:
                entry.hsum, entry.hn = held, 1
        if terms and self.association is not None:
            entry.assoc = self.association.shift(terms)
            entry.base = entry.priority = priority + judged + entry.assoc
        if self.siblings and holder is not None:
            entry.priority = shifted(entry.base, self.sibling_shift(holder))
            self._held.setdefault(holder, []).append(entry)
        entry.pos = len(self._live)
        self._live.append(entry)
        self._enqueue(entry)

    # -- sibling yield --------------------------------------------------------------------------------
    def crawl_yield(self) -> float:
        """g = (Σ P + 1) / (N + 2) over the fetched pages (kept with sibling yield on)."""
        return crawl_yield(self._psum, self.model.n_pages)

    def sibling_shift(self, holder: str) -> float:
        """logit y_h − logit g of ``holder`` (:func:`sibling_shift`)."""
        kids = self._kids.get(holder)
        if not kids:
            return 0.0
        prob = self.model.probability
        return sibling_shift(map(prob, kids), len(kids), self.crawl_yield(), self.host_strength)

    def _kid(self, holder: str, node: int) -> None:
        self._kids.setdefault(holder, set()).add(node)

    def _reprioritise(self, holder: str) -> None:
        """A page fetched through ``holder``: its other queued links get the new sibling shift."""
        held = self._held.get(holder)
        if not held:
            return
        live = [e for e in held if e.uid >= 0]
        if not live:
            del self._held[holder]
            return
        self._held[holder] = live
        shift = self.sibling_shift(holder)
        for e in live:
            e.priority = shifted(e.base, shift)
            self._enqueue(e)
        self._compact()

    # -- Frontier protocol ----------------------------------------------------------------------------
    def push(self, link: Link) -> None:
        if link.seq < 0:
            link.seq = self._next_seq
            self._next_seq += 1
        waiting = self._incoming.get(link.url)
        terms = waiting[4] if waiting is not None and len(waiting) > 4 else ()
        judged = waiting[5] if waiting is not None and len(waiting) > 5 else 0.0
        held = waiting[6] if waiting is not None and len(waiting) > 6 else None
        doc = waiting[7] if waiting is not None and len(waiting) > 7 else ()
        row, holder, priority = push_value(self.model, self._incoming, link)
        self._queued_urls.add(link.url)
        self._add(link, row, holder, priority, terms, judged, held, doc)

    def pop(self) -> Link | None:
        if not self._live:
            return None
        if self.epsilon and self._rng.random() < self.epsilon:
            live, rng = self._live, self._rng
            entry = live[rng.randrange(len(live))]
            for _ in range(self.explore_sample - 1):  # a tournament: the best of k uniform picks
                other = live[rng.randrange(len(live))]
                if other.priority > entry.priority:
                    entry = other
            self._explored += 1
        elif self._bestfirst_heap is not None:
            entry = self._pop_guarded()
        else:
            entry = self._pop_best()
        self._remove(entry)
        self._compact()
        self._remember(self._inflight, entry.link.url, (entry.row, entry.holder))
        return entry.link

    def __len__(self) -> int:
        return len(self._live)

    @property
    def queued_urls(self) -> set[str]:
        """URLs pushed and not observed yet (queued or in flight): :meth:`observe_page` ignores
        out-links to them (read-only; a crawler may skip building their features)."""
        return self._queued_urls

    def peek(self) -> tuple[float, Link] | None:
        """The best live entry's priority and link (stale heap tops are dropped on the way)."""
        heap = self._heap
        while heap and heap[0][2] != heap[0][3].uid:
            heapq.heappop(heap)
        return (max(-heap[0][0], 0.0), heap[0][3].link) if heap else None

    def value(self, link: Link) -> float | None:
        """The priority :meth:`push` just gave ``link`` (None when it was not the last push)."""
        last = self._live[-1] if self._live else None
        return max(last.priority, 0.0) if last is not None and last.link is link else None

    def _remember(self, table: OrderedDict, key: str, value: tuple) -> None:
        remember(table, key, value, self.max_pending)

    # -- what the crawler reports -------------------------------------------------------------------------
    def host_yield(self, domain: str) -> float:
        """(good + a·g) / (seen + a) of a host, g = (Σ good + 1) / (Σ seen + 2)."""
        return smoothed_yield(self._hosts, self._good, self._seen, domain, self.host_strength)

    def observe_page(self, url: str, domain: str, probability: float,
                     out_links: Iterable[tuple[str, LinkFeatures]] = (), *, relevant: bool | None = None,
                     terms: Iterable[str] | None = None, relevance: float | None = None,
                     term_ids: Sequence[int] | None = None, linked: Sequence[str] = (),
                     holder_weight: float | None = None, judged_links: Sequence[tuple] = ()) -> None:
        """A fetched page: its P(relevant) (``relevant`` overrides ``probability ≥ threshold``) and
        its out-links as ``(url, LinkFeatures)`` (links to fetched pages included: those are
        labelled examples and graph edges; links to :attr:`queued_urls` are ignored). Call it before pushing the page's
        links. Labels the link the page was fetched by, fills the holder fields of the features,
        encodes and scores the out-links for their push, and retrains every ``retrain_every`` pages.
        A second call for the same URL only adds out-links. ``terms`` (the page's text terms) and
        ``relevance`` (its R(P); default ``probability``) feed the anchor association when it is on
        (``term_ids``: the distinct terms' ids in the association's vocabulary, when the caller has
        them); each out-link's anchor terms are its features' ``terms``. With ``holder_mean``,
        ``holder_weight`` (1 − ∂, given where R(l)'s holder term is ``relevance``) and ``linked`` (the
        page's out-links to queued URLs): those links' holder term becomes the mean over every
        fetched page linking to them (:meth:`_follow_holder`). With ``judge_refresh``,
        ``judged_links`` (``(url, words, shift)`` of the page's links to queued URLs, judged by the
        anchor judge) join those links' shifts (:meth:`_follow_judge`)."""
        model = self.model
        via = self._inflight.pop(url, None)
        self._queued_urls.discard(url)
        holder_value = 0.0
        if model.page(url) is None:
            if self._bestfirst_heap is not None:
                self._reward(url, clip01(probability))
            node = model.add_page(url, probability, relevant=relevant, parent=via[1] if via else None)
            if self.siblings:
                self._psum += model.probability(node)
            good = model.is_relevant(url)
            host = self._hosts.get(domain)
            if host is None:
                host = self._hosts[domain] = [0, 0]
            host[0] += good
            host[1] += 1
            self._good += good
            self._seen += 1
            assoc = self.association
            if assoc is not None and terms is not None:
                assoc.add_page(terms, probability if relevance is None else relevance, ids=term_ids)
                if self._seen % self.association_every == 0 and len(self._live) <= self.rescore_all:
                    self._refresh_association()
            if via is not None:
                model.add_example(via[0], url)
                if self.siblings and via[1] is not None:
                    self._kid(via[1], node)
                    self._reprioritise(via[1])
            if model.retrain_due:  # before the out-links are scored: they get the new model's values
                self.retrain()
            if via is not None and model.fitted:
                holder_value = model.predict_row(via[0])
        held = (probability if relevance is None else relevance) if holder_weight else None
        if held is not None and linked and self._by_url is not None:
            self._follow_holder(linked, held, holder_weight)
        if judged_links and self.judge_refresh:
            self._follow_judge(judged_links)
        targets, features = [], []
        p = clip01(probability)
        hy, since = self.host_yield(domain), model.since(url)
        queued = self._queued_urls
        for target, f in out_links:
            if target in queued:  # queued or in flight: pushed already, a new row would be thrown away
                continue
            f.holder_probability, f.host_yield, f.distance, f.holder_value = p, hy, since, holder_value
            targets.append(target)
            features.append(f)
        if features:
            rows = model.encode(features)
            values = model.predict_rows(rows).tolist() if model.fitted else [None] * len(rows)
            version = model.version_
            for target, f, row, value in zip(targets, features, rows, values, strict=True):
                node = model.page(target)
                if node is not None:  # fetched before: an example now, and an edge
                    model.add_example(row, target)
                    model.add_edge(url, target)
                    if self.siblings:
                        self._kid(url, node)
                else:
                    self._remember(self._incoming, target, (row, url, value, version, tuple(f.terms), f.shift,
                                                            held, f.judge_doc))

    def observe_examples(self, examples: Iterable[Sequence[str]], counter_examples: Iterable[Sequence[str]] = ()) -> int:
        """The example pages' terms into the anchor association as pages of known relevance: 1
        for an example, 0 for a counter-example (with ``association_examples``; docs/learned.md,
        "The example pages in the association"). Returns the number of pages added."""
        if self.association is None or not self.association_examples:
            return 0
        pages = example_pages(examples, counter_examples)
        for terms, relevance in pages:
            self.association.add_page(terms, relevance)
        self._example_pages += len(pages)
        return len(pages)

    def _follow_holder(self, urls: Sequence[str], score: float, weight: float) -> None:
        """Queued links of ``urls`` (those not in flight) get one more holder of ``score``: R(l) +
        ``weight``·(new − old mean of their holders' scores) (eq. 5 with the mean as P_l),
        re-prioritised."""
        changed = []
        for url in urls:
            e = self._by_url.get(url)
            if e is None or not e.hn:  # in flight, or a seed (no holder in its R(l))
                continue
            old = e.hsum / e.hn
            e.hsum += score
            e.hn += 1
            row = shifted_score_row(e.row, weight * (e.hsum / e.hn - old))
            if row is not e.row:
                e.row = row
                changed.append(e)
        if not changed:
            return
        values = self.model.predict_rows([e.row for e in changed]).tolist()  # R(l) while unfitted
        for e, v in zip(changed, values):
            e.base = v + e.assoc + e.judged
            self._requeue(e)
        self._compact()
        self._holders_followed += len(changed)

    def _follow_judge(self, judged_links: Sequence[tuple]) -> None:
        """Queued links (not in flight) get one more judged link to their target: the shift is the
        mean of their links' shifts; re-prioritised."""
        changed = False
        for url, doc, shift in judged_links:
            e = self._by_url.get(url)
            if e is None or not doc:
                continue
            if e.docs is None:  # a seed, or pushed before the judge: its first judged link
                e.docs, e.jsum = [], 0.0
            e.docs.append(doc)
            e.jsum += shift
            judged = e.jsum / len(e.docs)
            e.base += judged - e.judged
            e.judged = judged
            self._requeue(e)
            changed = True
            self._judge_followed += 1
        if changed:
            self._compact()

    def refresh_judge(self, classifier, fit) -> int:
        """Every queued link's judged words scored again under a new fit of the page classifier
        (``fit``: its id, the crawl's refit count), standardised over the whole queue's words; each
        link's shift the mean of its words' judgements, then re-prioritised, one heapify. Returns
        the number of links changed."""
        if not self.judge_refresh:
            return 0
        entries = [e for e in self._live if e.docs]
        if not entries:
            return 0
        shifts = self.anchor_judge.rescore(classifier, fit, [d for e in entries for d in e.docs]).tolist()
        at = 0
        for e in entries:
            n = len(e.docs)
            e.jsum = sum(shifts[at:at + n])
            at += n
            judged = e.jsum / n
            e.base += judged - e.judged
            e.judged = judged
        self._requeue_bases()
        self._judge_refreshed += len(entries)
        return len(entries)

    def page_probabilities(self, probabilities: dict[str, float], holder_weight: float | None = None) -> None:
        """Fetched pages' P(relevant) under a refitted page classifier (URL -> P): the link labels
        follow them from the next retrain (``label_rule`` of the model). ``holder_weight`` (1 − ∂,
        given when R(l)'s holder term is P) with ``holder_refresh``: the queued links follow too
        (:meth:`refresh_holders`)."""
        self.model.set_probabilities(probabilities)
        if self.siblings:
            self._psum = self.model.probability_sum()
        if self.holder_refresh and holder_weight:
            self.refresh_holders(probabilities, holder_weight)

    def refresh_holders(self, probabilities: Mapping[str, float], weight: float) -> int:
        """Queued links whose holder page has a new P: R(l) + ``weight``·(P_new − P_old) and the
        new P in the holder column (R(l) = ∂·R(anchor) + (1 − ∂)·P, WL paper eq. 5), then
        re-prioritised as at a re-scoring, one heapify (docs/learned.md, "Queued links follow
        their holder's new P"). Returns the number of links changed."""
        def move(e: _Entry) -> bytes:
            p = probabilities.get(e.holder) if e.holder is not None else None
            return e.row if p is None else refreshed_row(e.row, p, weight)

        moved = self._move_rows(move)
        self._holder_refreshed += moved
        return moved

    def shift_scores(self, deltas: Mapping[str, float]) -> int:
        """Queued links of the URLs in ``deltas``: R(l) moved by each one's delta (clipped to
        [0, 1]), then re-prioritised as at a re-scoring, one heapify (the crawler takes the anchors'
        semantic prior out of the links queued under it: docs/learned.md, "Re-scoring when the
        anchors' prior stops"). Returns the number of links changed."""
        return self._move_rows(lambda e: shifted_score_row(e.row, deltas.get(e.link.url, 0.0)))

    def _move_rows(self, move) -> int:
        """Every queued link whose row ``move(entry)`` changes takes the new row and the model's
        value of it (R(l) while unfitted) as its base, association and judge shifts kept; one
        heapify. Returns how many changed."""
        changed = []
        for e in self._live:
            row = move(e)
            if row is not e.row:
                e.row = row
                changed.append(e)
        if not changed:
            return 0
        values = self.model.predict_rows([e.row for e in changed]).tolist()  # R(l) while unfitted
        for e, v in zip(changed, values):
            e.base = v + e.assoc + e.judged
        self._requeue_bases()
        return len(changed)

    def feedback(self, url: str, domain: str, relevance: float, beta: float | None = None) -> None:
        """The HarvestPipeline's hook for each counted page: records a page :meth:`observe_page` did
        not see (relevant when relevance ≥ β, or relevance ≥ the model's threshold without β)."""
        if self.model.page(url) is None:
            self.observe_page(url, domain, clip01(relevance),
                              relevant=None if beta is None else relevance >= beta)

    # -- learning -----------------------------------------------------------------------------------------
    def retrain(self) -> bool:
        """Retrain the model now and re-score queued links (module docstring); True if it fitted."""
        t0 = time.perf_counter()
        first = not self.model.fitted
        fitted = self.model.retrain()
        if fitted:
            self._retrains += 1
            self._rescore(everything=first)
        self._retrain_ms = (time.perf_counter() - t0) * 1e3
        return fitted

    def _rescore(self, everything: bool = False) -> None:
        live, m, r = self._live, self.rescore_top, self.rescore_sample
        full = everything or len(live) <= max(self.rescore_all, m + r)
        if full:
            todo = list(live)
        else:
            todo = [self._pop_best() for _ in range(m)]
            chosen = {id(e) for e in todo}
            rng, n = self._rng, len(live)
            for _ in range(r):
                e = live[rng.randrange(n)]
                if id(e) not in chosen:
                    chosen.add(id(e))
                    todo.append(e)
        if not todo:
            return
        values = self.model.predict_rows([e.row for e in todo]).tolist()
        assoc = self.association
        if assoc is not None:
            for i, (e, a) in enumerate(zip(todo, assoc.shifts([e.terms for e in todo]).tolist())):
                e.assoc = a
                values[i] += a
        for i, e in enumerate(todo):
            values[i] += e.judged
            e.base = values[i]
        self._sibling_values(todo, values)
        if not full:
            for e, v in zip(todo, values):
                e.priority = v
                self._enqueue(e)
            self._compact()
        else:
            self._requeue_all(todo, values)
        self._rescored += len(todo)

    def _sibling_values(self, entries: list[_Entry], values: list[float]) -> None:
        """With sibling yield on, ``values`` (the entries' bases) shifted by their holders' yield, in place."""
        if not self.siblings:
            return
        shifts: dict[str, float] = {}
        for i, e in enumerate(entries):
            if e.holder is not None:
                shift = shifts.get(e.holder)
                if shift is None:
                    shift = shifts[e.holder] = self.sibling_shift(e.holder)
                values[i] = shifted(values[i], shift)

    def _requeue_all(self, entries: list[_Entry], priorities: list[float]) -> None:
        """The heap rebuilt from every live entry with new priorities: one heapify."""
        heap, uid = [], self._next_uid
        for e, v in zip(entries, priorities):
            e.priority, e.uid = v, uid
            heap.append((-v, e.link.seq, uid, e))
            uid += 1
        self._next_uid = uid
        heapq.heapify(heap)
        self._heap = heap
        self._rebuild_bestfirst_heap()

    def _rebuild_bestfirst_heap(self) -> None:
        """With the guard: best-first's heap rebuilt from every live entry (their current uids)."""
        if self._bestfirst_heap is not None:
            self._bestfirst_heap = [(-row_score(e.row), e.link.seq, e.uid, e) for e in self._live]
            heapq.heapify(self._bestfirst_heap)

    def _requeue_bases(self) -> None:
        """The heap rebuilt from every live entry's base (with its sibling shift): one heapify."""
        live = self._live
        values = [e.base for e in live]
        self._sibling_values(live, values)
        self._requeue_all(live, values)

    def _refresh_association(self) -> None:
        """Every queued link's association shift recomputed from the statistics so far, one heapify."""
        live, changed = self._live, False
        for e, a in zip(live, self.association.shifts([e.terms for e in live]).tolist()):
            if a != e.assoc:
                e.base += a - e.assoc
                e.assoc, changed = a, True
        if changed:
            self._requeue_bases()

    def stats(self) -> dict:
        m = self.model
        return {
            "learned/model_version": m.version_,
            "learned/blend": m.blend_,  # the model's weight w against R(l), validated on unseen links
            "learned/words": int(m.words_),  # the model in the blend uses word features
            "learned/retrains": self._retrains,
            "learned/retrain_ms": round(self._retrain_ms, 3),
            "learned/labelled_links": m.n_examples,
            "learned/pages": m.n_pages,
            "learned/relevant_pages": m.n_relevant,
            "learned/explored": self._explored,
            "learned/rescored": self._rescored,
            **({"learned/holder_refreshed": self._holder_refreshed} if self.holder_refresh else {}),
            **({"learned/association_pages": self.association.pages, "learned/association_terms": len(self.association),
                "learned/association_examples": self._example_pages}
               if self.association is not None else {}),
            **example_link_stats(self),
            **({"learned/anchor_judged": self.anchor_judge.judged} if self.anchor_judge is not None else {}),
            **({"learned/holders_followed": self._holders_followed} if self.holder_mean else {}),
            **({"learned/judge_followed": self._judge_followed, "learned/judge_refreshed": self._judge_refreshed}
               if self.judge_refresh else {}),
            **({"learned/guard_learned": self._arm_pops[LEARNED_ARM],
                "learned/guard_bestfirst": self._arm_pops[BESTFIRST_ARM],
                "learned/guard_agreed": self._arm_pops[BOTH_ARMS]} if self._bestfirst_heap is not None else {}),
        }

    # -- JOBDIR -------------------------------------------------------------------------------------------
    def state(self) -> dict:
        """Queued links (in the live-list order) and everything else needed to continue identically:
        their rows and priorities, the model, the RNG, the waiting tables and the host counts."""
        return {
            "links": [e.link for e in self._live],
            "next_seq": self._next_seq,
            "learned": {
                "entries": [(e.row, e.holder, e.priority, e.base, e.terms, e.assoc, e.judged, e.hsum, e.hn,
                             e.docs, e.jsum) for e in self._live],
                "anchor_judge": self.anchor_judge,
                "association": self.association,
                "example_pages": self._example_pages,
                "siblings": {h: sorted(k) for h, k in self._kids.items()},
                "model": self.model,
                "rng": self._rng.getstate(),
                "incoming": list(self._incoming.items()),
                "inflight": list(self._inflight.items()),
                "hosts": {d: tuple(v) for d, v in self._hosts.items()},
                "counts": (self._good, self._seen, self._explored, self._rescored, self._retrains, self._next_uid),
                # the statistics' other counters, so that a resumed crawl's cover every run
                "tallies": {"holder_refreshed": self._holder_refreshed, "holders_followed": self._holders_followed,
                            "judge_followed": self._judge_followed, "judge_refreshed": self._judge_refreshed},
                "guard": ([list(a) for a in self._arms], list(self._arm_pops), list(self._armed.items())),
            },
        }

    def load_state(self, state: dict) -> None:
        self._heap, self._live = [], []
        if self._bestfirst_heap is not None:
            self._bestfirst_heap = []
        self._next_seq = state["next_seq"]
        learned = state.get("learned")
        if learned is None:  # written by another strategy: rows from the URLs, priorities as push
            links = sorted(state["links"], key=lambda l: l.seq)
            rows = self.model.encode([self._fallback_features(link) for link in links])
            values = self.model.predict_rows(rows).tolist() if self.model.fitted else None
            for i, (link, row) in enumerate(zip(links, rows)):
                self._add(link, row, None, values[i] if values is not None else clip01(link.score))
            self._queued_urls = {link.url for link in links}
            return
        self.model = learned["model"]
        self._rng.setstate(learned["rng"])
        self._incoming = OrderedDict(learned["incoming"])
        self._inflight = OrderedDict(learned["inflight"])
        self._hosts = {d: list(v) for d, v in learned["hosts"].items()}
        self._queued_urls = {link.url for link in state["links"]} | set(self._inflight)
        (self._good, self._seen, self._explored, self._rescored, self._retrains,
         self._next_uid) = learned["counts"]
        tallies = learned.get("tallies", {})  # a state saved before them: from 0
        self._holder_refreshed = tallies.get("holder_refreshed", 0)
        self._holders_followed = tallies.get("holders_followed", 0)
        self._judge_followed = tallies.get("judge_followed", 0)
        self._judge_refreshed = tallies.get("judge_refreshed", 0)
        self._kids = {h: set(k) for h, k in learned.get("siblings", {}).items()}
        self._psum = self.model.probability_sum() if self.siblings else 0.0
        self._held = {}
        if self.anchor_judge is not None and learned.get("anchor_judge") is not None:
            self.anchor_judge = learned["anchor_judge"]
        if self.association is not None and learned.get("association") is not None:
            self.association = learned["association"]
            self._example_pages = learned.get("example_pages", 0)
        for link, (row, holder, priority, *rest) in zip(state["links"], learned["entries"]):
            entry = _Entry(link, row, holder, priority, *rest)  # states before sibling yield: base = priority
            if self.siblings and holder is not None:
                self._held.setdefault(holder, []).append(entry)
            entry.pos = len(self._live)
            entry.uid = self._next_uid
            self._next_uid += 1
            self._live.append(entry)
            if self._by_url is not None:
                self._by_url[link.url] = entry
            self._heap.append((-priority, link.seq, entry.uid, entry))
        heapq.heapify(self._heap)
        self._rebuild_bestfirst_heap()
        if "guard" in learned:  # a state saved before the guard: its statistics start empty
            arms, pops, armed = learned["guard"]
            self._arms, self._arm_pops, self._armed = [list(a) for a in arms], list(pops), OrderedDict(armed)


@dataclass(frozen=True)
class LearnedOptions(StrategyOptions):
    """Options of ``learned``; each field is read from the setting of its name."""

    learned_epsilon: float = option_field(0.05, low=0.0, high=1.0)
    learned_retrain_every: int = option_field(100, low=1)
    learned_hops: int = option_field(3, low=0, high=16)
    learned_gamma: float = option_field(0.5, low=0.0, high=1.0)
    learned_threshold: float = option_field(0.5, low=0.0, high=1.0)
    learned_buffer: int = option_field(50_000, low=1)
    learned_rescore_all: int = option_field(4096, low=0)
    learned_rescore_top: int = option_field(128, low=0)
    learned_rescore_sample: int = option_field(128, low=0)
    learned_seed: int = 0
    learned_labels: str = option_field("count", choices=LABEL_RULES)
    learned_first_blend: str = option_field("none", choices=FIRST_BLENDS)
    learned_blend_score: str = option_field("auc", choices=BLEND_SCORES)
    learned_blend_label: str = option_field("reach", choices=BLEND_LABELS)
    learned_blend_max: float = option_field(1.0, low=0.0, high=1.0)
    learned_words: str = option_field("on", choices=WORD_RULES)
    learned_explore_sample: int = option_field(1, low=1, high=1024)
    learned_siblings: str = option_field("off", choices=SIBLING_RULES)
    learned_association: str = option_field("auto", choices=ASSOCIATION_SETTINGS)
    learned_association_examples: bool = True
    learned_holder_refresh: bool = True
    learned_example_links: bool = False
    learned_anchor_judge: float = option_field(0.1, low=0.0, high=100.0)
    learned_holder_mean: bool = False
    learned_anchor_judge_refresh: bool = True
    learned_guard: str = option_field("off", choices=GUARD_RULES)

    def kwargs(self) -> dict:
        """The :class:`LearnedFrontier` arguments (its model included)."""
        model = LinkValueModel(k=self.learned_hops, gamma=self.learned_gamma, threshold=self.learned_threshold,
                               retrain_every=self.learned_retrain_every, buffer_size=self.learned_buffer,
                               random_state=self.learned_seed, label_rule=self.learned_labels,
                               first_blend=self.learned_first_blend, blend_score=self.learned_blend_score,
                               blend_label=self.learned_blend_label, words=self.learned_words,
                               blend_max=self.learned_blend_max)
        return {"model": model, "epsilon": self.learned_epsilon, "rescore_all": self.learned_rescore_all,
                "rescore_top": self.learned_rescore_top, "rescore_sample": self.learned_rescore_sample,
                "seed": self.learned_seed, "explore_sample": self.learned_explore_sample,
                "siblings": self.learned_siblings,
                "association": "anchor" if self.learned_association == "auto" else self.learned_association,
                "association_examples": self.learned_association_examples,
                "holder_refresh": self.learned_holder_refresh, "example_links": self.learned_example_links,
                "anchor_judge": self.learned_anchor_judge, "holder_mean": self.learned_holder_mean,
                "judge_refresh": self.learned_anchor_judge_refresh, "guard": self.learned_guard}


def make_learned(options: LearnedOptions | Mapping | None = None,
                 is_relevant: Callable[[str], bool] | None = None) -> LearnedFrontier:
    """Factory of ``learned`` (:class:`LearnedOptions`, or a settings mapping)."""
    return LearnedFrontier(**LearnedOptions.coerce(options).kwargs())
