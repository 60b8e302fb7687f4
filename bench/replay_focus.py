"""Replay the pages of finished crawls through page-classifier rules, without crawling again.

    python -m bench.replay_focus OUT [OUT ...] --rule base --rule share2:pseudo_share=0.02 \\
        --rule c01:classifier.C=0.1 [--variant learned] [--examples] [--out replay.md]

``OUT`` is a ``bench.learned_focus --out`` folder: its ``results.json`` names the web (``spec``), and
every run's ``harvest.csv`` lists the fetched pages with their R(P), ground truth and ``observed``,
the order in which the crawl's classifier saw them (rows are in counting order, which concurrent
responses can change; a file where any row lacks the column is read in its row order).
Each page is read from the corpus (no HTTP, no lab server) and extracted as the crawler extracts it
(:func:`topiccrawl.scoring.text.extract`, :func:`~topiccrawl.scoring.text.document_terms`), then fed,
in the classifier's order, to a :class:`~topiccrawl.learning.focus.PageFocus` built from each ``--rule``
(``NAME:KEY=VALUE,...``; keys are ``PageFocus`` arguments, ``classifier.KEY`` the
``PageClassifier``'s). Reported per topic (mean over its runs) and over topics: abs(P̄ − true
harvest rate) at the crawl's last page, the self-assessment of the crawl itself next to it, and how
many topics miss 0.1. A rule with no keys ranks the pseudo-positives by R(P), as crawls did before
``TOPICCRAWL_CLASSIFIER_RANK=auto``; to reproduce a crawl of words since, give the rule the key its
crawl used: ``rank=title``, or ``rank=semantic`` with the semantic prior on (the static encoder;
see :func:`replay`).

The crawl's order stays what it was, so a rule is judged on the self-assessment alone: a rule that
also changes the link labels (the crawl's pseudo-positives) must be crawled to see its effect on
recall. ``--examples`` replays a variant given ``examples=truth:N`` (``learned-examples``): the
example pages the crawl picked (:func:`bench.learned_focus.truth_examples`) are added first, and a
variant without words keeps ``use_words`` off, as the crawl's classifier did. Such a crawl derives
its words from the examples against the seed pages and registers them with jieba, which changes
how every later Chinese page is segmented; the replay does the same, so it replays one such
topic per process (a Chinese corpus: one ``OUT`` with one topic). Corpora with ``labels`` only
(wikispeedia, htmltree, generated) work; the development
topics are where rules are chosen (docs/learned.md), never the evaluation ones.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import json
import statistics
import sys
from pathlib import Path

from bench.learned_focus import truth_examples
from topiccrawl.learning.classifier import PageClassifier
from topiccrawl.learning.examples import topic_words
from topiccrawl.learning.focus import TITLE_RANK_WEIGHTS, PageFocus, title_rank
from topiccrawl.learning.semantic import DEFAULT_MODEL, SemanticPrior, load_encoder, topic_text
from topiccrawl.scoring.relevance import RelevanceScorer
from topiccrawl.scoring.text import add_words, document_terms, extract, has_cjk, tokenize
from topiccrawl.scoring.topic import _loads, load_topic
from topiccrawl.weblab.corpus import open_corpus


def parse_value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_rule(spec: str) -> tuple[str, dict, dict]:
    """``NAME:KEY=VALUE,...`` -> name, PageFocus keywords, PageClassifier keywords."""
    name, _, rest = spec.partition(":")
    focus, classifier = {}, {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--rule {spec!r}: expected KEY=VALUE, got {item!r}")
        if key.startswith("classifier."):
            classifier[key.removeprefix("classifier.")] = parse_value(value)
        else:
            focus[key] = parse_value(value)
    return name, focus, classifier


#: the keys of a rule that are the replay's own, beside PageFocus's and PageClassifier's
RANK_RULES = ("relevance", "full", "semantic", "semprod", "title", "word")


def check_rules(rules: list[tuple[str, dict, dict]]) -> None:
    """SystemExit (one line) for a rule the replay cannot run, before any replay: a name given twice
    (their errors were pooled into one column) or ``crawl``; a key neither ``PageFocus`` nor
    ``PageClassifier`` takes; a text where a number is expected; an unknown ``rank``."""
    seen = {"crawl"}
    for name, focus_kw, classifier_kw in rules:
        if not name or name in seen:
            raise SystemExit(f"--rule {name!r}: " + ("a rule needs a name (NAME:KEY=VALUE,...)" if not name else
                             "that name is the crawl's own column" if name == "crawl" else "given twice"))
        seen.add(name)
        if focus_kw.get("rank", "relevance") not in RANK_RULES:
            raise SystemExit(f"--rule {name}: rank={focus_kw['rank']}: expected {', '.join(RANK_RULES)}")
        own = {k: v for k, v in focus_kw.items() if k not in ("rank", "rank_weight")}
        for cls, keywords, prefix in ((PageFocus, own, ""), (PageClassifier, classifier_kw, "classifier.")):
            params = inspect.signature(cls).parameters
            for key, value in keywords.items():
                if key not in params or key in ("classifier", "rank_scorer"):
                    raise SystemExit(f"--rule {name}: unknown key {prefix}{key!r}")
                default = params[key].default
                if isinstance(default, (int, float)) and not isinstance(default, bool) and (
                        isinstance(value, bool) or not isinstance(value, (int, float))):
                    raise SystemExit(f"--rule {name}: {prefix}{key}={value!r} is not a number")
        try:  # what the constructors check themselves
            PageFocus(classifier=PageClassifier(**{"random_state": 0, **classifier_kw}), **own)
        except (TypeError, ValueError) as exc:
            raise SystemExit(f"--rule {name}: {exc}") from None


def read_run(path: Path) -> tuple[list[str], list[float], list[bool], float | None]:
    """URLs in the order the crawl's classifier saw them (the ``observed`` column; the rows' counting
    order if any row lacks it), their R(P), whether each is truly relevant, the crawl's own P̄ at the end."""
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    pages, prev = [], 0
    for r in rows:
        count = int(r["truth_relevant"])
        pages.append((r["url"], float(r["relevance"]), count > prev, r.get("observed")))
        prev = count
    if pages and all(p[3] for p in pages):
        pages.sort(key=lambda p: int(p[3]))
    last = rows[-1].get("expected_harvest") if rows else None
    return [p[0] for p in pages], [p[1] for p in pages], [p[2] for p in pages], float(last) if last else None


