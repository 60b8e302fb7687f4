"""PageRank refresh time of the crawl's link graph (topiccrawl.scoring.importance) at 10^5 and 10^6 nodes.

    python -m bench.bench_pagerank                  # 100,000 and 1,000,000 nodes
    python -m bench.bench_pagerank --nodes 100000 --repeats 3

The graph has the shape of a crawl (synthetic): a quarter of the nodes are downloaded pages with
15 outlinks each, 70 % to pages of the same site (1,000 nodes per site) and 30 % to targets drawn
with Zipf-like popularity over the whole graph; the other nodes are queued or dangling URLs. The
graph is built through ``LinkGraph.add_page`` with real URL strings, as the crawl builds it.
Timed: the first refresh (sparse matrix build + power iteration from PR = 1 to the default
tolerance) and a warm refresh after 500 more pages (what ``PageRankCache`` does every
``TOPICCRAWL_PAGERANK_EVERY`` pages). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from topiccrawl.scoring.importance import LinkGraph, PageRankCache

SITE = 1000
OUTLINKS = 15


def url(i: int) -> str:
    return f"http://www.site{i // SITE}.example/p/{i}.html"


def add_pages(graph: LinkGraph, pages: range, n: int, rng: random.Random) -> None:
    for page in pages:
        site = page // SITE * SITE
        targets = [site + rng.randrange(SITE) if rng.random() < 0.7 else int(n * rng.random() ** 3)
                   for _ in range(OUTLINKS)]
        graph.add_page(url(page), [url(min(t, n - 1)) for t in targets])


def measure(n: int, seed: int) -> dict:
    rng = random.Random(seed)
    graph = LinkGraph()
    order = list(range(n))
    rng.shuffle(order)
    downloaded = order[: n // 4]
    t0 = time.perf_counter()
    add_pages(graph, downloaded, n, rng)
    build = time.perf_counter() - t0
    cache = PageRankCache(graph, every=500)
    t0 = time.perf_counter()
    cache.refresh()
    cold = time.perf_counter() - t0
    add_pages(graph, order[n // 4: n // 4 + 500], n, rng)
    t0 = time.perf_counter()
    cache.refresh()
    warm = time.perf_counter() - t0
    return {"nodes": len(graph), "edges": graph.n_edges, "build": build, "cold": cold, "warm": warm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="100000,1000000")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("| target nodes | nodes | edges | first refresh s | warm refresh s (500 pages later) "
          "| graph build s (add_page) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.nodes.split(",")):
        runs = [measure(n, seed) for seed in range(1, args.repeats + 1)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {n:,} | {med['nodes']:,.0f} | {med['edges']:,.0f} | {med['cold']:.2f} | {med['warm']:.2f} "
              f"| {med['build']:.1f} |", flush=True)
    print(f"\nMedian of {args.repeats} graphs per size, Python {sys.version.split()[0]}.")


if __name__ == "__main__":
    main()
