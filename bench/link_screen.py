"""How well link scores put the relevant targets first in a real crawl's queue (docs/learned.md,
"The page classifier judges the words around the anchor").

    TOPICCRAWL_DATA_DIR=/path/to/data python -m bench.link_screen OUT \\
        [--topics 'bench/topics/wikispeedia-dev*/*.toml'] [--variant learned-examples]

``OUT`` is a ``bench.learned_focus`` output folder of Wikispeedia crawls. For every crawl of
``--variant`` and every checkpoint N (100, 250) the pages it had fetched by N (its harvest.csv
order) are taken as fetched, and every page they link to and it had not fetched (the examples
aside) as queued. A page classifier is fitted as the crawl's is at that point (PU: the 5 examples
``truth:5`` picks, or with ``--variant learned`` the 3 % of fetched pages with the highest R(P),
against the fetched pages) and each queued target is scored by rules built from what a crawler
knows before fetching it; printed per rule: the share of truly relevant targets among the 16 / 50
/ 150 best, mean over crawls. Rules:

* ``crawl`` — the crawl's own order: 0.7·R(anchor) + 0.3·holder + the anchor association's shift
  (the holder: the first fetched page linking to the target, its P with examples, R(P) with words;
  R(anchor) over the derived words of the crawl's stats, or the topic's words);
* ``holder-mean`` — the same with the mean holder score over every fetched page linking to it;
* ``judge-λ`` — ``crawl`` + λ·(z − μ)/σ, z the classifier's linear score of the anchor and the words
  around it, standardised over the queue (``TOPICCRAWL_LEARNED_ANCHOR_JUDGE``).

A snapshot of a queue, not a crawl: a rule that ranks it better may still fetch fewer relevant
pages (the anchor judge did, docs/learned.md). It screens, the crawls decide.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np

from bench.simulate_focus import ANCHOR_WEIGHT, hashed_pages, runs_parser
from topiccrawl.learning.anchorjudge import context_words
from topiccrawl.learning.association import TermAssociation, anchor_terms
from topiccrawl.learning.classifier import PageClassifier, hash_short
from topiccrawl.scoring.relevance import RelevanceScorer
from topiccrawl.scoring.topic import load_topic

POINTS = (100, 250)
TOPS = (16, 50, 150)
JUDGE_WEIGHTS = (0.05, 0.1, 0.2, 0.4)


def derived_topic(stats_path: Path):
    """The topic of an examples-only crawl's derived words (its stats.json), for R(anchor)."""
    words = json.loads(stats_path.read_text(encoding="utf-8"))["topiccrawl/examples/words"]
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False, encoding="utf-8") as f:
        f.write(f'name = "derived"\nlabels = ["derived"]\nbeta = 0.3\n{words}\n')
    try:
        return load_topic(f.name)
    finally:
        os.unlink(f.name)


def screen(pages, X, row, fetched, examples, topic, relevant) -> dict[str, list[float]]:
    """Precision of each rule's top 16 / 50 / 150 among the targets queued after ``fetched``."""
    done = set(fetched)
    scorer = RelevanceScorer(topic, anchor_weight=ANCHOR_WEIGHT)
    assoc = TermAssociation()
    if examples:
        clf = PageClassifier().refit(X[[row[u] for u in examples]], X[[row[u] for u in fetched]])
        score = dict(zip(fetched, clf.predict_proba(X[[row[u] for u in fetched]])[:, 1].tolist()))
        for u in examples:
            assoc.add_page(pages[u][0], 1.0)
        for u in fetched:
            scorer.page_relevance(pages[u][0])
    else:
        score = {u: scorer.page_relevance(pages[u][0]) for u in fetched}
        top = sorted(fetched, key=lambda u: -score[u])[: max(3, round(0.03 * len(fetched)))]
        clf = PageClassifier().refit(X[[row[u] for u in top]], X[[row[u] for u in fetched]])
    for u in fetched:
        assoc.add_page(pages[u][0], score[u])
    holders: dict[str, list[str]] = {}
    first: dict[str, tuple] = {}
    for u in fetched:
        for target, text, with_context, _ in pages[u][1]:
            if target not in pages or target in done or target in examples:
                continue
            if target not in holders:
                holders[target] = []
                first[target] = (scorer.anchor_relevance(with_context), assoc.shift(anchor_terms(text)),
                                 (*anchor_terms(text), *context_words(with_context[len(text):])))
            if not holders[target] or holders[target][-1] != u:
                holders[target].append(u)
    targets = list(holders)
    truth = np.array([t in relevant for t in targets])
    anchor = np.array([first[t][0] for t in targets])
    shift = np.array([first[t][1] for t in targets])
    holder = np.array([score[holders[t][0]] for t in targets])
    mean = np.array([statistics.fmean(score[h] for h in holders[t]) for t in targets])
    crawl = ANCHOR_WEIGHT * anchor + (1 - ANCHOR_WEIGHT) * holder + shift
    z = clf.decision_function(hash_short([first[t][2] for t in targets]))
    z = (z - z.mean()) / (z.std() or 1.0)
    rules = {"crawl": crawl, "holder-mean": ANCHOR_WEIGHT * anchor + (1 - ANCHOR_WEIGHT) * mean + shift,
             **{f"judge-{w}": crawl + w * z for w in JUDGE_WEIGHTS}}
    out = {}
    for name, values in rules.items():
        order = np.argsort(-values, kind="stable")
        out[name] = [float(truth[order[:k]].mean()) for k in TOPS]
    return out


def main(argv=None) -> int:
    ap = runs_parser(__doc__, "a bench.learned_focus output folder of Wikispeedia crawls", "bench/topics/wikispeedia-dev*/*.toml")
    ap.add_argument("--variant", default="learned-examples", choices=("learned-examples", "learned"))
    args = ap.parse_args(argv)
    pages, corpus, _, row, X = hashed_pages(args.web)
    topics = {Path(p).stem: p for p in glob.glob(args.topics)}
    results: dict[tuple[int, str], list[list[float]]] = {}
    for run in sorted(Path(args.out, "runs").glob(f"*/{args.variant}-[0-9]*")):
        name = run.parent.name
        if name not in topics:
            continue
        topic = load_topic(topics[name])
        labels = frozenset(topic.labels)
        relevant = {u for u, (_, _, page_labels) in pages.items() if page_labels & labels}
        examples = ()
        if args.variant == "learned-examples":
            examples = tuple(u for u in corpus.truth_sample(labels, 5, seed=1) if u in row)
            topic = derived_topic(run / "stats.json")
        with open(run / "harvest.csv", encoding="utf-8") as f:
            order = [r["url"] for r in csv.DictReader(f) if r["url"] in row]
        for n in POINTS:
            for rule, precision in screen(pages, X, row, order[:n], examples, topic, relevant).items():
                results.setdefault((n, rule), []).append(precision)
    print(f"{args.variant}: share of relevant targets among the best {' / '.join(map(str, TOPS))} queued")
    for (n, rule), values in sorted(results.items()):
        means = np.mean(values, axis=0)
        print(f"page {n:4d}  {rule:12s} " + " / ".join(f"{m:.3f}" for m in means) + f"   ({len(values)} crawls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
