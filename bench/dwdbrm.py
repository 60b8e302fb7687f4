"""DWDBRM on ground truth: the bandit vs each operator alone vs best-first, ranking tables, rewards.

    python -m bench.dwdbrm --corpus realestate --reps 5 --pages 1000 \
        --methods dwdbrm,keyword_search,related_search,forward,backward,focused,dwdbrm-disco
    python -m bench.dwdbrm --corpus wikispeedia --reps 5 --pages 600
    python -m bench.dwdbrm --report     # only the tables (OUT/results.md) and OUT/img/dwdbrm-*.png

Corpora: ``realestate`` = ``generated:zh-realestate?pages=20000&seed=S`` (S = 1..reps, one web
per repetition), topic 房产, 5 seeds chosen exactly as the spiders' ``seeds=truth:5`` does;
``wikispeedia`` = ``wikispeedia:<--data-dir>/wikispeedia``, topic weather-en, repetition r uses 5
relevant pages drawn from the labels with ``random.Random(r)``. Every method of a repetition gets
the same explicit seeds. Methods: ``dwdbrm`` (UCB1 over KS/RS/FC/BC, reward ``paper``),
``dwdbrm-disco`` (reward ``disco``), ``keyword_search``, ``related_search``, ``forward``,
``backward`` (one operator alone) and ``focused`` (``scrapy crawl focused -a strategy=bestfirst``
with ``max_pages`` = pages + seeds). Each run is a real ``scrapy crawl`` process behind one shared
web lab per web (``TOPICCRAWL_WEB_PROXY``); runs go one at a time. Every run's summary goes to
``OUT/runs.jsonl`` (default ``out/bench-dwdbrm``; a rerun of a corpus/method/rep replaces its line).

Counting (the same for every method): *pages retrieved* are the distinct pages a method fetched
other than its seeds (and, for dwdbrm, its 200 background pages and search-API answers, which
are counted separately as HTTP requests); a page is relevant if its ground-truth labels meet the
topic's labels; a *relevant site* is the host name (``www.`` dropped) of a relevant page.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from topiccrawl.discovery.rankers import combine_positions
from topiccrawl.scoring.metrics import mean_rank, mean_sd, median_rank, precision_at
from topiccrawl.scoring.topic import load_topic
from topiccrawl.weblab.api import WebLab
from topiccrawl.weblab.corpus import open_corpus

REPO = Path(__file__).resolve().parent.parent

#: name -> topic and the corpus spec of repetition ``rep`` (``data_dir``: --data-dir)
CORPORA = {
    "realestate": {"topic": "房产",
                   "spec": lambda rep, data_dir: f"generated:zh-realestate?pages=20000&seed={rep + 1}"},
    "wikispeedia": {"topic": "weather-en",
                    "spec": lambda rep, data_dir: f"wikispeedia:{data_path(data_dir, 'wikispeedia')}"},
}
METHODS = ("dwdbrm", "keyword_search", "related_search", "forward", "backward", "focused")
LABELS = {"dwdbrm": "BANDIT (dwdbrm)", "dwdbrm-disco": "BANDIT, disco reward", "keyword_search": "KS only",
          "related_search": "RS only", "forward": "FC only", "backward": "BC only", "focused": "best-first focused"}
RANKERS = ("combined", "nb", "lr", "ocsvm", "cosine", "jaccard", "pagerank")
P_AT = (10, 17, 35, 50, 100)
N_SEEDS = 5


def data_path(data_dir: str | None, name: str) -> Path:
    """``data_dir/name``; a one-line exit when no data folder was given."""
    if not data_dir:
        raise SystemExit(f"corpus {name} needs the third-party data folder: --data-dir DIR or TOPICCRAWL_DATA_DIR")
    return Path(data_dir) / name


def site(url: str) -> str:
    host = urlsplit(url).hostname or ""
    return host[4:] if host.startswith("www.") else host


class Truth:
    def __init__(self, spec: str, topic: str):
        self.corpus = open_corpus(spec)
        self.labels = load_topic(topic).labels

    def relevant(self, url: str) -> bool:
        return bool(self.corpus.labels(url) & self.labels)

    def seeds(self, corpus_name: str, rep: int) -> list[str]:
        if corpus_name == "realestate":  # exactly the spiders' seeds=truth:5
            rel = [u for u in self.corpus.search_sample(20000) if self.relevant(u)]
            return random.Random(0).sample(rel, N_SEEDS)
        rel = sorted(u for u in self.corpus.iter_urls() if self.relevant(u))
        return random.Random(rep).sample(rel, N_SEEDS)

    def curve(self, urls: list[str]) -> list[tuple[int, int, int]]:
        """(pages retrieved, relevant pages, relevant sites) after each page."""
        rel, sites, out = 0, set(), []
        for i, u in enumerate(urls, 1):
            if self.relevant(u):
                rel += 1
                sites.add(site(u))
            out.append((i, rel, len(sites)))
        return out


def run(method: str, spec: str, proxy: str, topic: str, seeds: list[str], pages: int, out: Path, truth: Truth) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    spider, extra = method, []
    if method == "focused":
        extra = ["-a", "strategy=bestfirst", "-a", f"max_pages={pages + len(seeds)}"]
    else:
        if method == "dwdbrm-disco":
            spider, extra = "dwdbrm", ["-a", "reward=disco"]
        extra += ["-a", f"pages={pages}"]
    cmd = [str(Path(sys.executable).parent / "scrapy"), "crawl", spider, "-a", f"topic={topic}",
           "-a", "seeds=" + ",".join(seeds), *extra,
           "-s", f"TOPICCRAWL_WEB={spec}", "-s", f"TOPICCRAWL_WEB_PROXY={proxy}",
           "-s", f"TOPICCRAWL_OUTPUT_DIR={out}", "-s", "TOPICCRAWL_PLOT_ENABLED=false",
           "-s", "TOPICCRAWL_PROGRESS_INTERVAL=0", "-s", "LOG_LEVEL=INFO", "-O", str(out / "pages.jsonl")]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (out / "stderr.log").write_text(proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise SystemExit(f"{method} failed ({out}):\n{proc.stderr[-3000:]}")
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    res = {"method": method, "wall_s": round(wall, 1), "requests": stats.get("downloader/request_count", 0),
           "finish_reason": stats.get("finish_reason"), "errors": stats.get("log_count/ERROR", 0)}
    seedset = set(seeds)
    if method == "focused":
        rows = list(csv.DictReader((out / "harvest.csv").open(encoding="utf-8")))
        urls = [r["url"] for r in rows if r["url"] not in seedset]
        res["check_relevant"] = int(rows[-1]["truth_relevant"]) - sum(map(truth.relevant, seedset)) if rows else 0
    else:
        report = json.loads((out / "discovery.json").read_text(encoding="utf-8"))
        urls = [json.loads(l)["url"] for l in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
        res.update(ranking=report.get("ranking", {}), operators=report["operators"], finished=report["finished"],
                   check_relevant=report["curve"][-1][1] if report.get("curve") else 0)
        ranked = [json.loads(l)["url"] for l in (out / "ranked.jsonl").read_text(encoding="utf-8").splitlines()]
        res["ranked_base_rate"] = sum(map(truth.relevant, ranked)) / len(ranked) if ranked else 0.0
    curve = truth.curve(urls)
    res["curve"] = curve
    res["relevant_sites"] = sorted({site(u) for u in urls if truth.relevant(u)})
    if curve and curve[-1][1] != res["check_relevant"]:
        print(f"  warning: {method} relevant pages {curve[-1][1]} != spider's own count {res['check_relevant']}",
              file=sys.stderr)
    return res


def load_runs(path: Path) -> dict:
    runs = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            runs[(r["corpus"], r["method"], r["rep"])] = r
    return runs


def crawl(args) -> None:
    cfg = CORPORA[args.corpus]
    methods = args.methods.split(",")
    runs_path = args.out / "runs.jsonl"
    runs = load_runs(runs_path)
    lab, lab_spec = None, None
    try:
        for rep in range(args.reps):
            spec = cfg["spec"](rep, args.data_dir)
            if spec != lab_spec:
                if lab is not None:
                    lab.stop()
                t0 = time.monotonic()
                lab, lab_spec = WebLab(spec, startup_timeout=600).start(), spec
                truth = Truth(spec, cfg["topic"])
                print(f"lab {spec}: {lab.pages} pages, ready in {time.monotonic() - t0:.0f} s", file=sys.stderr)
            seeds = truth.seeds(args.corpus, rep)
            for method in methods:
                res = run(method, spec, lab.proxy_url, cfg["topic"], seeds, args.pages,
                          args.out / args.corpus / f"{method}-{rep}", truth)
                res.update(corpus=args.corpus, rep=rep, spec=spec, seeds=seeds, pages=args.pages)
                runs[(args.corpus, method, rep)] = res
                last = res["curve"][-1] if res["curve"] else (0, 0, 0)
                print(f"{args.corpus} rep {rep} {method}: {last[0]} pages, {last[1]} relevant, {last[2]} sites, "
                      f"{res['requests']} requests, {res['wall_s']} s", file=sys.stderr)
                runs_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in runs.values()),
                                     encoding="utf-8")
    finally:
        if lab is not None:
            lab.stop()


# -- report -----------------------------------------------------------------------------------
def ms(values, digits: int = 1) -> str:
    return mean_sd(values, digits)


def at(curve, x: int, idx: int) -> int:
    """The count after x pages; a run that stopped earlier keeps its final count."""
    if not curve:
        return 0
    return curve[min(x, len(curve)) - 1][idx]


@functools.cache
def truth_of(spec: str, topic: str) -> Truth:
    return Truth(spec, topic)


def web_totals(corpus: str, specs: list[str]) -> list[tuple[int, int]]:
    """(relevant pages, relevant sites) of each web."""
    out = []
    for spec in specs:
        truth = truth_of(spec, CORPORA[corpus]["topic"])
        rel = [u for u in truth.corpus.iter_urls() if truth.relevant(u)]
        out.append((len(rel), len({site(u) for u in rel})))
    return out


def combined_quality(run: dict, run_dir: Path, alpha: float) -> dict:
    """P@N / MR / MedR of eq. 8 recomputed with another α from the positions in ranked.jsonl."""
    rows = [json.loads(l) for l in (run_dir / "ranked.jsonl").read_text(encoding="utf-8").splitlines()]
    rankers = [n for n in rows[0]["positions"] if n != "pagerank"]
    score = combine_positions([[r["positions"][n] for r in rows] for n in rankers],
                              [r["positions"]["pagerank"] for r in rows], alpha)
    truth = truth_of(run["spec"], CORPORA[run["corpus"]]["topic"])
    order = [truth.relevant(r["url"]) for _, r in sorted(zip(score, rows), key=lambda t: (t[0], t[1]["url"]))]
    return {**{f"p_at_{n}": precision_at(order, n) for n in P_AT},
            "mean_rank": mean_rank(order), "median_rank": median_rank(order)}


def new_sites(run: dict) -> set[str]:
    """Relevant sites found other than the seeds' own sites."""
    seed_sites = {site(u) for u in run["seeds"]}
    return set(run["relevant_sites"]) - seed_sites


