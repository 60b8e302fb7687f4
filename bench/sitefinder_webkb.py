"""The site finder on WebKB (real 1996-97 university pages, real labels), for any rules file.

    python -m bench.sitefinder_webkb --data-dir DIR --rules course-en,faculty-en,student-en,project-en \
        [--truth-pages 3] [--out results.md] [--json results.json]

Each rules file brings its own ``label`` (e.g. ``class:faculty``) and its own ``[queries]``
(``--queries FILE`` replaces them); nothing here is specific to a page class. Per rule set:

1. **Pages** (the page score alone): every page served with status 200 is judged relevant when
   F(P, R) >= PageThreshold and checked against the rules file's label: precision, recall, F1.
2. **Hosts** ("site = host"): a host is *truly relevant* when at least ``--truth-pages`` of its
   pages carry the label (:class:`topiccrawl.sitefinder.truth.SiteTruth`, the spider's rule).
   Candidates are the hosts of the hits of the lab's local search
   (:mod:`topiccrawl.weblab.search`, SQLite FTS5 over the corpus) for the rules file's queries.
   Each candidate is verified by minimum-cost verification with the spider's defaults
   (PageThreshold 0.7, NumRelPages 3, NumExpPages 50, TOPICCRAWL_SITES_SITE_QUERIES site-restricted
   queries) as the spider does it: from its entry pages (its search hits, the root,
   ``/sitemap.xml``, the hits of ``site:HOST words`` asked of the same search engine, words = the
   queries that found the host, then the others; each such request is one fetch of the site's
   budget), each page identified by the URL it landed on after redirects (counted once per site).
   Rows: one per number of site queries per site (``--site-queries``, default 0, 2 and the
   spider's default; 0 = ``entry pages without site queries``), the old start from the root only
   (``root only``), the spider's default without the NumExpPages
   limit (what following links from the entry pages can reach at all in the corpus), and the
   **all-pages upper bound**: every page
   of the host scored, the host judged relevant when at least NumRelPages distinct pages reach
   PageThreshold (what the page score could do at any cost; pages/site = the host's pages), on
   the candidates and on all hosts.

Reported per row: host precision, recall among the searched candidates (truly relevant judged /
truly relevant candidates), recall over all truly relevant hosts of the corpus, pages fetched per
site, and at page level the share of the verifier's good pages that carry the label.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench.sitefinder import DEFAULTS, Lab, table
from topiccrawl.sitefinder.frontier import SiteFinderOptions
from topiccrawl.sitefinder.rules import load_queries, load_rules
from topiccrawl.sitefinder.verifier import canonical_url, site_of, site_query_texts, verify_site

#: site-restricted queries per site, the spider's default (TOPICCRAWL_SITES_SITE_QUERIES)
SITE_QUERIES = SiteFinderOptions().sites_site_queries
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
NAN = float("nan")


def page_rows(lab: Lab) -> tuple[list[dict], dict]:
    """Precision/recall of F >= t against the label over every status-200 page."""
    label = lab.label
    scored = []
    for url in lab.corpus.iter_urls():
        page = lab.corpus.get(url)
        if page is None or page.status != 200:
            continue
        got = lab.fetch(url)
        if got is not None:
            scored.append((got[1], label in lab.corpus.labels(url), got[2]))
    positives = sum(t for _, t, _ in scored)
    rows = []
    for t in THRESHOLDS:
        pred = [truth for f, truth, _ in scored if f >= t]
        tp = sum(pred)
        p = tp / len(pred) if pred else NAN
        r = tp / positives if positives else NAN
        rows.append({"value": t, "predicted": len(pred), "tp": tp, "precision": p, "recall": r,
                     "f1": 2 * p * r / (p + r) if pred and p + r else 0.0})
    rule_rows = {}
    for name in (r.name for r in lab.rules.rules):
        fired = [truth for _, truth, m in scored if name in m]
        rule_rows[name] = (len(fired), sum(fired))
    info = {"pages": len(scored), "labelled_pages": positives, "rules": rule_rows}
    return rows, info


def host_pages(lab: Lab) -> dict[str, list[str]]:
    """Every http page URL of the corpus by host."""
    by_host: dict[str, list[str]] = defaultdict(list)
    for u in lab.corpus.iter_urls():
        if u.startswith("http"):
            by_host[site_of(u)].append(u)
    return by_host


def _row(lab: Lab, truth_cands: set[str], judged: list[str], pages: list[int], *, candidates: int,
         exhausted: int = 0, good: list[str] = (), duplicates: int = 0, searches: int = 0) -> dict:
    hits = sum(lab.is_true(s) for s in judged)
    found_true = sum(lab.is_true(s) for s in judged if s in truth_cands)
    good_true = sum(lab.label in lab.corpus.labels(u) for u in good)
    return {"candidates": candidates, "true_cands": len(truth_cands), "judged": len(judged), "true_found": hits,
            "precision": hits / len(judged) if judged else NAN,
            "recall_cands": found_true / len(truth_cands) if truth_cands else NAN,
            "recall_all": hits / len(lab.true_sites) if lab.true_sites else NAN,
            "pages_per_site": statistics.fmean(pages) if pages else NAN,
            "exhausted": exhausted, "duplicates": duplicates, "searches": searches, "good_pages": len(good),
            "evidence_precision": good_true / len(good) if good else NAN}


def site_search(lab: Lab):
    """The lab's search engine as a site-restricted query sees it: the http(s) hits of result page 1."""
    def search(q: str) -> list[str]:
        return [h["url"] for h in lab.index.search(q, 1)["results"] if h["url"].startswith(("http://", "https://"))]
    return search


