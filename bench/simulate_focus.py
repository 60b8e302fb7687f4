"""A quick simulation of a focused crawl, for screening link-ordering rules before any real crawl
(docs/learned.md, "Anchor words judged by the pages that contain them").

    TOPICCRAWL_DATA_DIR=/path/to/data python -m bench.simulate_focus --pages 250 \\
        --topics 'bench/topics/wikispeedia-dev/*.toml' --rule bestfirst --rule association --rule association:25

Every page of the lab is extracted once (the crawler's own extraction, terms and anchors); a crawl
then fetches one page at a time with the links of the last ``--lag`` pages held back (as if in
flight: the focused spider has 16 requests out), scores pages with R(P) and links with R(l),
∂ = 0.7, as the ``focused`` spider does, and takes the queued link of highest priority (ties:
first queued). No HTTP, no Scrapy, no link model, no exploration: it screens an ordering rule on
development topics in seconds; a rule that passes must still be crawled for real.

Rules: ``bestfirst`` (R(l)); ``oracle`` (truly relevant targets first, then first queued);
``pathoracle`` (truly relevant targets first, then the fewest links to a relevant page not fetched
yet, hops recomputed every 25 pages, then R(l): the ``oracle-path`` strategy, docs/benchmarks.md "A
stronger oracle");
``wordoracle`` (the target of highest R(P) first, its own page's relevance to the topic's words,
known before it is fetched: the best order a crawler judged by the words can reach); ``wordrank``
(no crawl: the N pages of highest R(P) in the whole corpus, reachable or not, document frequencies
over every page: how many relevant pages the words rank first at all); ``examplerank`` and
``exampleoracle`` (the same two with P(relevant) instead of R(P): a page classifier trained on the
5 example pages ``-a examples=truth:5`` picks, PU against every page of the corpus);
``association`` (R(l) + the anchor association shift, recomputed at every decision);
``association:N`` (recomputed every N fetched pages; ``association:0``: at the push only).
Options joined with ``+`` (``association+context:25``): ``context`` adds ``CONTEXT_WEIGHT`` times the
mean a_t − m over the terms around the anchor; ``inlinks`` makes every out-link target a term of its
holder page and of the link (the mean R(P) of the pages linking to it); ``holdermean`` takes R(l)'s
holder term as the mean R(P) of every fetched page linking to the target, not only the first's;
``semantic`` mixes R(l)'s anchor and holder terms with the semantic prior (the default model,
encoder and weight of the ``TOPICCRAWL_SEMANTIC_*`` settings; the holder by its page's title, the association
keeps R(P); docs/learned.md, "A semantic prior"; needs the ``semantic`` extra, or only ``static`` with
``--semantic-encoder static``); with it, ``semanchor`` mixes the prior into the anchor term only,
``semholder`` into the holder term only, ``semoff=N`` turns the prior off after N fetched pages and
re-scores every queued link without it (``semkeep``: queued links keep their scores), ``anchoroff=N``
keeps it in the holder term only from N fetched pages on, queued links keeping their scores
(``TOPICCRAWL_SEMANTIC_ANCHOR_PAGES``; with ``anchorrescore`` queued links are re-scored then with
their anchors' words alone, the holder term keeping the prior), ``semtie=E`` adds E times the anchor's closeness to the
anchor term instead of mixing it in (E small: the prior only breaks the words' ties; docs/learned.md,
"The anchors' closeness as a tie-break"), ``semcentre`` takes an anchor's closeness less the mean
closeness of its page's anchors (at least 0) in the anchor term (the title's is unchanged), and
``semhub=P`` damps a queued link's anchor closeness by n^−P, n the fetched pages linking to its
target (broad pages, linked from everywhere, lose the prior's push; docs/learned.md, "The anchors'
prior damped at pages linked from many"), ``interleave=K`` takes every K-th pick by R(l) without
the prior while the prior is on (until
``anchoroff``'s or ``semoff``'s N: a share of the first pages in the words' own order; docs/learned.md,
"Where `learned` falls below best-first on the development topics"), and
``semcheck=N=T`` does so only when the ROC AUC of the N fetched pages' titles' closeness to the topic
against R(P) ≥ β is below T (docs/learned.md, "Where the prior ranks links well"; not with
``holdermean``).
Prints mean target recall at 100 / 250 / 500 / 1,000 pages (those within ``--pages``) per rule.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
from collections import deque

from topiccrawl.crawl.settings import TopicCrawlConfig
from topiccrawl.learning.association import TermAssociation, anchor_terms
from topiccrawl.learning.classifier import PageClassifier, hash_terms
from topiccrawl.learning.ranking import roc_auc
from topiccrawl.learning.semantic import SemanticPrior, load_encoder, topic_text
from topiccrawl.scoring.groundtruth import TruthPaths
from topiccrawl.scoring.relevance import RelevanceScorer
from topiccrawl.scoring.text import document_terms, extract
from topiccrawl.scoring.topic import load_topic
from topiccrawl.weblab.corpus import Corpus, open_corpus

CHECKPOINTS = (100, 250, 500, 1000)
ANCHOR_WEIGHT = 0.7  # the focused spider's ∂
CONTEXT_WEIGHT = 0.5  # the ``context`` option's weight (docs/learned.md, "The words around the anchor")


def load_pages(spec: str) -> tuple[dict, list[str], Corpus]:
    """URL -> (terms, [(target, anchor text, anchor + context, context terms)], labels) of every
    page, the seeds, and the corpus (for ``truth:N`` picks)."""
    corpus = open_corpus(spec)
    pages = {}
    for url in corpus.iter_urls():
        page = corpus.get(url)
        if page is None or page.status != 200:
            continue
        ex = extract(page.body, url, page.headers.get("Content-Type"))
        TITLES[url] = ex.title.strip()
        pages[url] = (document_terms(ex), [(a.url, a.text, f"{a.text} {a.context}",
                                            tuple(t for t in a.context.split() if len(t) > 1)) for a in ex.anchors],
                      corpus.labels(url))
    return pages, list(corpus.seeds()), corpus


#: URL -> the page's title (``semantic``: the holder term's text)
TITLES: dict[str, str] = {}


def runs_parser(doc: str, out_help: str, topics: str) -> argparse.ArgumentParser:
    """The arguments of a script that reads a ``bench.learned_focus`` output folder of Wikispeedia
    crawls: ``out``, ``--web`` (the lab spec) and ``--topics``."""
    data = os.environ.get("TOPICCRAWL_DATA_DIR", "")
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("out", help=out_help)
    ap.add_argument("--web", default=f"wikispeedia:{data}/wikispeedia", help="lab spec")
    ap.add_argument("--topics", default=topics)
    return ap


def hashed_pages(spec: str) -> tuple[dict, Corpus, list[str], dict[str, int], object]:
    """:func:`load_pages` (without the seeds) plus the pages' URLs in order, each URL's row and the
    pages' :func:`hash_terms` matrix in that order."""
    pages, _, corpus = load_pages(spec)
    urls = list(pages)
    return pages, corpus, urls, {u: i for i, u in enumerate(urls)}, hash_terms([pages[u][0] for u in urls])


