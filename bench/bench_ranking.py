"""Time of DWDBRM's CombinedFunctionRank (Algorithm 2) on 1k–20k pages of a generated web.

    python -m bench.bench_ranking --web "generated:zh-realestate" --sizes 1000,5000,10000,20000

Pages are the generated web's documents (title, text, outlinks; about 2,400 characters of mixed
Chinese/English text each). Seeds: 10 pages labelled ``topic:房产``; background: 200 other pages
(both taken outside the ranked pages). For each size, with a fresh ranker:

* fit: vocabulary (TF-IDF over seeds + background) and the five rankers;
* first rank: tokenises all N pages (jieba; done once per page), scores, PageRank, combines;
* re-rank: the same N pages again (the per-iteration cost the paper's loop pays);
* iteration: 5% new pages added, rankers refit on the same vocabulary, all pages re-ranked.

P@100 is the fraction of the top 100 labelled ``topic:房产`` (ranked set base rate shown).
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import time

from topiccrawl.discovery.pages import DiscoveredPage
from topiccrawl.discovery.rankers import CombinedFunctionRank
from topiccrawl.scoring.metrics import precision_at
from topiccrawl.scoring.topic import load_topic
from topiccrawl.weblab.corpus import open_corpus

LABEL = "topic:房产"


def pages_of(corpus, urls) -> list[DiscoveredPage]:
    out = []
    for url in urls:
        doc = corpus.doc(url)
        if doc is not None:
            out.append(DiscoveredPage(url, doc.title, doc.text, outlinks=tuple(doc.links)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--web", default="generated:zh-realestate")
    ap.add_argument("--sizes", default="1000,5000,10000,20000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    topic = load_topic("realestate")
    extra = 2000
    corpus = open_corpus(f"{args.web}?pages={max(sizes) * 21 // 20 + extra}")
    urls = list(corpus.iter_urls())
    spare = urls[-extra:]
    seeds = pages_of(corpus, [u for u in spare if LABEL in corpus.labels(u)][:10])
    background = pages_of(corpus, [u for u in spare if LABEL not in corpus.labels(u)][:200])
    print(f"web {args.web}, {len(seeds)} seeds, {len(background)} background pages\n")
    print("| pages | fit (s) | first rank incl. tokenising (s) | re-rank (s) "
          "| iteration: +5% pages, refit, re-rank (s) | P@100 | base rate |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        ranked = pages_of(corpus, urls[:n])
        more = pages_of(corpus, urls[n:n + n // 20])
        cfr = CombinedFunctionRank(topic_words=tuple(topic.words))
        t0 = time.perf_counter()
        cfr.fit(seeds, background)
        t1 = time.perf_counter()
        cfr.rank(ranked)
        t2 = time.perf_counter()
        ranking = cfr.rank(ranked)
        t3 = time.perf_counter()
        cfr.fit(seeds, background)
        cfr.rank(ranked + more)
        t4 = time.perf_counter()
        relevant = [LABEL in corpus.labels(u) for u in ranking.urls]
        print(f"| {len(ranked):,} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} | {t4 - t3:.2f} "
              f"| {precision_at(relevant, 100):.2f} | {sum(relevant) / len(relevant):.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
