"""Compare frontier strategies on one corpus and topic, next to a plain Scrapy spider.

    python bench/strategies.py --web "generated:zh-disaster?pages=20000&seed=1" --topic 台风灾害 \
        --strategies bfs,bestfirst,oracle --pages 1000 --repeats 1 --out bench/results/typhoon

One web-lab server is started and shared by every run (``TOPICCRAWL_WEB_PROXY``), each strategy
runs as a real ``scrapy crawl focused`` process, and a plain Scrapy BFS spider (no scoring, no
custom scheduler) crawls the same web in the same session for the throughput reference. Writes
``results.md`` (markdown table), ``results.json`` and ``harvest.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from topiccrawl.scoring.metrics import mean_sd  # noqa: E402
from topiccrawl.settings import CONCURRENT_ITEMS  # noqa: E402
from topiccrawl.weblab.api import WebLab  # noqa: E402

CHECKPOINTS = (100, 250, 500, 1000)


def scrapy_bin() -> str:
    return str(Path(sys.executable).parent / "scrapy")


def run_strategy(web: str, proxy: str, topic: str, strategy: str, pages: int, out: Path,
                 spider: str = "focused") -> dict:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        scrapy_bin(), "crawl", spider, "-a", f"topic={topic}", "-a", f"strategy={strategy}",
        "-a", f"max_pages={pages}", "-s", f"TOPICCRAWL_WEB={web}", "-s", f"TOPICCRAWL_WEB_PROXY={proxy}",
        "-s", f"TOPICCRAWL_OUTPUT_DIR={out}", "-s", "TOPICCRAWL_PLOT_ENABLED=false",
        "-s", "TOPICCRAWL_PROGRESS_INTERVAL=0", "-s", "LOG_LEVEL=WARNING",
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{strategy} failed:\n{proc.stderr[-3000:]}")
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    rows = list(csv.DictReader((out / "harvest.csv").open(encoding="utf-8")))
    total = stats.get("topiccrawl/truth/total_relevant") or 0
    curve = [(int(r["dp"]), float(r["truth_harvest_rate"]), float(r["target_recall"] or 0)) for r in rows]
    crawl_seconds = float(stats.get("elapsed_time_seconds") or wall)
    return {
        "strategy": strategy,
        "dp": stats["topiccrawl/dp"],
        "accuracy": stats["topiccrawl/accuracy"],
        "total_relevant": total,
        "curve": curve,
        "pages_per_s": stats["topiccrawl/dp"] / crawl_seconds,
        "wall_s": wall,
    }


def run_plain(proxy: str, seeds: list[str], pages: int, settings: tuple[str, ...] = ()) -> float:
    """Pages/s of a plain Scrapy BFS spider over the same web (bench/plain_spider.py)."""
    cmd = [sys.executable, str(REPO / "bench" / "plain_spider.py"), "--proxy", proxy, "--pages", str(pages),
           "--seeds", ",".join(seeds), *(x for s in settings for x in ("-s", s))]
    proc = subprocess.run(cmd, cwd=REPO / "bench", capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"plain spider failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["pages_per_s"]


def at(curve, dp: int, idx: int):
    for row in curve:
        if row[0] == dp:
            return row[idx]
    return None


def fmt(values) -> str:
    return mean_sd(values, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--web", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--strategies", default="bfs,bestfirst,oracle")
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--spider", default="focused", help="focused, or wl (the WL paper's settings: threshold 0.2)")
    args = ap.parse_args()
    strategies = args.strategies.split(",")
    results: dict[str, list[dict]] = {s: [] for s in strategies}
    with WebLab(args.web) as lab:
        for rep in range(args.repeats):
            for s in strategies:
                res = run_strategy(args.web, lab.proxy_url, args.topic, s, args.pages, args.out / f"{s}-{rep}", args.spider)
                results[s].append(res)
                print(f"{s} rep {rep}: {res['dp']} pages, {res['pages_per_s']:.0f} pages/s", file=sys.stderr)
        seeds = lab.info.get("seeds", [])[:5] or []
        plain = run_plain(lab.proxy_url, seeds, args.pages)
        # the project sets CONCURRENT_ITEMS = 8 (topiccrawl/settings.py); the same for the plain spider
        plain_ci = run_plain(lab.proxy_url, seeds, args.pages, (f"CONCURRENT_ITEMS={CONCURRENT_ITEMS}",))
        info = lab.info

    checkpoints = [c for c in CHECKPOINTS if c <= args.pages]
    lines = [
        f"Corpus `{args.web}` ({info.get('pages')} pages), topic `{args.topic}`, "
        f"{args.repeats} run(s) per strategy, {args.pages} pages each, spider `{args.spider}`.",
        "",
        "| strategy | " + " | ".join(f"harvest@{c}" for c in checkpoints) + " | "
        + " | ".join(f"recall@{c}" for c in checkpoints) + " | Accuracy (self-assessed) | pages/s | × plain Scrapy |",
        "|---|" + "---|" * (2 * len(checkpoints) + 3),
    ]
    for s in strategies:
        runs = results[s]
        pps = statistics.mean(r["pages_per_s"] for r in runs)
        lines.append(
            f"| {s} | " + " | ".join(fmt([at(r["curve"], c, 1) for r in runs]) for c in checkpoints) + " | "
            + " | ".join(fmt([at(r["curve"], c, 2) for r in runs]) for c in checkpoints)
            + f" | {fmt([r['accuracy'] for r in runs])} | {pps:.0f} | {pps / plain:.2f} |"
        )
    lines += ["", f"Plain Scrapy BFS spider on the same web, same session: {plain:.0f} pages/s with Scrapy's "
              f"defaults (the × column), {plain_ci:.0f} pages/s with the project's CONCURRENT_ITEMS={CONCURRENT_ITEMS}."]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.out / "results.json").write_text(json.dumps({"plain_pages_per_s": plain, "plain_ci_pages_per_s": plain_ci, "results": results}), encoding="utf-8")
    plot(results, args.out / "harvest.png", args.topic)
    print("\n".join(lines))


def plot(results: dict, path: Path, topic: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for s, runs in results.items():
        curve = runs[0]["curve"]
        ax1.plot([r[0] for r in curve], [r[1] for r in curve], label=s)
        ax2.plot([r[0] for r in curve], [r[2] for r in curve], label=s)
    ax1.set_title("true harvest rate")
    ax2.set_title("target recall")
    for ax in (ax1, ax2):
        ax.set_xlabel("pages fetched")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