def example_probabilities(pages: dict, corpus: Corpus, labels: frozenset,
                          everything=None) -> tuple[dict[str, float], list[str]]:
    """P(relevant) of every page under a classifier trained on the 5 pages ``-a examples=truth:5``
    picks (``Corpus.truth_sample``, seed 1), PU against every page; and those 5. ``everything``:
    the pages' :func:`hash_terms` matrix in ``pages`` order, when the caller has it."""
    examples = corpus.truth_sample(labels, 5, seed=1)
    urls = list(pages)
    if everything is None:
        everything = hash_terms([pages[u][0] for u in urls])
    row = {u: i for i, u in enumerate(urls)}
    clf = PageClassifier().refit(everything[[row[u] for u in examples if u in row]], everything)
    return dict(zip(urls, clf.predict_proba(everything)[:, 1].tolist())), examples


def ranked_recall(score: dict[str, float], relevant: set[str], n: int, left_out=()) -> float:
    """The share of ``relevant`` among the ``n`` pages of highest ``score`` (``left_out`` aside)."""
    ranked = sorted((u for u in score if u not in left_out), key=lambda u: -score[u])[:n]
    return len(relevant.intersection(ranked)) / len(relevant)


def crawl(pages: dict, seeds: list[str], topic_path: str, rule: str, budget: int, lag: int,
          corpus: Corpus | None = None, encoder: str = "") -> dict[int, float]:
    """Recall at the checkpoints of one simulated crawl (``corpus``: :func:`load_pages`' third
    value, for the example rules; ``encoder``: the ``semantic`` option's, empty for the setting's
    default)."""
    topic = load_topic(topic_path)
    relevant = {u for u, (_, _, labels) in pages.items() if labels & topic.labels}
    scorer = RelevanceScorer(topic, anchor_weight=ANCHOR_WEIGHT)
    assoc = TermAssociation()
    known: dict[str, float] = {}
    semantic = None
    if "+semantic" in rule:
        config = TopicCrawlConfig
        semantic = SemanticPrior(load_encoder(config.semantic_model, config.blas_threads,
                                              encoder or config.semantic_encoder),
                                 topic_text(topic.description, topic.words), config.semantic_weight)

    def word_score(url: str) -> float:
        """R(P) of a page not fetched yet, from the corpus (``wordoracle``)."""
        if url not in known:
            known[url] = scorer.page_relevance(pages[url][0], update_df=False) if url in pages else 0.0
        return known[url]

    name, _, every = rule.partition(":")
    every = int(every) if every else 1
    name, *options = name.split("+")
    opts = frozenset(options)
    off_at, check, anchor_off, interleave = None, None, None, 0
    for o in options:
        if o.startswith("interleave="):
            interleave = int(o.split("=")[1])
        elif o.startswith("anchoroff="):
            anchor_off = int(o.split("=")[1])
        elif o.startswith("semoff="):
            off_at = int(o.split("=")[1])
        elif o.startswith("semcheck="):
            _, n, t = o.split("=")
            off_at, check = int(n), float(t)
    if name in ("examplerank", "exampleoracle"):
        probability, examples = example_probabilities(pages, corpus, frozenset(topic.labels))
    if name == "pathoracle":
        paths = TruthPaths(pages, lambda u: [a[0] for a in pages[u][1]], lambda u: u, relevant.__contains__)
    if name == "wordrank":
        for terms, _, _ in pages.values():
            scorer.df.add(terms)
        score = {u: scorer.page_relevance(pages[u][0], update_df=False) for u in pages}
        return {c: ranked_recall(score, relevant, c) for c in CHECKPOINTS if c <= budget}
    if name == "examplerank":  # the examples are fetched, not found: left out
        return {c: ranked_recall(probability, relevant, c, examples) for c in CHECKPOINTS if c <= budget}
    # url -> [R(l), order, anchor terms, shift, truly relevant, context terms, R(anchor), holders' R(P),
    #         R(l) without the semantic prior, R(anchor) by its words alone]
    queue: dict[str, list] = {}
    seen, held, order = set(), deque(), 0
    for url in topic.seeds or seeds:
        queue[url] = [1.0, order, (), 0.0, url in relevant, (), 1.0, [1.0], 1.0, 1.0, None, 1]
        seen.add(url)
        order += 1
    fetched = found = 0
    curve = {}
    judged: list[tuple[str, bool]] = []
    while fetched < budget and (queue or held):
        if semantic is not None and fetched == off_at and (check is None or _title_auc(judged, semantic) < check):
            semantic = None  # the prior off from here: queued links re-scored without it (``semkeep``: not)
            for entry in queue.values() if "semkeep" not in opts else ():
                entry[0] = entry[8]
        if fetched == anchor_off:  # ``anchoroff=N``: new links' anchors without the prior from here
            opts = opts | {"semholder"}
            for entry in queue.values() if "anchorrescore" in opts else ():
                entry[6] = entry[9]  # ``anchorrescore``: queued links' anchor terms back to their words
                entry[0] = scorer.link_relevance(entry[6], statistics.fmean(entry[7]))
        if not queue:
            order = _release(held.popleft(), pages, scorer, assoc, queue, seen, relevant, name, opts, order, semantic)
            continue
        if name == "association" and every and fetched % every == 0:
            for entry in queue.values():
                entry[3] = _shift(assoc, entry[2], entry[5])
        if name == "oracle":
            url = min(queue, key=lambda u: (not queue[u][4], queue[u][1]))
        elif name == "wordoracle":
            url = min(queue, key=lambda u: (-word_score(u), queue[u][1]))
        elif name == "exampleoracle":
            url = min(queue, key=lambda u: (-probability.get(u, 0.0), queue[u][1]))
        elif name == "pathoracle":
            if fetched and fetched % 25 == 0:
                paths.refresh()
            url = min(queue, key=lambda u: (paths.hops(u), -queue[u][0], queue[u][1]))
            paths.fetched(url)
        elif (interleave and semantic is not None and fetched < (anchor_off or off_at or budget)
              and fetched % interleave == interleave - 1):  # ``interleave=K``: every K-th pick by the words
            url = min(queue, key=lambda u: (-(queue[u][8] + queue[u][3]), queue[u][1]))
        else:
            url = min(queue, key=lambda u: (-(queue[u][0] + queue[u][3]), queue[u][1]))
        del queue[url]
        if url not in pages:
            continue
        fetched += 1
        found += url in relevant
        terms = pages[url][0]
        r = scorer.page_relevance(terms)
        judged.append((url, r >= topic.beta))
        assoc.add_page([*terms, *(a[0] for a in pages[url][1])] if "inlinks" in opts else terms, r)
        held.append((url, r))
        while len(held) > lag:
            order = _release(held.popleft(), pages, scorer, assoc, queue, seen, relevant, name, opts, order, semantic)
        if fetched in CHECKPOINTS:
            curve[fetched] = found / len(relevant)
    for c in CHECKPOINTS:  # a queue that ran dry keeps its last value
        if c <= budget and c not in curve:
            curve[c] = found / len(relevant)
    return curve


