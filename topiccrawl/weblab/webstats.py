"""Corpus-generic web measurements: label base rates, topical locality, in-degree, tunnelling.

Works on any :class:`~topiccrawl.weblab.corpus.Corpus` (generated or real readers). Definitions
(also in ``docs/generated-web.md``):

* **sample**: ``corpus.search_sample(sample)`` (deterministic; evenly spread for large corpora).
  Link statistics use the outlinks of sampled pages only (``Page.links``, distinct, self-links
  dropped; redirects are followed up to 5 hops, broken links count as irrelevant targets).
* **locality** per label T: ``P(rel|rel)`` = share of links from T-pages whose target carries T;
  ``P(rel|irr)`` = the same for links from pages without T (link-weighted; Davison 2000).
* **in-degree**: number of sampled pages linking to a URL; power-law exponent ``alpha`` of the
  tail ``x >= xmin`` by the discrete maximum-likelihood approximation of Clauset, Shalizi and
  Newman 2009 (eq. 3.7), ``xmin`` chosen by the smallest Kolmogorov-Smirnov distance (sec. 3.3).
* **tunnelling** per label T (after Bergmark, Lagoze and Sbityakov 2002): the *cluster* of a
  relevant page r is every T-page reachable from r by following links through T-pages only.
  Its tunnelling distance is the least number of irrelevant pages on a link path from the
  cluster to a T-page outside it, where the path passes only through irrelevant *content*
  pages: pages with more than ``hub_links`` distinct outlinks (home, list and portal pages)
  are not expanded, because Bergmark's crawler tunnelled along article links, not through
  navigation hubs. Clusters are taken from an even sample of relevant pages (each cluster
  once); searches stop at ``max_depth`` (such clusters are counted as ``unreached``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from topiccrawl.weblab.corpus import Corpus


class CorpusGraph:
    """Outlinks and labels of pages, fetched once through the corpus (also the link graph of the
    ``oracle-path`` benchmark strategy, :class:`~topiccrawl.scoring.groundtruth.TruthPaths`)."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        self._links: dict[str, tuple[str, ...]] = {}
        self._labels: dict[str, frozenset[str]] = {}

    def links(self, url: str) -> tuple[str, ...]:
        out = self._links.get(url)
        if out is None:
            page, hops = self.corpus.get(url), 0
            while page is not None and 300 <= page.status < 400 and hops < 5:
                page, hops = self.corpus.get(page.headers.get("Location", "")), hops + 1
            found = page.links if page is not None and page.status == 200 else []
            out = tuple(dict.fromkeys(v for v in found if v != url))
            self._links[url] = out
        return out

    def labels(self, url: str) -> frozenset[str]:
        out = self._labels.get(url)
        if out is None:
            out = self._labels[url] = self.corpus.labels(url)
        return out


def power_law_fit(values: Iterable[int], min_tail: int = 30) -> dict:
    """Discrete power-law fit of positive integers: ``alpha``, ``xmin``, tail size, KS distance."""
    xs = sorted(v for v in values if v > 0)
    best = {"alpha": None, "xmin": None, "tail": 0, "ks": None}
    if len(xs) < min_tail:
        return best
    candidates = sorted(set(xs))
    for xmin in candidates[:200]:
        tail = [x for x in xs if x >= xmin]
        n = len(tail)
        if n < min_tail:
            break
        alpha = 1 + n / sum(math.log(x / (xmin - 0.5)) for x in tail)
        ks, i = 0.0, 0
        for x in sorted(set(tail)):  # empirical vs fitted CCDF P(X >= x)
            while i < n and tail[i] < x:
                i += 1
            ks = max(ks, abs((n - i) / n - (x / xmin) ** (1 - alpha)))
        if best["ks"] is None or ks < best["ks"]:
            best = {"alpha": round(alpha, 3), "xmin": xmin, "tail": n, "ks": round(ks, 4)}
    return best