def verified(lab: Lab, cands: dict[str, list[str]], site_queries: int = 0, found_by: dict | None = None,
             queries: list[str] = (), **params) -> dict:
    """Verify every candidate as the spider does: from ``cands[host]`` (its search hits; [] = the
    root only), the root, with hits the sitemap, and ``site_queries`` site-restricted queries
    (words: :func:`site_query_texts` of ``found_by[host]`` and ``queries``)."""
    p = {**DEFAULTS, **params}
    search = site_search(lab) if site_queries else None
    runs = [verify_site(f"http://{h}/", lab.fetch, hits=hits, sitemap=bool(hits), search=search,
                        site_queries=site_query_texts((found_by or {}).get(h, ()), queries, site_queries), **p)
            for h, hits in sorted(cands.items())]
    truth_cands = {h for h in cands if lab.is_true(h)}
    judged = [v.site for v in runs if v.verdict == "relevant"]
    return _row(lab, truth_cands, judged, [v.spent() for v in runs], candidates=len(runs),
                searches=sum(len(v.searches) for v in runs),
                exhausted=sum(v.reason == "exhausted" for v in runs),
                good=[g["url"] for v in runs for g in v.good],
                duplicates=sum("duplicate" in r.get("note", "") for v in runs for r in v.expansions))


def upper_bound(lab: Lab, hosts: list[str], by_host: dict[str, list[str]], threshold: float) -> dict:
    """Every page of each host scored: relevant when >= NumRelPages distinct landed pages reach the threshold."""
    need = DEFAULTS["num_rel_pages"]
    judged, pages, good = [], [], []
    for h in hosts:
        seen: dict[str, str] = {}
        for u in by_host.get(h, []):
            got = lab.fetch(u)
            if got is not None and got[1] >= threshold:
                seen.setdefault(canonical_url(got[0]), got[0])
        pages.append(len(by_host.get(h, [])))
        if len(seen) >= need:
            judged.append(h)
            good += list(seen.values())
    truth_cands = {h for h in hosts if lab.is_true(h)}
    return _row(lab, truth_cands, judged, pages, candidates=len(hosts), good=good)


HOST_COLS = [("value", "candidates, start pages, PageThreshold"), ("candidates", "candidate hosts"),
             ("true_cands", "truly relevant candidates"), ("judged", "judged relevant"),
             ("true_found", "truly relevant judged"), ("precision", "precision"),
             ("recall_cands", "recall among candidates"), ("recall_all", "recall over all true hosts"),
             ("pages_per_site", "pages/site"), ("searches", "site queries (in pages/site)"),
             ("exhausted", "exhausted"), ("duplicates", "duplicate fetches"),
             ("good_pages", "good pages"), ("evidence_precision", "good pages labelled")]


