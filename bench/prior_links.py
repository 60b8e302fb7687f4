"""Does the semantic prior rank links better than the topic's words, on a given web? (docs/learned.md,
"Where the prior ranks links well").

    TOPICCRAWL_DATA_DIR=/path/to/data python -m bench.prior_links --web SPEC --topics GLOB [--runs OUT ...]

Every page of the lab is extracted once (the crawler's extraction). R(l) (WL paper eq. 5, ∂ = 0.7 as
the ``focused`` spider) is split into its two parts: ``words``, ∂·R(anchor) + (1 − ∂)·R(P) of the
holder, and ``prior``, ∂·cos(anchor) + (1 − ∂)·cos(holder's title) under the semantic prior's static
encoder (floored at 0); the crawl's R(l) with the prior is (1 − W)·words + W·prior. Printed per
topic, the ROC AUC of each part and of the mixes W = 0.3 and 0.7 as rankings of links by whether
their target is relevant:

* ``corpus``: every link between two pages of the lab, labels the ground truth, R(P) with document
  frequencies over the whole lab; and the ROC AUC of every page's title's closeness to the topic
  (``titles``);
* ``centred``: the same links, the anchor's cosine less the mean cosine of its holder page's anchors
  (floored at 0; the title's unchanged), the simulation's ``semcentre`` (docs/learned.md, "Where
  WebKB's course pages go");
* with ``--runs``, ``bench.learned_focus`` output folders: for each crawl and checkpoint N (100, 250),
  the links between its first N fetched pages (harvest.csv order), R(P) as the crawl computed it;
  labels once the ground truth and once what the crawl itself can know, R(P) ≥ β of the target
  (``judged``); and per crawl, the ROC AUC of its fetched pages' titles' closeness to the topic
  against the truth and against R(P) ≥ β (``titles``). This says whether a crawl could tell from its
  own first pages which part ranks better.

A screen of link rankings, not a crawl.
"""

from __future__ import annotations

import argparse
import csv
import glob
import os
import statistics
from pathlib import Path

from bench.simulate_focus import ANCHOR_WEIGHT, TITLES, load_pages
from topiccrawl.learning.ranking import roc_auc
from topiccrawl.learning.semantic import DEFAULT_MODEL, SemanticPrior, load_encoder, topic_text
from topiccrawl.scoring.relevance import RelevanceScorer
from topiccrawl.scoring.topic import load_topic

WEIGHTS = (0.3, 0.7)
CHECKPOINTS = (100, 250)


def _auc(labels: list[bool], scores: list[float]) -> float | None:
    if all(labels) or not any(labels):
        return None
    return float(roc_auc([float(x) for x in labels], scores))


def link_aucs(links: list[tuple[float, float, bool]]) -> dict[str, float | None]:
    """ROC AUC of ``words``, ``prior`` and each mix over (words, prior, label) links."""
    y = [lab for _, _, lab in links]
    out = {"words": _auc(y, [w for w, _, _ in links]), "prior": _auc(y, [p for _, p, _ in links])}
    for weight in WEIGHTS:
        out[f"W={weight}"] = _auc(y, [(1 - weight) * w + weight * p for w, p, _ in links])
    return out


class Parts:
    """The two parts of R(l) for one topic: R(anchor) (``scorer``'s) and the prior's cosines, cached per text."""

    def __init__(self, topic, scorer: RelevanceScorer, encode) -> None:
        self.scorer = scorer
        self.prior = SemanticPrior(encode, topic_text(topic.description, topic.words), 0.0)

    def link(self, holder_r: float, holder_title: str, anchor_text: str, with_context: str) -> tuple[float, float]:
        cos_title, cos_anchor = self.prior.scores([holder_title, anchor_text.strip()])
        words = ANCHOR_WEIGHT * self.scorer.anchor_relevance(with_context) + (1 - ANCHOR_WEIGHT) * holder_r
        return words, ANCHOR_WEIGHT * cos_anchor + (1 - ANCHOR_WEIGHT) * cos_title


def _fmt(aucs: dict[str, float | None]) -> str:
    return "  ".join(f"{k} {'–' if v is None else f'{v:.3f}'}" for k, v in aucs.items())


