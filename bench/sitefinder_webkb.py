"""The site finder's page score and site verification on WebKB (real 1996-97 pages, real labels).

    python -m bench.sitefinder_webkb --data-dir DIR --rules course-en \
        [--out results.md] [--json results.json]

WebKB has no search engine of its own and one host per university, so the task is defined as:

1. **Pages** (the main measure): every page served with status 200 is a candidate; it is judged a
   course page when F(P, R) >= PageThreshold (the paper's page score, ``course-en`` rules) and
   checked against WebKB's ``class:course`` label: precision, recall and F1 per PageThreshold.
2. **Hosts** ("site = host"): a host is *truly relevant* when it has at least ``--min-course``
   pages labelled ``class:course`` (default 3 = NumRelPages). Candidates are (a) the hosts of the
   hits of the lab's local search (:mod:`topiccrawl.weblab.search`, SQLite FTS5 over the corpus) for
   course queries, and (b) every host. Each candidate is verified by minimum-cost verification
   (defaults PageThreshold 0.7, NumRelPages 3, NumExpPages 50) from ``http://host/`` as the spider
   does (``root``), and, as a variant, from the root plus the search hits / all pages of the host
   listed in the corpus (``root+hits``): many WebKB hosts have no root page in the set. Reported:
   host precision and recall, pages per site, and the *evidence precision* (share of the good
   pages found during verification that carry ``class:course``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from bench.sitefinder import DEFAULTS, Lab, table
from topiccrawl.sitefinder.rules import load_rules
from topiccrawl.sitefinder.verifier import SiteVerifier, entry_url, site_of

REPO = Path(__file__).resolve().parent.parent

LABEL = "class:course"
QUERIES = ["course syllabus", "homework assignments", "lecture notes", "midterm final exam",
           "office hours instructor", "course cs"]
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def verify(lab: Lab, site: str, starts: list[str], **params) -> SiteVerifier:
    """Minimum-cost verification of ``site`` from its root page and ``starts`` (same loop as
    :func:`topiccrawl.sitefinder.core.verify_site`, which starts from the root only)."""
    v = SiteVerifier(site, **{**DEFAULTS, **params})
    v.entry = entry_url(f"http://{site}/")
    for url in [v.entry, *starts]:
        v.add(url)
    while (picked := v.next()) is not None:
        url, _ = picked
        got = lab.fetch(url)
        if got is None:
            v.record(url, 0.0, note="failed")
            continue
        final, score, rules, links = got
        for link in links:
            if site_of(link) in (site, site_of(final)):
                v.add(link)
        v.record(url, score, rules)
    return v


def page_rows(lab: Lab) -> tuple[list[dict], dict]:
    """Precision/recall of F >= t against class:course over every status-200 page."""
    scored = []
    for url in lab.corpus.iter_urls():
        page = lab.corpus.get(url)
        if page is None or page.status != 200:
            continue
        got = lab.fetch(url)
        if got is not None:
            scored.append((got[1], LABEL in lab.corpus.labels(url), got[2]))
    positives = sum(t for _, t, _ in scored)
    rows = []
    for t in THRESHOLDS:
        pred = [truth for f, truth, _ in scored if f >= t]
        tp = sum(pred)
        p = tp / len(pred) if pred else float("nan")
        r = tp / positives
        rows.append({"value": t, "predicted": len(pred), "tp": tp, "precision": p, "recall": r,
                     "f1": 2 * p * r / (p + r) if pred and p + r else 0.0})
    rule_rows = {}
    for name in (r.name for r in lab.rules.rules):
        fired = [truth for _, truth, m in scored if name in m]
        rule_rows[name] = (len(fired), sum(fired))
    info = {"pages": len(scored), "course_pages": positives, "rules": rule_rows}
    return rows, info


def host_eval(lab: Lab, course: Counter, min_course: int, cands: dict[str, list[str]], **params) -> dict:
    truth = {h for h, n in course.items() if n >= min_course}
    runs = [verify(lab, h, starts, **params) for h, starts in sorted(cands.items())]
    judged = [v for v in runs if v.verdict == "relevant"]
    hits = sum(v.site in truth for v in judged)
    good = [g for v in runs for g in v.good]
    good_true = sum(LABEL in lab.corpus.labels(g["url"]) for g in good)
    nan = float("nan")
    return {"candidates": len(runs), "true_cands": sum(h in truth for h in cands), "judged": len(judged),
            "true_found": hits, "precision": hits / len(judged) if judged else nan,
            "recall": hits / len(truth) if truth else nan,
            "pages_per_site": statistics.fmean(len(v.expansions) for v in runs) if runs else nan,
            "exhausted": sum(v.reason == "exhausted" for v in runs),
            "good_pages": len(good), "evidence_precision": good_true / len(good) if good else nan}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--web", help="corpus spec (default: webkb:DATA_DIR/webkb)")
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"),
                    help="folder of the third-party corpora (default: $TOPICCRAWL_DATA_DIR)")
    ap.add_argument("--rules", default="course-en")
    ap.add_argument("--search-pages", type=int, default=3, help="result pages per query (10 hits each)")
    ap.add_argument("--min-course", type=int, default=3, help="class:course pages that make a host truly relevant")
    ap.add_argument("--out")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.web is None:
        if not args.data_dir:
            ap.error("give --web, or --data-dir or TOPICCRAWL_DATA_DIR (the folder holding webkb/)")
        args.web = f"webkb:{Path(args.data_dir) / 'webkb'}"
    started = time.monotonic()
    rules = load_rules(args.rules)
    lab = Lab(args.web, rules)
    course = Counter(site_of(u) for u in lab.corpus.iter_urls() if LABEL in lab.corpus.labels(u))
    rows, info = page_rows(lab)

    hits: dict[str, list[str]] = {}
    query_rows = []
    for q in QUERIES:
        urls = lab.search(q, args.search_pages)
        for u in urls:
            hits.setdefault(site_of(u), []).append(u)
        course_hits = sum(LABEL in lab.corpus.labels(u) for u in urls)
        query_rows.append({"value": q, "results": len(urls), "course_hits": course_hits,
                           "hosts": len({site_of(u) for u in urls})})
    by_host: dict[str, list[str]] = {}
    for u in lab.corpus.iter_urls():
        if u.startswith("http"):
            by_host.setdefault(site_of(u), []).append(u)
    host_rows = []
    for name, cands in (("search hits' hosts", {h: sorted(set(us)) for h, us in hits.items()}),
                        ("all hosts", by_host)):
        for mode in ("root", "root+hits" if name.startswith("search") else "root+all pages"):
            starts = cands if mode != "root" else {h: [] for h in cands}
            for t in (0.5, 0.7):
                host_rows.append({"value": f"{name}, {mode}, PageThreshold {t}",
                                  **host_eval(lab, course, args.min_course, starts, page_threshold=t)})
    truth = sum(n >= args.min_course for n in course.values())
    parts = [
        f"Real data: `{args.web}` ({info['pages']} status-200 pages scored, {info['course_pages']} labelled "
        f"`{LABEL}`, base rate {info['course_pages'] / info['pages']:.3f}; {len(by_host)} http hosts, "
        f"{truth} with >= {args.min_course} course pages), rules `{rules.name}`. Run time "
        f"{time.monotonic() - started:.0f} s.\n",
        table("Pages: F >= PageThreshold vs class:course", rows,
              [("value", "PageThreshold"), ("predicted", "pages predicted"), ("tp", "of them course"),
               ("precision", "precision"), ("recall", "recall"), ("f1", "F1")]),
        table("Rules: pages where each rule fires", [{"value": k, "fired": n, "course": c,
                                                       "share": c / n if n else float("nan")}
                                                      for k, (n, c) in info["rules"].items()],
              [("value", "rule"), ("fired", "pages"), ("course", "of them course"), ("share", "share course")]),
        table("Local search queries", query_rows, [("value", "query"), ("results", "results"),
                                                   ("course_hits", "hits labelled course"), ("hosts", "hosts")]),
        table(f"Hosts (truly relevant = >= {args.min_course} course pages; NumRelPages 3, NumExpPages 50)", host_rows,
              [("value", "candidates, start pages, threshold"), ("candidates", "candidate hosts"),
               ("true_cands", "truly relevant candidates"), ("judged", "judged relevant"),
               ("true_found", "truly relevant judged"), ("precision", "precision"), ("recall", "recall"),
               ("pages_per_site", "pages/site"), ("exhausted", "exhausted"), ("good_pages", "good pages"),
               ("evidence_precision", "good pages labelled course")]),
    ]
    text = "\n".join(parts)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"pages": rows, "info": info, "queries": query_rows, "hosts": host_rows},
                                              indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