def _kind(n: int) -> str:
    """The row kind of ``n`` site queries per site: "spider" (the default), "entry" (none), else "site<n>"."""
    return "spider" if n == SITE_QUERIES else "entry" if n == 0 else f"site{n}"


def _queries(n: int) -> str:
    return f"{n} site quer{'y' if n == 1 else 'ies'}"


def _start(n: int) -> str:
    if n == 0:
        return "entry pages without site queries (hits, root, sitemap)"
    return (f"entry pages + {_queries(n)} (hits, root, sitemap, site:HOST hits)"
            + (" (default)" if n == SITE_QUERIES else ""))


def run_rules(web: str, name: str, truth_pages: int, queries_file: str | None, search_pages: int,
              site_counts: tuple[int, ...] = ()) -> dict:
    started = time.monotonic()
    site_counts = tuple(dict.fromkeys(site_counts or sorted({SITE_QUERIES, 2, 0})))
    rules = load_rules(name)
    if not rules.label:
        raise SystemExit(f"{rules.path}: no 'label': nothing to score against")
    queries, qpages = load_queries(queries_file) if queries_file else (rules.queries, 0)
    if not queries:
        raise SystemExit(f"{rules.path}: no [queries] in the rules file: pass --queries FILE")
    pages = search_pages or qpages or rules.search_pages or 1
    lab = Lab(web, rules, truth_pages)
    rows, info = page_rows(lab)
    query_rows = []
    found_by: dict[str, list[str]] = {}  # host -> the queries that found it, in order
    for q in queries:
        urls = lab.search(q.text, pages)
        for host in dict.fromkeys(map(site_of, urls)):
            found_by.setdefault(host, []).append(q.text)
        query_rows.append({"value": q.text, "results": len(urls),
                           "labelled_hits": sum(lab.label in lab.corpus.labels(u) for u in urls),
                           "hosts": len({site_of(u) for u in urls}),
                           "true_hosts": len({site_of(u) for u in urls if lab.is_true(site_of(u))})})
    cands = {h: hits for h, hits in lab.hits.items() if h}
    by_host = host_pages(lab)
    texts = [q.text for q in queries]
    sq = {"found_by": found_by, "queries": texts}
    host_rows = []
    for t in (0.7, 0.5):
        for n in site_counts:
            host_rows.append({"kind": _kind(n), "site_queries": n, "value": f"search candidates, {_start(n)}, {t}",
                              **verified(lab, cands, n, page_threshold=t, **(sq if n else {}))})
        host_rows.append({"kind": "root", "value": f"search candidates, root only (before), {t}",
                          **verified(lab, {h: [] for h in cands}, page_threshold=t)})
        host_rows.append({"kind": "site_reach", "value": f"search candidates, entry pages + {_queries(SITE_QUERIES)}, "
                          f"no NumExpPages limit, {t}",
                          **verified(lab, cands, SITE_QUERIES, page_threshold=t, num_exp_pages=10**6, **sq)})
        host_rows.append({"kind": "reach", "value": f"search candidates, entry pages without site queries, no "
                          f"NumExpPages limit (link-reachability bound), {t}",
                          **verified(lab, cands, page_threshold=t, num_exp_pages=10**6)})
        host_rows.append({"kind": "bound", "value": f"search candidates, all pages scored (upper bound), {t}",
                          **upper_bound(lab, sorted(cands), by_host, t)})
        host_rows.append({"kind": "bound_all", "value": f"all hosts, all pages scored (upper bound), {t}",
                          **upper_bound(lab, sorted(by_host), by_host, t)})
    return {"rules": rules.name, "label": rules.label, "queries": len(queries), "search_pages": pages,
            "truth_pages": truth_pages, "hosts": len(by_host), "true_hosts": len(lab.true_sites),
            "info": info, "page_rows": rows, "query_rows": query_rows, "host_rows": host_rows,
            "seconds": time.monotonic() - started}


