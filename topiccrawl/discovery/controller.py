"""The DWDBRM discovery loop (Algorithm 1 with Algorithm 3), Scrapy-free.

:class:`DiscoveryController` holds everything one discovery crawl learns: the seed and
background pages, the results, the fitted CombinedFunctionRank (Algorithm 2), the current
ranking, the UCB1 bandit over the operators and the request planner. The Scrapy layer
(:mod:`topiccrawl.spiders.discovery`) feeds it fetched pages and calls :meth:`end_iteration` when
an iteration's requests are drained (the ``spider_idle`` signal); the controller ranks, rewards
the operator that ran (eqs. 9–10), chooses the next one by UCB1 (eq. 11) and plans its requests.
The TopicScheduler keeps the controller, so its state is saved and restored with JOBDIR.

Our readings (docs/dwdbrm.md): results are kept unique by URL (the same page found twice is one
page); seed and background pages are not results; the ranker is fitted once, on the seeds
(positives) and the background sample (negatives), and re-ranks all results every iteration; an
operator starts from the k best pages it has not started from before (DISCO's reading: with the
literal "top-k of the ranking" the top-k soon stops changing and every operator runs dry). The
page limit is exact: no plan holds more page requests than the limit has room for, and once the
results reach ``page_limit`` no new request is planned; pages fetched after that (requests
already in flight) are dropped, not results (counted in :attr:`over_limit`), and the crawl stops
after the iteration.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from urllib.parse import urlsplit

from topiccrawl.discovery.bandit import UCB1Bandit, operator_reward
from topiccrawl.discovery.pages import DiscoveredPage
from topiccrawl.discovery.planner import (
    DiscoveryPlanner,
    KeywordQueries,
    PlannedRequest,
)
from topiccrawl.discovery.rankers import (
    DEFAULT_RANKERS,
    RANKERS,
    CombinedFunctionRank,
    Ranking,
)
from topiccrawl.scoring.importance import LinkGraph
from topiccrawl.scoring.metrics import mean_rank, median_rank, precision_at

logger = logging.getLogger(__name__)

P_AT = (10, 17, 35, 50, 100)


class DiscoveryController:
    def __init__(self, topic, operators, backend, *, k: int = 10, alpha: float = 0.2,
                 reward: str = "paper", page_limit: int = 5000, rankers=DEFAULT_RANKERS,
                 combination: str = "position") -> None:
        self.topic = topic
        self.backend = backend
        self.bandit = UCB1Bandit.for_backend(backend, operators)
        for op, why in self.bandit.dropped.items():
            logger.warning("discovery operator %s dropped: %s", op, why)
        self.planner = DiscoveryPlanner(backend, KeywordQueries(topic.words, topic.description))
        self.k = k
        self.alpha = alpha
        self.reward = reward
        self.page_limit = page_limit
        self.rankers = tuple(rankers)
        self.combination = combination
        self.ranker: CombinedFunctionRank | None = None
        self.graph = LinkGraph()
        self.seeds: dict[str, DiscoveredPage] = {}
        self.background: dict[str, DiscoveredPage] = {}
        self.results: dict[str, DiscoveredPage] = {}
        self.known: set[str] = set()
        self.ranking = Ranking()
        self.iteration = 0
        self.operator: str | None = None
        self.top: list[str] = []
        self.found: list[str] = []
        self._emitting: list[DiscoveredPage] = []  # pages an unfinished end_iteration was to emit
        #: while end_iteration opens the next iteration: (iteration, operator, top) before it, the
        #: operator chosen and the pages it added to ``expanded`` (undone by :meth:`flush`)
        self._opening: tuple | None = None
        #: pages each operator has already started from: an operator plans from the k best pages
        #: it has not expanded yet (as DISCO does), else a stable top-k starves every operator
        self.expanded: dict[str, set[str]] = {op: set() for op in self.bandit.operators}
        self.finished: str | None = None
        #: pages fetched after the results reached the page limit (dropped, not results)
        self.over_limit = 0
        #: the results of all workers of a shared crawl (``add``, ``total``; see :meth:`share`)
        self.shared_results = None

    def share(self, bandit, results) -> None:
        """Play ``bandit``, shared with other workers, and count the page limit on ``results``,
        their common result counter (``TOPICCRAWL_STORE=redis``: topiccrawl/redis/discovery.py)."""
        self.bandit, self.shared_results = bandit, results

    # -- pages in ---------------------------------------------------------------------------
    def _graph(self, page: DiscoveredPage) -> None:
        self.graph.add_page(page.url, page.outlinks)

    def add_seed(self, page: DiscoveredPage) -> None:
        self.seeds[page.url] = page
        self.known.add(page.url)
        self._graph(page)

    def add_background(self, page: DiscoveredPage) -> None:
        self.background[page.url] = page

    def add_result(self, page: DiscoveredPage) -> bool:
        """A page an operator fetched; False when it was already a result or a seed, or when the
        page limit is reached (the page is dropped and counted in :attr:`over_limit`)."""
        self.known.add(page.url)
        if page.url in self.results or page.url in self.seeds:
            return False
        if self.full:
            self.over_limit += 1
            return False
        page.operator, page.iteration = self.operator or page.operator, self.iteration
        self.results[page.url] = page
        self.found.append(page.url)
        if self.shared_results is not None:
            self.shared_results.add()
        self._graph(page)
        return True

    @property
    def result_count(self) -> int:
        """The results counted against the page limit: this controller's, or all workers'."""
        return len(self.results) if self.shared_results is None else self.shared_results.total()

    @property
    def full(self) -> bool:
        """The page limit is reached: requests already planned finish, no new ones are made."""
        return self.result_count >= self.page_limit

    def _room(self, planned: list[PlannedRequest]) -> list[PlannedRequest]:
        """``planned`` with at most as many page requests (pages and hubs: each may become a
        result) as the page limit has room for; search requests are kept."""
        room = max(0, self.page_limit - self.result_count)
        out = []
        for p in planned:
            if p.role == "search" or room > 0:
                out.append(p)
                room -= p.role != "search"
        return out

    def follow(self, request: PlannedRequest, results) -> list[PlannedRequest]:
        if self.full:
            return []
        planned = self._room(self.planner.follow(request, results, self.known))
        self.known.update(p.url for p in planned)
        return planned

    def expand_hub(self, hub: DiscoveredPage) -> list[PlannedRequest]:
        if self.full:
            return []
        planned = self._room(self.planner.expand_hub(hub, self.known))
        self.known.update(p.url for p in planned)
        return planned

    # -- the loop ---------------------------------------------------------------------------
    def _fit(self) -> None:
        rankers = self.rankers
        if not self.background:
            needy = [r for r in rankers if RANKERS[r].needs_negatives]
            if needy:
                logger.warning("no background pages: rankers %s (need negatives) left out", ", ".join(needy))
                rankers = tuple(r for r in rankers if r not in needy)
        self.ranker = CombinedFunctionRank(list(self.topic.words), rankers=rankers, alpha=self.alpha,
                                           combination=self.combination)
        self.ranker.fit(list(self.seeds.values()), list(self.background.values()))

    def end_iteration(self) -> tuple[list[DiscoveredPage], list[PlannedRequest]]:
        """Close the running iteration and open the next one.

        Returns the pages found in the closed iteration (to emit, ranked) and the requests of the
        next iteration (empty when the crawl is over: :attr:`finished` says why). An error on the
        way (a shared bandit out of reach) leaves those pages to :meth:`flush`.
        """
        result = self._end_iteration()
        self._emitting, self._opening = [], None
        return result

    def _end_iteration(self) -> tuple[list[DiscoveredPage], list[PlannedRequest]]:
        if self.ranker is None:
            if not self.seeds:
                self.finished = "no seed page could be fetched"
                return [], []
            self._fit()
        previous = self.ranking
        emitted = self._emitting = [self.results[u] for u in self.found]
        if self.operator is not None:
            self.ranking = self.ranker.rank(list(self.results.values()), self.graph)
            reward = operator_reward(self.ranking.urls, previous.urls, self.found, self.reward)
            record = self.bandit.update(self.operator, reward, self.top, self.found)
            logger.info(
                "iteration %d: %s found %d new pages, reward %.4f; UCB %s",
                record.iteration, self.operator, len(self.found), reward,
                {op: round(s, 4) for op, s in record.scores.items()},
            )
            # rewarded: a state saved from here on (a finished crawl) has no play to resume
            self.operator, self.found = None, []
        count = self.result_count
        if count >= self.page_limit:
            self.finished = f"page limit reached ({count} >= {self.page_limit})"
            return emitted, []
        # an operator that plans nothing (queries used up, no new links) scores 0 and yields
        for _ in range(len(self.bandit.active)):
            before = (self.iteration, self.operator, self.top)
            self._opening = (*before, None, [])
            self.iteration += 1
            self.operator = self.bandit.select()
            top_pages = self._top_for(self.operator)
            self.top = [p.url for p in top_pages]
            self._opening = (*before, self.operator, [u for u in self.top if u not in self.expanded[self.operator]])
            self.expanded[self.operator].update(self.top)
            self.found = []
            planned = self._room(self.planner.plan(self.operator, top_pages, self.known))
            self.known.update(p.url for p in planned if p.role != "search")
            if planned:
                return emitted, planned
            self.bandit.update(self.operator, 0.0, self.top, [])
        self.finished = "no operator can find anything new"
        self.operator = None
        return emitted, []

    def flush(self) -> list[DiscoveredPage]:
        """The pages found so far in the running iteration, to emit, ranked with the rest, without
        rewarding its operator (the crawl stops with its bandit out of reach). Its operator stays
        the running one: a resumed crawl finishes the iteration and rewards it for the pages found
        from then on."""
        if self._opening is not None:  # stopped while opening the next iteration: as if not begun
            self.iteration, self.operator, self.top, op, added = self._opening
            if op is not None:
                self.expanded[op].difference_update(added)
            self._opening = None
        emitted = list({page.url: page for page in (*self._emitting, *(self.results[u] for u in self.found))}.values())
        self._emitting, self.found = [], []
        if not emitted:
            return []
        if self.ranker is None:
            self._fit()
        self.ranking = self.ranker.rank(list(self.results.values()), self.graph)
        return emitted

    def _top_for(self, operator: str) -> list[DiscoveredPage]:
        """The k best pages (seeds, then the ranking) that ``operator`` has not started from."""
        done = self.expanded[operator]
        candidates = self.ranking.urls if len(self.ranking) else list(self.seeds)
        pages = self.results | self.seeds
        return [pages[u] for u in candidates if u not in done][: self.k]

    # -- reports ----------------------------------------------------------------------------
    def operator_stats(self) -> dict[str, dict]:
        out = {}
        for op in self.bandit.operators:
            pulls = self.bandit.plays[op]
            out[op] = {"pulls": pulls, "reward_mean": self.bandit.mean(op),
                       "new_pages": sum(len(r.new_pages) for r in self.bandit.log if r.operator == op)}
        return out

    def ranked_rows(self) -> list[dict]:
        rows = []
        for rp in self.ranking:
            page = self.results[rp.url]
            rows.append({"url": rp.url, "rank": rp.rank, "score": rp.score, "positions": rp.positions,
                         "operator": page.operator, "iteration": page.iteration})
        return rows

    def ranking_quality(self, is_relevant) -> dict[str, dict]:
        """P@N, Mean Rank and Median Rank (Tables 1–2) of each ranker and of CombinedF."""
        if not len(self.ranking):
            return {}
        names = [n for n in self.ranking[0].positions]
        out = {}
        for name in ["combined", *names]:
            key = (lambda rp: (rp.rank, rp.url)) if name == "combined" else (lambda rp, n=name: (rp.positions[n], rp.url))
            order = [is_relevant(rp.url) for rp in sorted(self.ranking, key=key)]
            row = {f"p_at_{n}": precision_at(order, n) for n in P_AT}
            row["mean_rank"] = mean_rank(order)
            row["median_rank"] = median_rank(order)
            out[name] = row
        return out

    @staticmethod
    def harvest_segments(curve: list[tuple[int, int, int]], segments: int = 5) -> list[dict]:
        """Page and site harvest rate over the run in equal segments (the papers' Figs. 2–3),
        from :meth:`curves`."""
        if not curve:
            return []
        size = max(1, -(-len(curve) // segments))
        out, prev = [], (0, 0, 0)
        for i in range(0, len(curve), size):
            row = curve[min(i + size, len(curve)) - 1]
            pages, relevant, sites = (row[k] - prev[k] for k in range(3))
            out.append({"pages": pages, "page_harvest_rate": relevant / pages,
                        "new_relevant_sites": sites, "site_harvest_rate": sites / pages})
            prev = row
        return out

    def curves(self, is_relevant) -> list[tuple[int, int, int]]:
        """(pages retrieved, relevant pages, relevant sites) after each result."""
        rel = 0
        sites: set[str] = set()
        out = []
        for i, u in enumerate(self.results, 1):
            if is_relevant(u):
                rel += 1
                sites.add(urlsplit(u).hostname)
            out.append((i, rel, len(sites)))
        return out

    # -- persistence ------------------------------------------------------------------------
    def state(self) -> dict:
        return {
            "bandit": self.bandit.state(), "planner": self.planner.state(), "ranker": self.ranker,
            "graph": self.graph.state(), "seeds": self.seeds, "background": self.background,
            "results": self.results, "known": self.known, "ranking": self.ranking,
            "iteration": self.iteration, "operator": self.operator, "top": self.top, "found": self.found,
            "expanded": self.expanded, "over_limit": self.over_limit,
        }

    def load_state(self, state: dict) -> None:
        restored = UCB1Bandit.from_state(state["bandit"])
        if self.shared_results is None:
            self.bandit = restored
        else:  # a worker of a shared crawl (see share): the shared bandit, with this worker's plays
            self.bandit.resume(restored.log, state["operator"])
        self.planner.restore(state["planner"])
        self.ranker = state["ranker"]
        self.graph = LinkGraph.from_state(state["graph"])
        for name in ("seeds", "background", "results", "known", "ranking", "iteration", "operator", "top",
                     "found", "expanded"):
            setattr(self, name, state[name])
        self.over_limit = state.get("over_limit", 0)

    def log_records(self) -> list[dict]:
        return [asdict(r) for r in self.bandit.log]

