"""The site finder's experiments (Li, Zhou, Guo, Lin) on the generated web, without Scrapy.

    python -m bench.sitefinder --web "generated:zh-bookstores?pages=20000" --seeds 1,2,3,4,5 \
        --rules bookstore-zh --queries data/rules/bookstore-queries-zh.toml \
        [--out results.md] [--json runs.json] [--plots docs/img --plot-prefix sitefinder-]

``--queries ""`` uses the rules file's own ``[queries]`` (e.g. ``--rules phoneshop-zh``).
Per seed (one repetition each): the lab's search engine (:mod:`topiccrawl.weblab.search`, cached
under $TOPICCRAWL_CACHE) answers every query; search hits are merged into candidate sites; each
site is verified by :func:`topiccrawl.sitefinder.verifier.verify_site` as the spider does it: from
its entry pages (its search hits, the root, ``/sitemap.xml``), each page identified by the URL it
landed on, with pages read straight from the corpus (redirects followed, robots.txt not
consulted), scored once and cached, so parameter sweeps cost no extra page generation. Ground
truth (:class:`topiccrawl.sitefinder.truth.SiteTruth`): a site is truly relevant when at least
``--truth-pages`` (default 3) of its pages carry the rules file's ``label``; recall is over every
such site of the corpus. The navigation-portal rows verify the listed sites from their roots.

Tables (markdown on stdout and in ``--out``): precision and relevant sites vs PageThreshold;
pages per site vs NumRelPages and vs NumExpPages; AbstractURL variant and prior; the query set
(search relevance rate per query); the navigation-portal baseline (the sites the portal lists).
Numbers are means over the seeds, ``mean ± sd`` (sample standard deviation) with two or more
seeds. ``--plots DIR`` draws precision / judged-relevant sites vs PageThreshold and pages per site
vs NumRelPages and NumExpPages (mean with sd error bars). Everything is synthetic: see docs/generated-web.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urljoin

from topiccrawl.scoring.text import extract
from topiccrawl.sitefinder.rules import load_queries, load_rules
from topiccrawl.sitefinder.truth import SiteTruth
from topiccrawl.sitefinder.verifier import site_of, sitemap_links, verify_site
from topiccrawl.weblab.corpus import open_corpus
from topiccrawl.weblab.generated import PORTAL_URL
from topiccrawl.weblab.search import SearchIndex

REPO = Path(__file__).resolve().parent.parent

DEFAULTS = {"page_threshold": 0.7, "num_rel_pages": 3, "num_exp_pages": 50, "prior": 0.5, "digits": False}


class Lab:
    """One corpus: search, cached page scores, ground truth."""

    def __init__(self, spec: str, rules, truth_pages: int = 3) -> None:
        self.corpus = open_corpus(spec)
        self.rules = rules
        self.index = SearchIndex.for_spec(self.corpus, spec).build()
        self.pages: dict[str, tuple | None] = {}
        self.label = rules.label
        self.truth = SiteTruth.from_pages(self.corpus.iter_urls(), self.corpus.labels, self.label, truth_pages,
                                          self.corpus.canonical)
        self.true_sites = self.truth.true_sites()
        self.hits: dict[str, list[str]] = {}  # site -> search hits that named it (entry pages)

    def search(self, query: str, pages: int) -> list[str]:
        """The http(s) hit URLs of ``query`` (result pages 1..``pages``), also noted per site in
        :attr:`hits` (other schemes, e.g. WebKB's ftp: pages, are not sites a crawler verifies)."""
        urls = []
        for pageno in range(1, pages + 1):
            hits = self.index.search(query, pageno)["results"]
            urls += [h["url"] for h in hits if h["url"].startswith(("http://", "https://"))]
            if not hits:
                break
        for url in urls:
            found = self.hits.setdefault(site_of(url), [])
            if url not in found:
                found.append(url)
        return urls

    def fetch(self, url: str):
        """(final URL, F, matched rules, outlinks) or None, as the spider would see the page."""
        if url not in self.pages:
            self.pages[url] = self._fetch(url)
        return self.pages[url]

    def _fetch(self, url: str):
        for _ in range(10):
            page = self.corpus.get(url)
            if page is None:
                return None
            if page.status in (301, 302, 303, 307, 308) and page.headers.get("Location"):
                url = urljoin(url, page.headers["Location"])
                continue
            if page.status != 200:
                return None
            ctype = page.headers.get("Content-Type", "")
            locs = sitemap_links(page.body, url) if "xml" in ctype.lower() else None
            if locs is not None:
                return url, 0.0, [], locs
            ex = extract(page.body, url, ctype)
            score, matched = self.rules.score(f"{ex.title}\n{ex.text}")
            return url, score, matched, [a.url for a in ex.anchors]
        return None

    def is_true(self, site: str) -> bool:
        return self.truth.is_true(site)

    def portal_sites(self) -> set[str]:
        """Hosts listed by the navigation portal (its home and directory pages)."""
        portal, todo, seen, listed = site_of(PORTAL_URL), [PORTAL_URL], {PORTAL_URL}, set()
        while todo:
            got = self.fetch(todo.pop())
            for link in got[3] if got else ():
                if site_of(link) != portal:
                    listed.add(site_of(link))
                elif link not in seen:
                    seen.add(link)
                    todo.append(link)
        return listed


def evaluate(lab: Lab, sites, hits: bool = True, **params) -> dict:
    """Verify ``sites`` as the spider does (from their search hits, root and sitemap; ``hits=False``:
    from the root and sitemap only, e.g. sites listed by a portal)."""
    p = {**DEFAULTS, **params}
    runs = [verify_site(f"http://{s}/", lab.fetch, hits=lab.hits.get(s, []) if hits else (), sitemap=True, **p)
            for s in sorted(sites)]
    judged = [v for v in runs if v.verdict == "relevant"]
    hits = sum(lab.is_true(v.site) for v in judged)
    pages = [len(v.expansions) for v in runs]
    return {
        "candidates": len(runs), "judged": len(judged), "true_found": hits,
        "precision": hits / len(judged) if judged else float("nan"),
        "recall": hits / len(lab.true_sites) if lab.true_sites else float("nan"),
        "pages_per_site": statistics.fmean(pages) if pages else 0.0,
        "pages_relevant": statistics.fmean([len(v.expansions) for v in judged]) if judged else float("nan"),
        "pages_irrelevant": statistics.fmean(rest) if (rest := [len(v.expansions) for v in runs
                                                                if v.verdict != "relevant"]) else float("nan"),
    }


class Stat(float):
    """A mean over the seeds that remembers its sample standard deviation (``sd``)."""

    def __new__(cls, values: list[float]):
        vals = [v for v in values if v == v]  # NaN (undefined, e.g. precision of nothing) left out
        self = super().__new__(cls, statistics.fmean(vals) if vals else float("nan"))
        self.sd = statistics.stdev(vals) if len(vals) > 1 else float("nan")
        self.n, self.of = len(vals), len(values)
        return self


def mean_rows(per_seed: list[list[dict]]) -> list[dict]:
    """Average the numeric cells (but the parameter ``value``) of the same row over the seeds (:class:`Stat`)."""
    out = []
    for rows in zip(*per_seed):
        row = dict(rows[0])
        for key, value in row.items():
            if key != "value" and isinstance(value, (int, float)) and not isinstance(value, bool):
                row[key] = Stat([r[key] for r in rows])
        out.append(row)
    return out


def table(title: str, rows: list[dict], cols: list[tuple[str, str]]) -> str:
    def num(v: float) -> str:
        return "n/a" if v != v else f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:.0f}"

    def fmt(v) -> str:
        if isinstance(v, Stat) and v.of > 1 and v == v:
            cell = f"{num(v)} ± {num(v.sd)}" if v.sd == v.sd else num(v)
            return cell + (f" ({v.n}/{v.of} seeds)" if v.n < v.of else "")
        return num(v) if isinstance(v, float) else str(v)

    lines = [f"### {title}", "", "| " + " | ".join(h for _, h in cols) + " |",
             "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r[k]) for k, _ in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


METRICS = [("candidates", "candidate sites"), ("judged", "judged relevant"), ("true_found", "truly relevant judged"),
           ("precision", "precision"), ("recall", "recall"), ("pages_per_site", "pages/site"),
           ("pages_relevant", "pages/relevant site"), ("pages_irrelevant", "pages/irrelevant site")]


def run_seed(spec: str, rules, queries, pages: int, truth_pages: int = 3) -> dict[str, list[dict]]:
    lab = Lab(spec, rules, truth_pages)
    found: dict[str, list[str]] = {}
    query_rows = []
    for q in queries:
        urls = lab.search(q.text, pages)
        sites = {site_of(u) for u in urls}
        for s in sites:
            found.setdefault(s, []).append(q.text)
        true = sum(lab.is_true(s) for s in sites)
        ev = evaluate(lab, sites)
        query_rows.append({"query": q.text, "kind": q.kind, "results": len(urls), "sites": len(sites),
                           "true_sites": true, "rate": true / len(sites) if sites else float("nan"),
                           "true_found": ev["true_found"]})
    cands = set(found)
    for kind in dict.fromkeys(q.kind for q in queries):
        sites = {s for s, qs in found.items() if any(q.kind == kind and q.text in qs for q in queries)}
        true = sum(lab.is_true(s) for s in sites)
        results = sum(r["results"] for r in query_rows if r["kind"] == kind)
        query_rows.append({"query": f"all {kind} queries", "kind": kind, "results": results, "sites": len(sites),
                           "true_sites": true, "rate": true / len(sites) if sites else float("nan"),
                           "true_found": evaluate(lab, sites)["true_found"]})
    true = sum(lab.is_true(s) for s in cands)
    query_rows.append({"query": "all queries", "kind": "-",
                       "results": sum(r["results"] for r in query_rows[:len(queries)]), "sites": len(cands),
                       "true_sites": true, "rate": true / len(cands) if cands else float("nan"),
                       "true_found": evaluate(lab, cands)["true_found"]})

    out = {"queries": query_rows}
    out["threshold"] = [{"value": t, **evaluate(lab, cands, page_threshold=t)}
                        for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    out["numrel"] = [{"value": n, **evaluate(lab, cands, num_rel_pages=n)} for n in (1, 2, 3, 4, 5, 8)]
    out["numexp"] = [{"value": n, **evaluate(lab, cands, num_exp_pages=n)} for n in (10, 20, 30, 50, 100)]
    out["variants"] = [{"value": f"{'digits' if d else 'paper'}, prior {pr}",
                        **evaluate(lab, cands, digits=d, prior=pr)}
                       for d in (False, True) for pr in (0.0, 0.5, 1.0)]
    portal = lab.portal_sites()
    listed_true = {s for s in portal if lab.is_true(s)}
    ours = {s for s in cands
            if verify_site(f"http://{s}/", lab.fetch, hits=lab.hits.get(s, []), sitemap=True, **DEFAULTS).verdict
            == "relevant" and lab.is_true(s)}
    nan = float("nan")
    out["portal"] = [
        {"value": "portal listing, picked by ground truth", "candidates": len(portal), "judged": len(listed_true),
         "true_found": len(listed_true), "precision": 1.0 if listed_true else nan,
         "recall": len(listed_true) / len(lab.true_sites), "pages_per_site": nan, "pages_relevant": nan,
         "pages_irrelevant": nan},
        {"value": "portal listing + verification", **evaluate(lab, portal, hits=False)},
        {"value": "meta-search + verification", **evaluate(lab, cands)},
        {"value": "portal's true sites also found by meta-search + verification", "candidates": len(listed_true),
         "judged": len(ours & listed_true), "true_found": len(ours & listed_true), "precision": nan,
         "recall": len(ours & listed_true) / len(listed_true) if listed_true else nan,
         "pages_per_site": nan, "pages_relevant": nan, "pages_irrelevant": nan},
        {"value": "union of both true finds", "candidates": len(portal | cands), "judged": len(ours | listed_true),
         "true_found": len(ours | listed_true), "precision": nan,
         "recall": len(ours | listed_true) / len(lab.true_sites), "pages_per_site": nan, "pages_relevant": nan,
         "pages_irrelevant": nan},
    ]
    out["corpus"] = [{"value": spec, "true_sites": len(lab.true_sites), "hosts": len(lab.corpus.hosts()),
                      "pages_scored": len(lab.pages), "listed": len(portal)}]
    return out


def plot(merged: dict, out_dir: str, prefix: str, title: str) -> list[Path]:
    """Figs. 5-8 of the paper: mean over the seeds with sd error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(rows, key):
        return [r["value"] for r in rows], [float(r[key]) for r in rows], [getattr(r[key], "sd", 0) or 0 for r in rows]

    def err(v):
        return [0 if e != e else e for e in v]

    paths = []
    fig, ax = plt.subplots(figsize=(6, 4))
    x, y, e = series(merged["threshold"], "precision")
    ax.errorbar(x, y, yerr=err(e), marker="o", capsize=3, label="precision")
    ax.set_xlabel("PageThreshold")
    ax.set_ylabel("precision")
    ax.set_ylim(0, 1.05)
    ax2 = ax.twinx()
    x, y, e = series(merged["threshold"], "judged")
    ax2.errorbar(x, y, yerr=err(e), marker="s", color="tab:orange", capsize=3, label="sites judged relevant")
    x, y, _ = series(merged["threshold"], "true_found")
    ax2.plot(x, y, ls="--", color="tab:green", label="truly relevant judged")
    ax2.set_ylabel("sites")
    ax2.set_ylim(bottom=0)
    fig.legend(loc="lower left", bbox_to_anchor=(0.12, 0.15), fontsize=8)
    ax.set_title(f"{title}: precision and relevant sites vs PageThreshold (Figs. 5-6)", fontsize=9)
    paths.append(Path(out_dir) / f"{prefix}threshold.png")
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, xlabel in ((axes[0], "numrel", "NumRelPages (NumExpPages 50)"),
                            (axes[1], "numexp", "NumExpPages (NumRelPages 3)")):
        for col, lab in (("pages_per_site", "all sites"), ("pages_relevant", "relevant sites"),
                         ("pages_irrelevant", "irrelevant sites")):
            x, y, e = series(merged[key], col)
            ax.errorbar(x, y, yerr=err(e), marker="o", capsize=3, label=lab)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("pages fetched per site")
        ax.legend(fontsize=8)
    fig.suptitle(f"{title}: average pages per site (Figs. 7-8)", fontsize=9)
    paths.append(Path(out_dir) / f"{prefix}pages.png")
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--web", default="generated:zh-bookstores?pages=20000")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds, one repetition each")
    ap.add_argument("--rules", default="bookstore-zh")
    ap.add_argument("--queries", default=str(REPO / "data" / "rules" / "bookstore-queries-zh.toml"))
    ap.add_argument("--pages", type=int, default=0, help="search result pages per query (default: the file's)")
    ap.add_argument("--truth-pages", type=int, default=3,
                    help="k: a site is truly relevant when >= k of its pages carry the label (default 3)")
    ap.add_argument("--out", help="also write the markdown here")
    ap.add_argument("--json", help="write the per-seed rows here (JSON)")
    ap.add_argument("--plots", help="directory for the PNG figures")
    ap.add_argument("--plot-prefix", default="sitefinder-", help="file name prefix of the figures")
    args = ap.parse_args(argv)
    rules = load_rules(args.rules)
    if args.queries:
        queries, pages = load_queries(args.queries)
    else:
        queries, pages = rules.queries, 0
    if not queries:
        raise SystemExit(f"{rules.path}: no queries in the rules file: pass --queries FILE")
    pages = args.pages or pages or rules.search_pages or 1
    started = time.monotonic()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    sep = "&" if "?" in args.web else "?"
    runs = [run_seed(f"{args.web}{sep}seed={s}", rules, queries, pages, args.truth_pages) for s in seeds]
    merged = {k: mean_rows([r[k] for r in runs]) for k in runs[0]}
    val = [("value", "")]
    parts = [
        f"Synthetic: generated web `{args.web}`, seeds {args.seeds} ({len(seeds)} repetition(s), means), rules "
        f"`{rules.name}` (label `{rules.label}`, a site truly relevant with >= {args.truth_pages} labelled pages), "
        f"{len(queries)} queries x {pages} result pages; defaults "
        f"PageThreshold 0.7, NumRelPages 3, NumExpPages 50, prior 0.5, paper AbstractURL. "
        f"Run time {time.monotonic() - started:.0f} s.\n",
        table("Corpus", merged["corpus"], [("value", "spec (first seed)"), ("hosts", "hosts"),
                                           ("true_sites", "true sites"), ("listed", "sites listed by the portal"),
                                           ("pages_scored", "pages scored")]),
        table("Precision and relevant sites vs PageThreshold", merged["threshold"],
              [("value", "PageThreshold")] + METRICS),
        table("Pages per site vs NumRelPages (NumExpPages 50)", merged["numrel"], [("value", "NumRelPages")] + METRICS),
        table("Pages per site vs NumExpPages (NumRelPages 3)", merged["numexp"], [("value", "NumExpPages")] + METRICS),
        table("AbstractURL variant and prior of unexpanded classes", merged["variants"], val + METRICS),
        table("Query set: search relevance rate (truly relevant candidate sites / candidate sites)", merged["queries"],
              [("query", "query"), ("kind", "kind"), ("results", "results"), ("sites", "candidate sites"),
               ("true_sites", "truly relevant"), ("rate", "relevance rate"), ("true_found", "true sites verified")]),
        table("Navigation-portal baseline", merged["portal"], val + METRICS),
    ]
    if args.plots:
        for path in plot(merged, args.plots, args.plot_prefix, f"{rules.name}, {len(seeds)} seed(s)"):
            parts.append(f"Figure: `{path}`\n")
    text = "\n".join(parts)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"seeds": seeds, "runs": runs}, ensure_ascii=False, indent=1,
                                              default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
