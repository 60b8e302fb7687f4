"""What five example pages say, and what a crawl's classifier makes of them (docs/benchmarks.md,
"How far the words can lead").

    TOPICCRAWL_DATA_DIR=/path/to/data python -m bench.example_ranking OUT \\
        [--topics 'bench/topics/wikispeedia/*.toml'] [--top 250] [--rep 0]

``OUT`` is a ``bench.learned_focus`` output folder with ``learned-examples`` crawls on Wikispeedia.
For each topic a page classifier is trained on the 5 pages ``-a examples=truth:5`` picks (PU, as
the crawl's), once against every page of the corpus and once against what that crawl had at 100,
250 and 1,000 fetched pages (the topic's seeds and the pages fetched so far, in the crawl's
order). Each ranks the whole corpus (the examples left out); printed: the share of the topic's
relevant pages among the ``--top`` most likely. Close figures mean the crawl's classifier knows
the category about as well as the examples allow, so what is lost is in choosing links.
"""

from __future__ import annotations

import csv
import glob
import statistics
from pathlib import Path

from bench.simulate_focus import example_probabilities, hashed_pages, ranked_recall, runs_parser
from topiccrawl.learning.classifier import PageClassifier
from topiccrawl.scoring.topic import load_topic

POINTS = (100, 250, 1000)


def main(argv=None) -> int:
    ap = runs_parser(__doc__, "a bench.learned_focus output folder with learned-examples crawls",
                     "bench/topics/wikispeedia/*.toml")
    ap.add_argument("--top", type=int, default=250)
    ap.add_argument("--rep", type=int, default=0, help="which repetition's fetch order")
    args = ap.parse_args(argv)
    pages, corpus, urls, at, everything = hashed_pages(args.web)
    table: dict[str, list[float]] = {"whole corpus": [], **{f"crawl@{n}": [] for n in POINTS}}
    for path in sorted(glob.glob(args.topics)):
        topic = load_topic(path)
        harvest = Path(args.out) / "runs" / topic.name / f"learned-examples-{args.rep}" / "harvest.csv"
        if not harvest.exists():
            print(f"{topic.name}: no crawl in {harvest.parent}, skipped")
            continue
        relevant = {u for u in urls if pages[u][2] & frozenset(topic.labels)}
        probability, examples = example_probabilities(pages, corpus, frozenset(topic.labels), everything)
        positives = everything[[at[u] for u in examples if u in at]]
        row = [ranked_recall(probability, relevant, args.top, examples)]
        with harvest.open(encoding="utf-8") as f:
            fetched = [r["url"] for r in csv.DictReader(f)]
        background = [at[u] for u in topic.seeds if u in at]
        for n in POINTS:
            unlabeled = everything[background + [at[u] for u in fetched[:n] if u in at]]
            clf = PageClassifier().refit(positives, unlabeled)
            row.append(ranked_recall(dict(zip(urls, clf.predict_proba(everything)[:, 1].tolist())), relevant,
                                     args.top, examples))
        for key, value in zip(table, row):
            table[key].append(value)
        print(f"{topic.name:28s} " + " ".join(f"{v:.3f}" for v in row), flush=True)
    print(f"mean share of the relevant pages in the top {args.top}: "
          + ", ".join(f"{k} {statistics.mean(v):.3f}" for k, v in table.items() if v))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
