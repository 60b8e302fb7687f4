"""The WL paper's comparison tables (Table 1 and Table 2 shape) measured on ground truth.

    python -m bench.wl_tables run --corpora rain,typhoon,wiki,lo --reps 5
    python -m bench.wl_tables report            # tables (markdown), Friedman ranks, docs/img/wl-*.png

Every run is a real ``scrapy crawl wl -a strategy=S`` process (the WL spider's settings: ∂ 0.3,
link threshold 0.2) through one shared web lab per corpus instance (``TOPICCRAWL_WEB_PROXY``).
Repetitions: the generated web's corpus seed is rep+1; on the fixed real corpora the strategies'
RNG seeds (``TOPICCRAWL_WL_SEED``, ``TOPICCRAWL_SA_SEED``) are rep+1, so bfs, bestfirst and oracle
repeat (nearly: 16 concurrent responses arrive in varying order) identically there. The crawl time
at each DP checkpoint is taken by :class:`CheckpointClock`, an item pipeline this script adds to
the crawl (seconds from ``spider_opened`` until the checkpoint's page was counted).
``--lo-workaround`` runs the LibreOffice corpus with a bench-only patch of lxml's ``drop_tree``
(``topiccrawl.scoring.text.extract`` raised AssertionError on every help page before the fix; docs/benchmarks.md).
The report also gives target recall over *distinct* pages (the stats count duplicate URLs).
Raw outputs (``stats.json``, ``harvest.csv`` per run) go to ``--out`` (default ``out/wl-tables``);
``run`` skips runs whose ``stats.json`` exists, so an interrupted session continues. After the
strategies of one corpus instance, a plain Scrapy BFS spider (bench/plain_spider.py) crawls the same
lab with the same page budget (``plain/*.json``): the report's throughput table sets each
strategy's pages/s (DP / Scrapy's elapsed time) next to it.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from topiccrawl.scoring.metrics import mean_sd

REPO = Path(__file__).resolve().parent.parent
STRATEGIES = ("wl", "bfs", "bestfirst", "sa", "fcsa-host", "oracle")
#: WL with non-default options (docs/wl.md), run as extra "strategies": name -> (strategy, settings)
VARIANTS = {
    "wl-nonempty": ("wl", {"TOPICCRAWL_WL_VISITED": "nonempty"}),  # only bins with queued links count
    "wl-flat": ("wl", {"TOPICCRAWL_WL_STAGE_RULE": "flat", "TOPICCRAWL_WL_LNF_FLOOR": "0.0625"}),
}
LO_SCRIPT = REPO / "scripts" / "fetch-libreoffice-help.sh"

#: name -> (title, corpus spec (``{seed}``/``{lo}``/``{data}`` filled in), topic, checkpoints, seeds vary the corpus)
CORPORA = {
    "rain": ("generated 暴雨灾害 (synthetic)", "generated:zh-disaster?pages=20000&seed={seed}", "暴雨灾害",
             (500, 1000, 2500, 5000), True),
    "typhoon": ("generated 台风灾害 (synthetic)", "generated:zh-disaster?pages=20000&seed={seed}", "台风灾害",
                (500, 1000, 2500, 5000), True),
    "rain-large": ("generated 暴雨灾害, 100,000 pages (synthetic)", "generated:zh-disaster?pages=100000&seed={seed}",
                   "暴雨灾害", (1000, 5000, 10000, 15000), True),
    "typhoon-large": ("generated 台风灾害, 100,000 pages (synthetic)", "generated:zh-disaster?pages=100000&seed={seed}",
                      "台风灾害", (1000, 5000, 10000, 15000), True),
    "wiki": ("Wikispeedia weather-en", "wikispeedia:{data}/wikispeedia", "weather-en",
             (250, 500, 1000, 2000), False),
    "lo": ("LibreOffice help zh-CN, Calc (scalc-zh)", "htmltree:{lo}?opaque=1&labeldepth=1",
           str(REPO / "bench" / "topics" / "scalc-zh.toml"), (100, 250, 500, 1000), False),
}
WL_KEYS = ("lnf", "stage", "accepted", "rejected", "forced", "steps", "visited_bins", "dropped")
TABLE_KEYS = ("accuracy", "lp", "ardp", "sddp", "arlp", "sdlp", "seconds",
              "truth/harvest_rate", "truth/target_recall", "recall_distinct")
PLOT_TITLES = {"rain-large": "generated web, 100,000 pages (synthetic), topic rainstorm disasters",
               "typhoon-large": "generated web, 100,000 pages (synthetic), topic typhoon disasters",
               "rain": "generated web (synthetic), topic rainstorm disasters", "typhoon":
               "generated web (synthetic), topic typhoon disasters", "wiki": "Wikispeedia, topic weather-en",
               "lo": "LibreOffice help zh-CN, topic scalc-zh (Calc pages)"}


class CheckpointClock:
    """Item pipeline run after the project's: ``bench/seconds_at/<dp>`` = seconds from
    spider_opened until the page that brought DP to a checkpoint was counted."""

    def __init__(self, crawler):
        from scrapy import signals

        from topiccrawl.crawl.runtime import TopicCrawl

        self.crawler, self.tc, self.t0 = crawler, TopicCrawl.for_crawler(crawler), time.monotonic()
        self.at = set(self.tc.config.checkpoints)
        crawler.signals.connect(self.opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def opened(self, spider):
        self.t0 = time.monotonic()
        self.crawler.stats.set_value("bench/code_sha1", code_sha1())

    def process_item(self, item):
        if self.tc.metrics.dp in self.at:
            self.crawler.stats.set_value(f"bench/seconds_at/{self.tc.metrics.dp}", round(time.monotonic() - self.t0, 3))
        return item


def code_sha1() -> str:
    """SHA-1 over the project's Python sources (other work may edit them while benchmarks run)."""
    digest = hashlib.sha1()
    for path in sorted((REPO / "topiccrawl").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


if os.environ.get("WL_TABLES_DROP_TREE_WORKAROUND") == "1":
    # bench-only workaround, off by default (--lo-workaround): topiccrawl.scoring.text.extract drops an
    # element matched both as boilerplate tag and by class/id twice, and lxml's drop_tree()
    # asserts on the second call. Dropping an already detached element is made a no-op.
    from lxml.html import HtmlElement

    _drop_tree = HtmlElement.drop_tree

    def _drop_once(self):
        if self.getparent() is not None:
            _drop_tree(self)

    HtmlElement.drop_tree = _drop_once


def lo_dir() -> str:
    proc = subprocess.run(["sh", str(LO_SCRIPT)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{LO_SCRIPT.name} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout.strip().splitlines()[-1]


def crawl(spec: str, proxy: str, topic: str, strategy: str, checkpoints, rng_seed: int, out: Path,
          workaround: bool = False) -> dict:
    from topiccrawl.settings import ITEM_PIPELINES

    out.mkdir(parents=True, exist_ok=True)
    # `scrapy crawl` in the project directory has it on sys.path, so bench.wl_tables imports there
    pipelines = {**ITEM_PIPELINES, "bench.wl_tables.CheckpointClock": 900}
    strategy, extra = VARIANTS.get(strategy, (strategy, {}))
    cmd = [str(Path(sys.executable).parent / "scrapy"), "crawl", "wl", "-a", f"topic={topic}",
           "-a", f"strategy={strategy}", "-a", f"max_pages={max(checkpoints)}",
           *(x for k, v in extra.items() for x in ("-s", f"{k}={v}")),
           "-s", f"TOPICCRAWL_WEB={spec}", "-s", f"TOPICCRAWL_WEB_PROXY={proxy}",
           "-s", f"TOPICCRAWL_CHECKPOINTS={','.join(map(str, checkpoints))}",
           "-s", f"TOPICCRAWL_WL_SEED={rng_seed}", "-s", f"TOPICCRAWL_SA_SEED={rng_seed}",
           "-s", f"TOPICCRAWL_OUTPUT_DIR={out}", "-s", "TOPICCRAWL_PLOT_ENABLED=false",
           "-s", "TOPICCRAWL_PROGRESS_INTERVAL=0", "-s", "LOG_LEVEL=WARNING", "-s", "RETRY_TIMES=0",
           "-s", f"ITEM_PIPELINES={json.dumps(pipelines)}"]
    env = dict(os.environ, WL_TABLES_DROP_TREE_WORKAROUND="1" if workaround else "0")
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    (out / "stderr.txt").write_text(proc.stderr, encoding="utf-8")
    if proc.returncode != 0 or not (out / "stats.json").exists():
        raise RuntimeError(f"{strategy} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    stats["bench/wall_seconds"] = round(wall, 2)
    stats["bench/drop_tree_workaround"] = workaround
    (out / "stats.json").write_text(json.dumps(stats, ensure_ascii=False, indent=2), encoding="utf-8")
    return stats


def run(args) -> None:
    from topiccrawl.weblab.api import WebLab

    strategies = args.strategies.split(",")
    lo = lo_dir() if "lo" in args.corpora else ""
    data = args.data_dir or ""
    if "wiki" in args.corpora and not data:
        raise SystemExit("corpus wiki needs the third-party data folder: --data-dir DIR or TOPICCRAWL_DATA_DIR")
    # one lab per corpus instance: rain and typhoon share the generated web of the same seed
    instances: dict[str, list[tuple[str, int, int]]] = {}
    for name in args.corpora:
        _, spec, _, _, vary_corpus = CORPORA[name]
        for rep in range(args.reps):
            key = spec.format(seed=rep + 1, lo=lo, data=data) if vary_corpus else spec.format(lo=lo, data=data)
            instances.setdefault(key, []).append((name, rep, rep + 1))
    for spec, jobs in instances.items():
        todo = [(n, r, s, st) for n, r, s in jobs for st in strategies
                if not (args.out / n / f"{st}-{r}" / "stats.json").exists()]
        if not todo:
            continue
        with WebLab(spec) as lab:
            for name, rep, seed, strategy in todo:
                _, _, topic, checkpoints, _ = CORPORA[name]
                budget = min(max(checkpoints), args.max_pages or max(checkpoints))
                cps = tuple(c for c in checkpoints if c <= budget)
                out = args.out / name / f"{strategy}-{rep}"
                try:
                    stats = crawl(spec, lab.proxy_url, topic, strategy, cps, seed, out,
                                  args.lo_workaround and name == "lo")
                except RuntimeError as err:
                    print(f"{name} {strategy} rep {rep}: {err}", file=sys.stderr)
                    continue
                print(f"{name} {strategy} rep {rep}: DP {stats.get('topiccrawl/dp')}, "
                      f"true harvest {stats.get('topiccrawl/truth/harvest_rate'):.3f}, "
                      f"{stats['bench/wall_seconds']:.0f} s", file=sys.stderr, flush=True)
            pages = max(min(max(CORPORA[n][3]), args.max_pages or 10**9) for n, *_ in jobs)
            plain_reference(args.out, spec, lab, pages)


def plain_reference(out: Path, spec: str, lab, pages: int) -> None:
    """pages/s of a plain Scrapy BFS spider on the same lab, right after the strategies' runs."""
    from bench.strategies import run_plain

    path = out / "plain" / (hashlib.sha1(spec.encode()).hexdigest()[:10] + ".json")
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    pps = run_plain(lab.proxy_url, lab.info.get("seeds", [])[:5] or [], pages)
    path.write_text(json.dumps({"spec": spec, "pages": pages, "pages_per_s": pps}), encoding="utf-8")
    print(f"plain Scrapy on {spec}: {pps:.0f} pages/s", file=sys.stderr, flush=True)


# -- report ---------------------------------------------------------------------------------------

def page_identity(name: str, rep: int):
    """url -> the page it serves. On the generated web, duplicates (``?from=``, ``/index.html``,
    ``/print/``) and redirect targets carry their page's labels, so the stats count one relevant
    page several times (target recall can exceed 1); this maps them to (host, local index)."""
    from w3lib.url import canonicalize_url

    _, spec, _, _, generated = CORPORA[name]
    if not generated:
        return canonicalize_url
    from topiccrawl.weblab.corpus import open_corpus

    web = open_corpus(spec.format(seed=rep + 1))

    def ident(url: str):
        for _ in range(4):
            r = web._resolve(url)  # the generated web's own URL parser (private, analysis only)
            if r is None or r[2] not in (301, 302):
                return url if r is None else (r[0].name, r[1])
            url = r[3]
        return url

    return ident


def load(out: Path, name: str, strategies) -> dict[str, list[dict]]:
    """Per strategy, the runs' stats plus ``curve`` = [(dp, true harvest, recall (stats),
    recall (distinct pages))] per counted page."""
    runs: dict[str, list[dict]] = {s: [] for s in strategies}
    idents: dict[int, object] = {}
    for s in strategies:
        paths = sorted((p for p in (out / name).glob(f"{s}-*/stats.json") if p.parent.name.rsplit("-", 1)[0] == s),
                       key=lambda p: int(p.parent.name.rsplit("-", 1)[1]))  # "wl-*" also matches wl-flat-0
        for path in paths:
            stats = json.loads(path.read_text(encoding="utf-8"))
            stats["rep"] = rep = int(path.parent.name.rsplit("-", 1)[1])
            ident = idents.setdefault(rep, page_identity(name, rep))
            total = stats.get("topiccrawl/truth/total_relevant") or 1
            seen, prev, curve = set(), 0, []
            for r in csv.DictReader((path.parent / "harvest.csv").open(encoding="utf-8")):
                if int(r["truth_relevant"]) > prev:
                    seen.add(ident(r["url"]))
                prev = int(r["truth_relevant"])
                curve.append((int(r["dp"]), float(r["truth_harvest_rate"]), prev / total, len(seen) / total))
            stats["curve"] = curve
            runs[s].append(stats)
    return runs


def checkpoint(stats: dict, dp: int, key: str):
    if key == "seconds":
        return stats.get(f"bench/seconds_at/{dp}")
    if key == "recall_distinct":
        return stats["curve"][dp - 1][3] if len(stats["curve"]) >= dp else None
    for snap in stats.get("topiccrawl/checkpoints", []):
        if snap["dp"] == dp:
            return snap.get(key)
    return None


def fmt(values, digits: int = 3) -> str:
    return mean_sd(values, digits)


def table(runs: dict[str, list[dict]], checkpoints) -> list[str]:
    head = ["DP", "strategy", "n", "Accuracy (self)", "LP", "ARDP", "SDDP", "ARLP", "SDLP", "time s",
            "true harvest", "recall (stats)", "recall (distinct)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for dp in checkpoints:
        for s, rs in runs.items():
            reached = [r for r in rs if r["topiccrawl/dp"] >= dp]
            if not reached:
                continue
            cells = [fmt([checkpoint(r, dp, k) for r in reached], 0 if k == "lp" else 1 if k == "seconds" else 3)
                     for k in TABLE_KEYS]
            lines.append(f"| {dp} | {s} | {len(reached)} | " + " | ".join(cells) + " |")
    return lines


def end_table(runs: dict[str, list[dict]]) -> list[str]:
    lines = ["| strategy | DP at end | frontier ran dry | true harvest | recall (distinct) | wall s per run |",
             "|---|---|---|---|---|---|"]
    for s, rs in runs.items():
        if rs:
            lines.append(f"| {s} | {fmt([r['topiccrawl/dp'] for r in rs], 0)} | "
                         f"{sum(bool(r.get('topiccrawl/frontier_exhausted')) for r in rs)}/{len(rs)} | "
                         f"{fmt([r['topiccrawl/truth/harvest_rate'] for r in rs])} | "
                         f"{fmt([r['curve'][-1][3] for r in rs])} | {fmt([r['bench/wall_seconds'] for r in rs], 0)} |")
    return lines


def throughput_table(out: Path, name: str, runs: dict[str, list[dict]]) -> list[str]:
    """Each strategy's pages/s (DP / elapsed) next to the plain Scrapy spider on the same labs."""
    _, spec, _, _, generated = CORPORA[name]
    plain = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "plain").glob("*.json"))]
    pattern = re.escape(spec).replace(re.escape("{seed}"), r"\d+")
    pattern = pattern.replace(re.escape("{lo}"), ".*").replace(re.escape("{data}"), ".*")
    plain = [p["pages_per_s"] for p in plain if re.fullmatch(pattern, p["spec"])]
    if not plain:
        return []
    ref = statistics.fmean(plain)
    lines = [f"Throughput (pages/s = DP / Scrapy's elapsed time; plain Scrapy BFS spider on the same labs: "
             f"{fmt(plain, 0)} pages/s over {len(plain)} lab(s)):", "",
             "| strategy | pages/s | × plain Scrapy |", "|---|---|---|"]
    for s, rs in runs.items():
        pps = [r["topiccrawl/dp"] / r["elapsed_time_seconds"] for r in rs if r.get("elapsed_time_seconds")]
        if pps:
            lines.append(f"| {s} | {fmt(pps, 0)} | {statistics.fmean(pps) / ref:.2f} |")
    return lines


def wl_table(runs: list[dict]) -> list[str]:
    def cell(v):
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| rep | " + " | ".join(WL_KEYS) + " |", "|" + "---|" * (len(WL_KEYS) + 1)]
    for r in runs:
        lines.append(f"| {r['rep']} | " + " | ".join(cell(r.get(f"topiccrawl/wl/{k}", "–")) for k in WL_KEYS) + " |")
    return lines


def friedman(blocks: list[dict[str, float]], strategies) -> list[str]:
    """Friedman test over blocks (corpus, topic, rep); mean rank per strategy (1 = best, ties
    share the mean rank)."""
    from scipy.stats import friedmanchisquare, rankdata

    complete = [b for b in blocks if all(b.get(s) is not None for s in strategies)]
    if len(strategies) < 3 or len(complete) < 2:
        return [f"(needs 3+ strategies and 2+ blocks; have {len(strategies)} and {len(complete)})"]
    ranks = [rankdata([-b[s] for s in strategies]) for b in complete]
    mean_rank = {s: statistics.fmean(r[i] for r in ranks) for i, s in enumerate(strategies)}
    chi2, p = friedmanchisquare(*[[b[s] for b in complete] for s in strategies])
    order = sorted(strategies, key=lambda s: mean_rank[s])
    return [f"{len(complete)} blocks; Friedman χ² = {chi2:.2f}, p = {p:.2g}", "",
            "| strategy | " + " | ".join(order) + " |", "|---|" + "---|" * len(order),
            "| mean rank | " + " | ".join(f"{mean_rank[s]:.2f}" for s in order) + " |"]


def plot(title: str, runs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for s, rs in runs.items():
        if not rs:
            continue
        n = min(len(r["curve"]) for r in rs)
        x = [p[0] for p in rs[0]["curve"][:n]]
        for ax, idx in ((ax1, 1), (ax2, 3)):
            ax.plot(x, np.mean([[p[idx] for p in r["curve"][:n]] for r in rs], axis=0), label=s)
    ax1.set_title("true harvest rate (mean over reps)", fontsize=9)
    ax2.set_title("target recall, distinct pages (mean over reps)", fontsize=9)
    for ax in (ax1, ax2):
        ax.set_xlabel("pages fetched (DP)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report(args) -> None:
    strategies = args.strategies.split(",")
    md: list[str] = []
    blocks: dict[str, list[dict]] = {"truth/harvest_rate": [], "recall_distinct": [], "accuracy": []}
    early: list[dict] = []  # true harvest at each corpus's first checkpoint
    for name in args.corpora:
        title, spec, topic, checkpoints, generated = CORPORA[name]
        runs = load(args.out, name, strategies)
        if not any(runs.values()):
            continue
        last = max(r["topiccrawl/dp"] for rs in runs.values() for r in rs)
        cps = [c for c in checkpoints if c <= last]
        totals = sorted({r["topiccrawl/truth/total_relevant"] for rs in runs.values() for r in rs})
        hashes = sorted({r.get("bench/code_sha1") for rs in runs.values() for r in rs})
        md += [f"### {title}", "", f"Runs per strategy: {', '.join(f'{s} {len(rs)}' for s, rs in runs.items())}; "
               f"truly relevant pages in the web: {', '.join(map(str, totals))}; "
               f"code versions: {', '.join(map(str, hashes))}.", ""]
        md += table(runs, cps) + ["", "At the end of the runs:", ""] + end_table(runs)
        md += [""] + throughput_table(args.out, name, runs)
        md += ["", f"![{name}](img/wl-{name}.png)", ""]
        if runs.get("wl"):
            md += ["WL sampler state at the end of each run (`topiccrawl/wl/*`):", ""] + wl_table(runs["wl"]) + [""]
        plot(PLOT_TITLES[name], runs, args.img / f"wl-{name}.png")
        for rep in sorted({r["rep"] for rs in runs.values() for r in rs}):
            row = {s: next((r for r in rs if r["rep"] == rep), None) for s, rs in runs.items()}
            if any(r is None for r in row.values()):
                continue
            dp = max(c for c in cps if all(r["topiccrawl/dp"] >= c for r in row.values()))
            for key, block in blocks.items():
                block.append({s: checkpoint(r, dp, key) for s, r in row.items()})
            early.append({s: checkpoint(r, cps[0], "truth/harvest_rate") for s, r in row.items()})
    for key, label in (("truth/harvest_rate", "true harvest rate"),
                       ("recall_distinct", "target recall (distinct pages)"),
                       ("accuracy", "self-assessed Accuracy (for comparison)")):
        md += ["", f"### Friedman ranks: {label} at the last checkpoint every strategy reached", ""]
        md += friedman(blocks[key], strategies)
    md += ["", "### Friedman ranks: true harvest rate at each corpus's first checkpoint", ""]
    md += friedman(early, strategies)
    text = "\n".join(md) + "\n"
    (args.out / "tables.md").write_text(text, encoding="utf-8")
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("run", "report"))
    ap.add_argument("--corpora", default="rain,typhoon,wiki,lo", type=lambda s: s.split(","))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-pages", type=int, default=0, help="cap the DP budget (0: the corpus's last checkpoint)")
    ap.add_argument("--lo-workaround", action="store_true",
                    help="run the lo corpus with the bench-only drop_tree workaround (module docstring)")
    ap.add_argument("--out", type=Path, default=REPO / "out" / "wl-tables")
    ap.add_argument("--img", type=Path, default=REPO / "docs" / "img")
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"),
                    help="folder of the third-party corpora (wikispeedia/ for wiki; default: $TOPICCRAWL_DATA_DIR)")
    args = ap.parse_args()
    for name in args.corpora:
        if name not in CORPORA:
            raise SystemExit(f"unknown corpus {name!r}: choose from {', '.join(CORPORA)}")
    args.img.mkdir(parents=True, exist_ok=True)
    (run if args.command == "run" else report)(args)


if __name__ == "__main__":
    main()