def main(argv=None) -> int:
    data = os.environ.get("TOPICCRAWL_DATA_DIR", "")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--web", default=f"wikispeedia:{data}/wikispeedia", help="lab spec")
    ap.add_argument("--topics", required=True)
    ap.add_argument("--runs", action="append", default=[], help="bench.learned_focus output folder")
    args = ap.parse_args(argv)
    pages, _, corpus = load_pages(args.web)
    key = getattr(corpus, "resolve", None) or (lambda u: corpus.canonical(u))
    encode = load_encoder(DEFAULT_MODEL, 1, "static", "")
    for path in sorted(glob.glob(args.topics)):
        topic = load_topic(path)
        relevant = frozenset(topic.labels)
        scorer = RelevanceScorer(topic)
        for terms, _, _ in pages.values():
            scorer.df.add(terms)
        parts = Parts(topic, scorer, encode)
        r_page = {u: scorer.page_relevance(terms, update_df=False) for u, (terms, _, _) in pages.items()}
        links, centred = [], []
        for url, (_, anchors, _) in pages.items():
            kept = [(key(target), text, with_context) for target, text, with_context, _ in anchors
                    if key(target) in pages]
            if not kept:
                continue
            cos = parts.prior.scores([text.strip() for _, text, _ in kept])
            mean = statistics.fmean(cos)
            for (target, text, with_context), c in zip(kept, cos):
                words, prior = parts.link(r_page[url], TITLES[url], text, with_context)
                label = bool(pages[target][2] & relevant)
                links.append((words, prior, label))
                # the anchor's share of the prior part, ∂·cos, replaced by ∂·max(0, cos − the page's mean)
                centred.append((words, prior + ANCHOR_WEIGHT * (max(0.0, c - mean) - c), label))
        print(f"{topic.name:28s} corpus   {_fmt(link_aucs(links))}")
        print(f"{'':28s} centred  {_fmt(link_aucs(centred))}")
        titles = [(parts.prior.scores([TITLES[u]])[0], bool(labels & relevant)) for u, (_, _, labels) in pages.items()]
        print(f"{'':28s} corpus   titles {_auc([t for _, t in titles], [c for c, _ in titles]):.3f}")
        for out in args.runs:
            for n in CHECKPOINTS:
                rows = {"truth": [], "judged": []}
                title_truth, title_judged = [], []
                for harvest in sorted(Path(out).glob(f"runs/{topic.name}/*/harvest.csv")):
                    with harvest.open() as fh:
                        fetched = list(csv.DictReader(fh))[:n]
                    seen = {}  # fetched page -> R(P) as the crawl computed it
                    for row in fetched:
                        k = key(row["url"])
                        if k in pages:
                            seen[k] = float(row["relevance"])
                    crawl = []
                    for url, r in seen.items():
                        for target, text, with_context, _ in pages[url][1]:
                            target = key(target)
                            if target in seen and target != url:
                                words, prior = parts.link(r, TITLES[url], text, with_context)
                                crawl.append((words, prior, bool(pages[target][2] & relevant),
                                              seen[target] >= topic.beta))
                    cos = [parts.prior.scores([TITLES[u]])[0] for u in seen]
                    title_truth.append(_auc([bool(pages[u][2] & relevant) for u in seen], cos))
                    title_judged.append(_auc([r >= topic.beta for r in seen.values()], cos))
                    rows["truth"].append(link_aucs([(w, p, t) for w, p, t, _ in crawl]))
                    rows["judged"].append(link_aucs([(w, p, j) for w, p, _, j in crawl]))
                print(f"{'':28s} {Path(out).name} @{n} titles truth "
                      f"{' '.join('–' if a is None else f'{a:.3f}' for a in title_truth)}  judged "
                      f"{' '.join('–' if a is None else f'{a:.3f}' for a in title_judged)}")
                for label, per_crawl in rows.items():
                    mean = {k: statistics.fmean(v) if (v := [a[k] for a in per_crawl if a[k] is not None]) else None
                            for k in per_crawl[0]} if per_crawl else {}
                    wins = sum(a["W=0.7"] is not None and a["words"] is not None and a["W=0.7"] > a["words"]
                               for a in per_crawl)
                    print(f"{'':28s} {Path(out).name} @{n} {label:6s} {_fmt(mean)}  "
                          f"(W=0.7 above words in {wins}/{len(per_crawl)} crawls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