class Pages:
    """Terms and title of a corpus page, extracted once."""

    def __init__(self, spec: str) -> None:
        self.corpus = open_corpus(spec)
        self.cache: dict[str, list[str]] = {}
        self.titles: dict[str, str] = {}

    def terms(self, url: str) -> list[str]:
        terms = self.cache.get(url)
        if terms is None:
            page = self.corpus.get(url)
            if page is None:
                raise SystemExit(f"{url}: not in the corpus {self.corpus!r}")
            content_type = next((v for k, v in page.headers.items() if k.lower() == "content-type"), None)
            ex = extract(page.body, url, content_type)
            terms = self.cache[url] = document_terms(ex)
            self.titles[url] = ex.title.strip()
        return terms

    def title(self, url: str) -> str:
        self.terms(url)
        return self.titles[url]


#: (model, encoder) -> encode function, loaded once per process
_ENCODERS: dict[tuple[str, str], object] = {}


def semantic_prior(topic, encoder: str):
    """The crawl's semantic prior of ``topic`` (default model, ``encoder``), its weight unused here."""
    key = (DEFAULT_MODEL, encoder)
    if key not in _ENCODERS:
        _ENCODERS[key] = load_encoder(DEFAULT_MODEL, 1, encoder)
    return SemanticPrior(_ENCODERS[key], topic_text(topic.description, topic.words), 0.0)


def topic_labels_seeds(path: str) -> tuple[set[str], list[str]]:
    """A topic file's labels and seeds, read without :func:`load_topic` (which registers the
    topic's words with jieba: an examples-only crawl never did)."""
    data = _loads(Path(path).read_text(encoding="utf-8"))
    if "seed_file" in data:
        raise SystemExit(f"{path}: --examples reads inline seeds only, not seed_file")
    return set(data.get("labels", ())), list(data.get("seeds", ()))