def _tunnels(g: CorpusGraph, rel_pages: list[str], label: str, hub_links: int, max_depth: int,
             clusters: int) -> dict:
    step = max(1, len(rel_pages) // clusters)
    assigned: set[str] = set()
    dists: list[int] = []
    tried = 0
    for r in rel_pages[::step]:
        if r in assigned:
            continue
        tried += 1
        cluster, todo = {r}, [r]
        while todo and len(cluster) < 5000:
            for v in g.links(todo.pop()):
                if v not in cluster and label in g.labels(v):
                    cluster.add(v)
                    todo.append(v)
        assigned |= cluster
        frontier = {v for u in cluster for v in g.links(u) if label not in g.labels(v)}
        seen = set(frontier) | cluster
        for depth in range(1, max_depth + 1):
            nxt: set[str] = set()
            hit = False
            for v in frontier:
                out = g.links(v)
                if len(out) > hub_links:
                    continue
                for w in out:
                    if w in seen:
                        continue
                    if label in g.labels(w):
                        hit = True
                        break
                    seen.add(w)
                    nxt.add(w)
                if hit:
                    break
            if hit:
                dists.append(depth)
                break
            frontier = nxt
            if not frontier or len(seen) > 200_000:
                break
    if not dists:
        return {"clusters": tried, "reached": 0, "unreached": tried}
    return {"clusters": tried, "reached": len(dists), "unreached": tried - len(dists),
            "min": min(dists), "mean": round(sum(dists) / len(dists), 2), "max": max(dists),
            "histogram": dict(sorted(Counter(dists).items()))}


def measure(corpus: Corpus, sample: int = 20000, labels: Iterable[str] | None = None,
            hub_links: int = 25, max_depth: int = 20, tunnel_clusters: int = 200) -> dict:
    """Measure a corpus on a deterministic sample (see the module docstring for definitions).

    ``labels`` defaults to every ``topic:*`` and ``site:*`` label seen in the sample.
    """
    g = CorpusGraph(corpus)
    urls = list(corpus.search_sample(sample))
    page_labels = {u: g.labels(u) for u in urls}
    if labels is None:
        labels = sorted({x for ls in page_labels.values() for x in ls
                         if x.startswith(("topic:", "site:"))})
    labels = list(labels)
    links_total = 0
    indeg: Counter[str] = Counter()
    counts = {t: [0, 0, 0, 0] for t in labels}  # rel->rel, rel->any, irr->rel, irr->any
    for u in urls:
        out = g.links(u)
        links_total += len(out)
        indeg.update(out)
        src = page_labels[u]
        for t in labels:
            k = 0 if t in src else 2
            counts[t][k + 1] += len(out)
            counts[t][k] += sum(t in g.labels(v) for v in out)
    degrees = sorted(indeg.values())
    result = {
        "name": corpus.name, "pages": len(corpus), "sampled": len(urls), "links": links_total,
        "links_per_page": round(links_total / max(1, len(urls)), 2),
        "base_rates": {t: round(sum(t in ls for ls in page_labels.values()) / max(1, len(urls)), 4)
                       for t in labels},
        "locality": {t: {"p_rel_given_rel": round(c[0] / c[1], 4) if c[1] else None,
                         "p_rel_given_irr": round(c[2] / c[3], 4) if c[3] else None,
                         "links_from_rel": c[1]} for t, c in counts.items()},
        "in_degree": {"targets": len(degrees),
                      "mean": round(sum(degrees) / len(degrees), 2) if degrees else 0,
                      "median": degrees[len(degrees) // 2] if degrees else 0,
                      "max": degrees[-1] if degrees else 0, **power_law_fit(degrees)},
        "tunnelling": {},
    }
    for t in labels:
        rel = [u for u in urls if t in page_labels[u]]
        if rel:
            result["tunnelling"][t] = _tunnels(g, rel, t, hub_links, max_depth, tunnel_clusters)
    return result