def _title_auc(judged: list[tuple[str, bool]], semantic) -> float:
    """ROC AUC of the fetched pages' titles' closeness to the topic against R(P) >= beta (0.5 with one class)."""
    y = [j for _, j in judged]
    if all(y) or not any(y):
        return 0.5
    return float(roc_auc(y, semantic.scores([TITLES.get(u, "") for u, _ in judged])))


def _shift(assoc: TermAssociation, terms: tuple, context: tuple) -> float:
    """The anchor association's shift, plus ``CONTEXT_WEIGHT`` x the mean a_t − m over the context
    (a term never seen counts 0)."""
    shift = assoc.shift(terms)
    if context and assoc.pages:
        m = assoc.mean
        shift += CONTEXT_WEIGHT * statistics.fmean(assoc.value(t) - m for t in context)
    return shift


def _release(page, pages, scorer, assoc, queue, seen, relevant, name, opts, order, semantic=None) -> int:
    """Queue the unseen links of a fetched page (the first anchor to a target wins; with
    ``holdermean`` a queued target's holder term follows each new page linking to it; with
    ``semantic`` the anchor and holder terms mixed with the prior)."""
    url, r = page
    tie = next((float(o.split("=")[1]) for o in opts if o.startswith("semtie=")), None)
    hub = next((float(o.split("=")[1]) for o in opts if o.startswith("semhub=")), None)
    if semantic is not None:
        texts = [TITLES.get(url, ""), *(a[1].strip() for a in pages[url][1])]
        near = dict(zip(texts, semantic.scores(texts)))
        if "semcentre" in opts and len(texts) > 1:  # ``semcentre``: each anchor against its page's mean
            mean = statistics.fmean(near[t] for t in texts[1:])
            near.update({t: max(0.0, near[t] - mean) for t in texts[1:] if t != texts[0]})
        if "semanchor" not in opts:  # ``semanchor``: the prior in the anchor term only
            r = semantic.mix(r, near[texts[0]])
    for target, text, with_context, context in pages[url][1]:
        if target not in pages:
            continue
        if target in seen:
            entry = queue.get(target)
            if entry is not None and "holdermean" in opts:
                entry[7].append(r)
                entry[0] = scorer.link_relevance(entry[6], statistics.fmean(entry[7]))
            if entry is not None and hub is not None:  # ``semhub=P``: one more fetched page links to it
                entry[11] += 1
                if semantic is not None and "semholder" not in opts and entry[10] is not None:
                    entry[6] = semantic.mix(entry[9], entry[10] * entry[11] ** -hub)
                    entry[0] = scorer.link_relevance(entry[6], entry[7][0])
            continue
        seen.add(target)
        terms = anchor_terms(text) if name == "association" else ()
        if "inlinks" in opts:
            terms = (*terms, target)
        context = context if "context" in opts else ()
        anchor = words_anchor = scorer.anchor_relevance(with_context)
        if semantic is not None and tie is not None:  # ``semtie=E``: the anchor's closeness breaks ties
            anchor = anchor + tie * near[text.strip()]
        elif semantic is not None and "semholder" not in opts:  # ``semholder``: the holder term only
            anchor = semantic.mix(anchor, near[text.strip()])
        closeness = near[text.strip()] if semantic is not None else None
        queue[target] = [scorer.link_relevance(anchor, r), order, terms, _shift(assoc, terms, context),
                         target in relevant, context, anchor, [r], scorer.link_relevance(words_anchor, page[1]),
                         words_anchor, closeness, 1]
        order += 1
    return order