def title_word(words, title: str) -> float:
    """A title's strongest topic word, in [0, 1]: the largest weight of a topic word among its terms
    over the topic's largest weight, so one topic word counts fully (docs/learned.md)."""
    top = max(words.values(), default=0.0)
    if top <= 0.0:
        return 0.0
    return min(1.0, max(0.0, max((words.get(t, 0.0) for t in tokenize(title)), default=0.0) / top))


def replay(pages: Pages, urls, relevance, focus_kw: dict, classifier_kw: dict, topic=None,
           examples: list[list[str]] = (), use_words: bool = True) -> float | None:
    """The self-assessment at the last page. Rule keys beside ``PageFocus``'s: ``rank=full``:
    pseudo-positives ranked by the cosine over the full page vector, computed in fetch order
    (``restrict_to_topic=False``); ``rank=semantic``: by :func:`title_rank` of R(P) and the
    title's cosine to the topic under the static encoder, with ``rank_weight`` (default the crawl's);
    ``rank=semprod``: by R(P) × that cosine; ``rank=title``: by (1 − ``rank_weight``)·R(P) +
    ``rank_weight``·R(title), the title's cosine to the topic words (as an anchor's), 0 where R(P) is
    0 (``rank_weight`` by default the crawl's, :data:`~topiccrawl.learning.focus.TITLE_RANK_WEIGHTS`);
    ``rank=word``: the same with :func:`title_word` in place of R(title) (screened and not
    adopted, docs/learned.md).
    ``examples``: the terms of example pages, added before the first page."""
    focus_kw = {"use_words": use_words, **focus_kw}
    rank_rule = focus_kw.pop("rank", "relevance")
    weight = float(focus_kw.pop("rank_weight", TITLE_RANK_WEIGHTS.get(rank_rule, 0.0)))  # the crawl's W by default
    prior = titles = None
    if rank_rule in ("full", "semantic", "semprod", "title", "word") and topic is None:
        raise SystemExit(f"rank={rank_rule} needs the crawl's topic (results.json 'topics')")
    if rank_rule == "full":  # as the crawl's TOPICCRAWL_CLASSIFIER_RANK=full
        focus_kw["rank_scorer"] = RelevanceScorer(topic, restrict_to_topic=False)
    elif rank_rule in ("semantic", "semprod"):
        prior = semantic_prior(topic, "static")
    elif rank_rule in ("title", "word"):
        titles = RelevanceScorer(topic)
    elif rank_rule != "relevance":
        raise SystemExit(f"rank={rank_rule}: expected relevance, full, semantic, semprod, title or word")
    classifier = PageClassifier(**{"random_state": 0, **classifier_kw})
    focus = PageFocus(classifier=classifier, **focus_kw)
    for terms in examples:
        focus.add_example(terms)
    for url, r in zip(urls, relevance, strict=True):
        rank = None
        if prior is not None:
            near = prior.scores([pages.title(url)])[0]
            rank = title_rank(r, near, weight) if rank_rule == "semantic" else r * near
        elif titles is not None:
            title = pages.title(url)
            closeness = title_word(topic.words, title) if rank_rule == "word" else titles.anchor_relevance(title)
            rank = title_rank(r, closeness, weight)
        focus.observe(pages.terms(url), r, key=url, rank=rank)
    return focus.expected_harvest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outs", nargs="+", type=Path, help="bench.learned_focus --out folders")
    ap.add_argument("--rule", action="append", required=True, help="NAME:KEY=VALUE,... (repeatable)")
    ap.add_argument("--variant", default="learned", help="the crawls replayed (default: learned)")
    ap.add_argument("--examples", action="store_true",
                    help="add the truth:N example pages of a variant given examples=truth:N (module docstring)")
    ap.add_argument("--out", type=Path, help="also write the table here (markdown)")
    args = ap.parse_args(argv)
    rules = [parse_rule(r) for r in args.rule]
    check_rules(rules)
    errors: dict[str, dict[str, list[float]]] = {}  # topic -> rule (or "crawl") -> abs errors
    derived: list[str] = []  # the words registered with jieba for an examples-only topic
    for out in args.outs:
        results = out / "results.json"
        if not results.is_file():
            raise SystemExit(f"{out}: no results.json (not a bench.learned_focus --out folder)")
        meta = json.loads(results.read_text(encoding="utf-8"))
        pages = Pages(meta["spec"])
        picked: dict[str, list[str]] = {}  # topic -> its example URLs
        example_terms: dict[str, list[list[str]]] = {}  # topic -> its examples' terms, as first segmented
        topic_files = meta.get("topics") or {}
        if meta.get("variants") and args.variant not in meta["variants"]:  # the other folders may hold it
            print(f"{out}: no variant {args.variant!r} (its runs: {', '.join(meta['variants'])}); skipped",
                  file=sys.stderr, flush=True)
            continue
        variant = (meta.get("variants") or {}).get(args.variant, {})
        n_examples, use_words = 0, bool(variant.get("words", True))
        if args.examples:
            n_examples = next((int(a.rpartition(":")[2]) for a in variant.get("args", ())
                               if a.startswith("examples=truth:")), 0)
            if not n_examples:
                raise SystemExit(f"{out}: variant {args.variant!r} was not given examples=truth:N")
        for run in sorted(out.glob(f"runs/*/{args.variant}-[0-9]*/harvest.csv")):  # not learned-examples-0 for learned
            topic = run.parent.parent.name
            urls, relevance, truth, crawl = read_run(run)
            if not urls:
                continue
            true = sum(truth) / len(truth)
            row = errors.setdefault(topic, {})
            # a crawl, or a rule, that gave no estimate counts as 0 (off by the true rate), as a rule's
            # replay always did: a mean over the others would pass it over
            row.setdefault("crawl", []).append(abs((crawl or 0.0) - true))
            # an examples-only crawl never registered the topic's own words with jieba (loading does)
            examples_only = bool(n_examples) and not use_words
            described = load_topic(topic_files[topic]) if topic in topic_files and not examples_only else None
            examples = picked.get(topic, [])
            if n_examples and topic not in picked:
                if topic not in topic_files:
                    raise SystemExit(f"{out}: --examples needs the topic file of {topic!r} (results.json 'topics')")
                labels, seeds = topic_labels_seeds(topic_files[topic]) if examples_only else (
                    described.labels, list(described.seeds))
                examples = picked[topic] = truth_examples(meta["spec"], labels, n_examples)
                if examples_only:  # the crawl's derived words (runtime learn_words), registered as it did
                    if derived and any(map(has_cjk, derived)):
                        raise SystemExit("--examples on a Chinese corpus: one topic per process (module docstring)")
                    seeds = seeds or pages.corpus.seeds()
                    derived = [w for w, _ in topic_words([pages.terms(u) for u in examples],
                                                         [pages.terms(u) for u in seeds], k=30)]
                    add_words(derived)
                    example_terms[topic] = [pages.terms(u) for u in examples]
                    pages.cache.clear()  # later pages segmented with the derived words, as in the crawl
            for name, focus_kw, classifier_kw in rules:
                p = replay(pages, urls, relevance, focus_kw, classifier_kw, described,
                           example_terms.get(topic) or [pages.terms(u) for u in examples], use_words)
                row.setdefault(name, []).append(abs((p or 0.0) - true))
            print(f"{topic} {run.parent.name}: true {true:.3f}, " + ", ".join(
                f"{k} {v[-1]:.3f}" for k, v in row.items()), file=sys.stderr, flush=True)
    if not errors:
        raise SystemExit(f"no crawl of variant {args.variant!r} with pages under {', '.join(map(str, args.outs))}")
    names = ["crawl", *(r[0] for r in rules)]
    lines = ["| topic | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    per = {n: [] for n in names}
    for topic, row in errors.items():
        cells = []
        for n in names:
            e = statistics.mean(row[n]) if row.get(n) else None
            if e is not None:
                per[n].append(e)
            cells.append("–" if e is None else f"{e:.3f}")
        lines.append(f"| {topic} | " + " | ".join(cells) + " |")
    for label, fn in (("mean", statistics.mean), ("worst", max), ("topics > 0.1", lambda v: sum(x > 0.1 for x in v))):
        lines.append(f"| **{label}** | " + " | ".join(
            (f"{fn(per[n]):.3f}" if label != "topics > 0.1" else str(fn(per[n]))) if per[n] else "–"
            for n in names) + " |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