def report(res: dict) -> str:
    label, k = res["label"], res["truth_pages"]
    info = res["info"]
    base = info["labelled_pages"] / info["pages"] if info["pages"] else NAN
    return "\n".join([
        f"## `{res['rules']}` (label `{label}`)\n",
        f"Real data: {info['pages']} status-200 pages scored, {info['labelled_pages']} labelled `{label}` (base rate "
        f"{base:.3f}); {res['hosts']} http hosts, {res['true_hosts']} truly relevant (>= {k} pages labelled `{label}`); "
        f"{res['queries']} queries of the rules file x {res['search_pages']} result pages. Run time {res['seconds']:.0f} s.\n",
        table(f"Pages: F >= PageThreshold vs {label}", res["page_rows"],
              [("value", "PageThreshold"), ("predicted", "pages predicted"), ("tp", f"of them {label}"),
               ("precision", "precision"), ("recall", "recall"), ("f1", "F1")]),
        table("Rules: pages where each rule fires",
              [{"value": r, "fired": n, "labelled": c, "share": c / n if n else NAN} for r, (n, c) in info["rules"].items()],
              [("value", "rule"), ("fired", "pages"), ("labelled", f"of them {label}"), ("share", "share labelled")]),
        table("Local search queries (the rules file's)", res["query_rows"],
              [("value", "query"), ("results", "results"), ("labelled_hits", f"hits labelled {label}"),
               ("hosts", "hosts"), ("true_hosts", "truly relevant hosts")]),
        table(f"Hosts (truly relevant = >= {k} pages labelled {label}; NumRelPages 3, NumExpPages 50)",
              res["host_rows"], HOST_COLS),
    ])


_EMPTY = {"precision": NAN, "recall_cands": NAN, "pages_per_site": NAN}