def main(argv=None) -> int:
    data = os.environ.get("TOPICCRAWL_DATA_DIR", "")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--web", default=f"wikispeedia:{data}/wikispeedia", help="lab spec")
    ap.add_argument("--topics", default="bench/topics/wikispeedia-dev/*.toml", help="topic files (glob) or a topic name")
    ap.add_argument("--rule", action="append",
                    help="bestfirst, oracle, pathoracle, association[+OPTION...][:N] (repeatable; module docstring)")
    ap.add_argument("--pages", type=int, default=250)
    ap.add_argument("--lag", type=int, default=16, help="fetched pages whose links are held back (in flight)")
    ap.add_argument("--semantic-encoder", choices=("transformer", "static"), default="",
                    help="the ``semantic`` option's encoder (default: TOPICCRAWL_SEMANTIC_ENCODER's default)")
    args = ap.parse_args(argv)
    topics = sorted(glob.glob(args.topics)) or [args.topics]
    pages, seeds, corpus = load_pages(args.web)
    print(f"{len(pages)} pages, {len(topics)} topic(s), {args.pages} pages per crawl, lag {args.lag}")
    for rule in args.rule or ["bestfirst", "association"]:
        curves = [crawl(pages, seeds, t, rule, args.pages, args.lag, corpus, args.semantic_encoder) for t in topics]
        means = {c: statistics.mean(cv[c] for cv in curves) for c in CHECKPOINTS if c <= args.pages}
        per = " ".join(f"{os.path.basename(t).split('.')[0]}:" + "/".join(f"{cv[c]:.2f}" for c in means)
                       for t, cv in zip(topics, curves))
        print(f"{rule:16s} mean recall " + " / ".join(f"{means[c]:.3f}@{c}" for c in means) + f"   {per}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