def report(args) -> None:
    runs = load_runs(args.out / "runs.jsonl")
    lines = []
    for corpus in CORPORA:
        by_method = {}
        for (c, m, _), r in sorted(runs.items(), key=lambda kv: kv[0][2]):
            if c == corpus:
                by_method.setdefault(m, []).append(r)
        if not by_method:
            continue
        pages = next(iter(by_method.values()))[0]["pages"]
        xs = sorted({pages // 10, pages // 4, pages // 2, pages})
        n = max(len(v) for v in by_method.values())
        totals = web_totals(corpus, sorted({r["spec"] for rs in by_method.values() for r in rs}))
        multisite = max(t[1] for t in totals) > 1  # site columns only where there are several sites
        head = [f"rel. pages @{x}" for x in xs] + ([f"rel. sites @{x}" for x in xs] + ["rel. sites not a seed's"]
                                                    if multisite else [])
        lines += [f"### {corpus}: discovery ({n} repetitions, {pages} pages; mean ± sd)", "",
                  "| method | pages retrieved | " + " | ".join(head) + " | HTTP requests | wall (s) | stopped early |",
                  "|---|" + "---:|" * (len(head) + 4)]
        for m in [m for m in (*METHODS, "dwdbrm-disco") if m in by_method]:
            rs = by_method[m]
            early = sum(1 for r in rs if r["curve"] and r["curve"][-1][0] < pages)
            cells = [ms([at(r["curve"], x, 1) for r in rs]) for x in xs]
            if multisite:
                cells += [ms([at(r["curve"], x, 2) for r in rs]) for x in xs] + [ms([len(new_sites(r)) for r in rs])]
            lines.append(f"| {LABELS[m]} | {ms([r['curve'][-1][0] if r['curve'] else 0 for r in rs], 0)} | "
                         + " | ".join(cells) + f" | {ms([r['requests'] for r in rs], 0)} | "
                         f"{ms([r['wall_s'] for r in rs], 0)} | {early}/{len(rs)} |")
        lines += ["", f"The web{'s' if len(totals) > 1 else ''} hold{'' if len(totals) > 1 else 's'} "
                  f"{ms([t[0] for t in totals], 0)} relevant pages on {ms([t[1] for t in totals], 0)} sites; "
                  "a run that stopped before a column's page count keeps its final count there.", ""]
        for m in [m for m in ("dwdbrm", "dwdbrm-disco") if m in by_method]:
            rs = by_method[m]
            ops = ["KS", "RS", "FC", "BC"]
            lines += [f"{LABELS[m]}: arm pulls " + ", ".join(
                f"{op} {ms([r['operators'][op]['pulls'] for r in rs])}" for op in ops)
                + "; mean reward " + ", ".join(
                f"{op} {ms([r['operators'][op]['reward_mean'] for r in rs], 4)}" for op in ops)
                + "; new pages per arm " + ", ".join(
                f"{op} {ms([r['operators'][op]['new_pages'] for r in rs], 0)}" for op in ops)
                + "; finished: " + "; ".join(sorted({r['finished'] for r in rs})) + ".", ""]
        if "dwdbrm" in by_method:
            rs = by_method["dwdbrm"]
            lines += [f"### {corpus}: ranking quality of the dwdbrm results ({len(rs)} runs; mean ± sd)", "",
                      f"Ranked results per run: {ms([len(r['curve']) for r in rs], 0)}; share truly relevant "
                      f"(the base rate a random order would reach): {ms([r['ranked_base_rate'] for r in rs], 3)}; "
                      "best possible Mean/Median Rank = (relevant + 1) / 2 = "
                      f"{ms([(r['curve'][-1][1] + 1) / 2 for r in rs])}, "
                      f"random order ≈ (ranked + 1) / 2 = {ms([(len(r['curve']) + 1) / 2 for r in rs])}.", "",
                      "| ranker | " + " | ".join(f"P@{p}" for p in P_AT) + " | Mean Rank | Median Rank |",
                      "|---|" + "---:|" * (len(P_AT) + 2)]
            ablation = {f"CombinedF, α = {a} (recomputed)": [
                combined_quality(r, args.out / corpus / f"dwdbrm-{r['rep']}", a) for r in rs] for a in (0.2, 0.0)}
            for rk in (*RANKERS, *ablation):
                vals = ablation.get(rk) or [r["ranking"][rk] for r in rs if rk in r["ranking"]]
                if vals:
                    name = "CombinedF (α = 0.2, the spider's)" if rk == "combined" else rk
                    ranks = f" | {ms([v['mean_rank'] for v in vals])} | {ms([v['median_rank'] for v in vals])} |"
                    p_at = " | ".join(ms([v[f"p_at_{p}"] for v in vals], 3) for p in P_AT)
                    lines.append(f"| {name} | {p_at}{ranks}")
            lines.append("")
        plot(corpus, by_method, pages, args.img)
    text = "\n".join(lines)
    (args.out / "results.md").write_text(text + "\n", encoding="utf-8")
    print(text)


def plot(corpus: str, by_method: dict, pages: int, img: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = [(1, "relevant pages")] + ([(2, "relevant websites (hosts)")] if corpus == "realestate" else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4), dpi=110, squeeze=False)
    for ax, (idx, title) in zip(axes[0], panels):
        for i, m in enumerate(m for m in (*METHODS, "dwdbrm-disco") if m in by_method):
            rs, color = by_method[m], f"C{i}"
            x = np.arange(1, min(len(r["curve"]) for r in rs) + 1)  # as far as every run got
            ys = np.array([[r["curve"][j - 1][idx] for j in x] for r in rs], dtype=float)
            mean, sd = ys.mean(0), ys.std(0, ddof=1) if len(ys) > 1 else np.zeros(len(x))
            ax.plot(x, mean, "--" if m == "dwdbrm-disco" else "-", color=color, label=LABELS[m],
                    lw=2 if m.startswith("dwdbrm") else 1.3)
            ax.fill_between(x, mean - sd, mean + sd, color=color, alpha=0.15)
            ends = [r["curve"][-1] for r in rs if r["curve"]]
            ax.scatter([e[0] for e in ends], [e[idx] for e in ends], color=color, s=12)
        ax.set_xlabel("pages retrieved")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    name = {"realestate": "generated zh-realestate web, topic fangchan (synthetic)",
            "wikispeedia": "Wikispeedia, topic weather-en"}[corpus]
    fig.suptitle(f"{name}: mean ± sd over {max(len(v) for v in by_method.values())} runs\n"
                 "(line: while every run lasts; dots: each run's end)", fontsize=9)
    fig.tight_layout()
    img.mkdir(parents=True, exist_ok=True)
    fig.savefig(img / f"dwdbrm-{corpus}.png")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=sorted(CORPORA))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=REPO / "out" / "bench-dwdbrm")
    ap.add_argument("--img", type=Path, help="folder of the plots (default OUT/img; docs/img holds the committed ones)")
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"),
                    help="folder of the third-party corpora (wikispeedia/; default: $TOPICCRAWL_DATA_DIR)")
    ap.add_argument("--report", action="store_true", help="only write the tables and plots from OUT/runs.jsonl")
    args = ap.parse_args()
    # the crawls run in the repository: folders given from elsewhere are made absolute first
    args.out = args.out.resolve()
    args.img = (args.img or args.out / "img").resolve()
    for name, folder in (("--out", args.out), ("--img", args.img)):
        if folder.exists() and not folder.is_dir():
            ap.error(f"{name} {folder} is a file, not a folder")
    if args.report:
        if not (args.out / "runs.jsonl").is_file():
            ap.error(f"--report: {args.out / 'runs.jsonl'} does not exist (run the crawls with this --out first)")
        report(args)
        return
    if not args.corpus:
        ap.error("--corpus is required unless --report")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in (*METHODS, "dwdbrm-disco")]
    if unknown or not methods:
        ap.error(f"--methods: unknown {', '.join(unknown) or '(none given)'}; "
                 f"expected some of {', '.join((*METHODS, 'dwdbrm-disco'))}")
    args.methods = ",".join(dict.fromkeys(methods))
    if args.reps < 1 or args.pages < 1:
        ap.error("--reps and --pages must be at least 1")
    try:
        crawl(args)
    except KeyboardInterrupt:
        print(f"interrupted: the finished runs are kept in {args.out / 'runs.jsonl'} "
              f"(python -m bench.dwdbrm --report --out {args.out} writes their tables)", file=sys.stderr)
        raise SystemExit(130) from None
    report(args)


if __name__ == "__main__":
    main()