def sweep(results: list[dict]) -> str:
    """Precision, recall among candidates and pages/site per number of site queries (PageThreshold
    0.7), per rule set and pooled over the rule sets (sums over their candidates)."""
    rows, pooled = [], {}
    for res in results:
        for r in res["host_rows"][:len(res["host_rows"]) // 2]:
            if "site_queries" not in r:
                continue
            n = r["site_queries"]
            rows.append({**r, "value": f"`{res['rules']}`", "n": n})
            acc = pooled.setdefault(n, {"candidates": 0, "true_cands": 0, "judged": 0, "true_found": 0, "fetches": 0.0})
            for key in ("candidates", "true_cands", "judged", "true_found"):
                acc[key] += r[key]
            acc["fetches"] += r["pages_per_site"] * r["candidates"] if r["candidates"] else 0.0
    if len(results) > 1:
        for n, a in sorted(pooled.items()):
            rows.append({"value": "pooled", "n": n, **a,
                         "precision": a["true_found"] / a["judged"] if a["judged"] else NAN,
                         "recall_cands": a["true_found"] / a["true_cands"] if a["true_cands"] else NAN,
                         "pages_per_site": a["fetches"] / a["candidates"] if a["candidates"] else NAN})
    return table("Site-restricted queries per site (PageThreshold 0.7; pooled = sums over the rule sets' candidates)",
                 rows, [("value", "rules"), ("n", "site queries per site"), ("candidates", "candidate hosts"),
                        ("true_cands", "truly relevant candidates"), ("judged", "judged relevant"),
                        ("true_found", "truly relevant judged"), ("precision", "precision"),
                        ("recall_cands", "recall among candidates"), ("pages_per_site", "pages/site")])


def summary(results: list[dict]) -> str:
    rows = []
    for res in results:
        row = {r["kind"]: r for r in res["host_rows"][:len(res["host_rows"]) // 2]}  # PageThreshold 0.7
        spider = row.get("spider") or next(r for r in row.values() if "site_queries" in r)
        before, reach, bound = row.get("entry", _EMPTY), row["site_reach"], row["bound"]
        rows.append({"value": f"`{res['rules']}`", "label": f"`{res['label']}`", "true_hosts": res["true_hosts"],
                     "candidates": spider["candidates"], "true_cands": spider["true_cands"],
                     "judged": spider["judged"], "precision": spider["precision"],
                     "recall_cands": spider["recall_cands"], "recall_all": spider["recall_all"],
                     "pages_per_site": spider["pages_per_site"], "r_recall": reach["recall_cands"],
                     "o_precision": before["precision"], "o_recall": before["recall_cands"],
                     "o_pages": before["pages_per_site"], "b_precision": bound["precision"],
                     "b_recall": bound["recall_cands"], "b_pages": bound["pages_per_site"],
                     "evidence": spider["evidence_precision"]})
    return table(f"Summary: search candidates verified from their entry pages + {_queries(SITE_QUERIES)} "
                 "(PageThreshold 0.7)", rows, [
        ("value", "rules"), ("label", "label"), ("true_hosts", "truly relevant hosts"),
        ("candidates", "candidate hosts"), ("true_cands", "truly relevant candidates"), ("judged", "judged relevant"),
        ("precision", "precision"), ("recall_cands", "recall among candidates"),
        ("recall_all", "recall over all true hosts"), ("pages_per_site", "pages/site (site queries included)"),
        ("evidence", "good pages labelled"), ("o_precision", "without site queries: precision"),
        ("o_recall", "without site queries: recall among candidates"), ("o_pages", "without site queries: pages/site"),
        ("r_recall", "no budget: recall among candidates"),
        ("b_precision", "upper bound: precision"),
        ("b_recall", "upper bound: recall among candidates"), ("b_pages", "upper bound: pages/site")])


def check_inputs(names: list[str], queries_file: str | None) -> None:
    """Every rules file (and the queries file) read before any run: a mistake is one line
    (SystemExit), as ``scrapy crawl sitefinder`` says it."""
    from topiccrawl.sitefinder.rules import SiteFinderError

    if not names:
        raise SystemExit("--rules names none")
    try:
        if queries_file:
            load_queries(queries_file)
        for name in names:
            rules = load_rules(name)
            if not rules.label:
                raise SystemExit(f"{rules.path}: no 'label': nothing to score against")
            if not queries_file and not rules.queries:
                raise SystemExit(f"{rules.path}: no [queries] in the rules file: pass --queries FILE")
    except SiteFinderError as exc:
        raise SystemExit(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--web", help="corpus spec (default: webkb:DATA_DIR/webkb)")
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"),
                    help="folder of the third-party corpora (default: $TOPICCRAWL_DATA_DIR)")
    ap.add_argument("--rules", default="course-en", help="rule sets, comma-separated (names or .toml paths)")
    ap.add_argument("--queries", help="a queries file used instead of each rules file's [queries]")
    ap.add_argument("--search-pages", type=int, default=0,
                    help="result pages per query, 10 hits each (default: the rules file's `pages`, else 1)")
    ap.add_argument("--truth-pages", type=int, default=3,
                    help="k: a host is truly relevant when >= k of its pages carry the label (default 3)")
    ap.add_argument("--site-queries", default="",
                    help="numbers of site-restricted queries per site to compare, comma-separated "
                         f"(default: 0, 2 and the spider's default {SITE_QUERIES})")
    ap.add_argument("--out")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.web is None:
        if not args.data_dir:
            ap.error("give --web, or --data-dir or TOPICCRAWL_DATA_DIR (the folder holding webkb/)")
        args.web = f"webkb:{Path(args.data_dir) / 'webkb'}"
    if args.truth_pages < 1:
        ap.error("--truth-pages must be >= 1")
    try:
        counts = tuple(int(n) for n in args.site_queries.split(",") if n.strip())
    except ValueError:
        ap.error(f"--site-queries: not a comma-separated list of integers: {args.site_queries!r}")
    if any(n < 0 for n in counts):
        ap.error("--site-queries: counts must be >= 0")
    names = [n.strip() for n in args.rules.split(",") if n.strip()]
    check_inputs(names, args.queries)  # a mistake in the last rules file was a traceback after the others had run
    results = [run_rules(args.web, n, args.truth_pages, args.queries, args.search_pages, counts) for n in names]
    text = "\n".join([summary(results), sweep(results), *map(report, results)])
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
