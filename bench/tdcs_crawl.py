"""TD-CS vs TD-CTKW vs TD-KW as crawl scorers on Wikispeedia (the paper's Figs. 4-5).

    python -m bench.tdcs_crawl --data-dir DIR --out bench/results/tdcs_crawl \
        --nodes Science.Biology.Birds,Music.Musical_genres_styles_eras_and_events \
        --scorers tdcs,tdctkw,tdkw --pages 1000 --repeats 5

One web lab serves every run (``TOPICCRAWL_WEB_PROXY``); each run is a real ``scrapy crawl focused``
(bestfirst, ``DEPTH_LIMIT=3``). Repetition r uses the tree split ``wikispeedia:DIR?seed=r`` and 3
seed articles drawn with ``random.Random(f"{node}/{r}")`` from the articles with no label in the
node's top-level category (so no seed is on or next to the topic). Only ``tree.heldout`` URLs count:

* ``relevant(n)``: distinct held-out pages labelled with the node among the first n fetched;
* ``info(n)``: the information sum, Σ over held-out pages among the first n of w(p), with w = 1 for a
  page of the node and w = 0.5 for a page of the node's parent category only (a sibling topic:
  related, partly useful content), 0 otherwise. It is scorer-independent, so it compares scorers
  whose relevance scales differ (a TD-CS posterior vs a VSM cosine);
* ``self(n)``: Σ of the run's own page relevance over all n pages (the crawler's self-assessed
  information; not comparable across scorers, reported for reference).

Runs go repetition by repetition and each finished run is appended to ``runs.jsonl`` (``--resume``
skips runs already there), so a run cut short still leaves whole repetitions. Writes ``results.md``
and ``tdcs-<leaf name>.png`` (mean curves, copied to docs/img) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from topiccrawl.scoring.metrics import mean_sd
from topiccrawl.scoring.tdcs import load_tree
from topiccrawl.weblab.api import WebLab
from topiccrawl.weblab.corpus import open_corpus

REPO = Path(__file__).resolve().parent.parent

CHECKPOINTS = (100, 250, 500, 1000, 1500)
ROOT = "subject"


def draw_seeds(corpus, node_id: str, rep: int, n: int = 3) -> list[str]:
    """n articles with no label in the node's top-level category, drawn with a seeded RNG."""
    top = ".".join(node_id.split(".")[:2])
    pool = sorted(u for u in corpus.iter_urls()
                  if not any(l == top or l.startswith(top + ".") for l in corpus.labels(u)))
    return random.Random(f"{node_id}/{rep}").sample(pool, n)


def reach(corpus, seeds: list[str], depth: int = 3) -> set[str]:
    """URLs within ``depth`` links of the seeds (all a DEPTH_LIMIT crawl can fetch), from the
    Wikispeedia link table (``corpus.out``: article name -> linked names)."""
    prefix = "http://en.wikispeedia.test/wiki/"
    seen = {u[len(prefix):] for u in seeds}
    layer = list(seen)
    for _ in range(depth):
        layer = [v for u in layer for v in corpus.out.get(u, ()) if v not in seen and not seen.add(v)]
    return {prefix + n for n in seen}


def curves(feed: Path, heldout: dict, node_id: str) -> dict[str, list[float]]:
    """relevant(n), info(n) and self(n) for n = 1..pages fetched, from the feed's order."""
    parent = node_id.rsplit(".", 1)[0]
    seen, rel, info, own = set(), [], [], []
    r = i = s = 0.0
    for line in feed.open(encoding="utf-8"):
        page = json.loads(line)
        url = page["url"]
        s += page["relevance"]
        if url not in seen:
            seen.add(url)
            labels = heldout.get(url, frozenset())
            if node_id in labels:
                r, i = r + 1, i + 1.0
            elif parent != ROOT and parent in labels:
                i += 0.5
        rel.append(r)
        info.append(i)
        own.append(s)
    return {"relevant": rel, "info": info, "self": own}


def run_one(data: str, proxy: str, scorer: str, node: str, tree_seed: int, seeds: list[str],
            pages: int, out: Path) -> tuple[float, list[str]]:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "scrapy"), "crawl", "focused",
           "-a", f"scorer={scorer}", "-a", "strategy=bestfirst", "-a", f"max_pages={pages}",
           "-a", f"topic_tree=wikispeedia:{data}?seed={tree_seed}", "-a", f"topic_node={node}",
           "-a", "seeds=" + ",".join(seeds),
           "-s", f"TOPICCRAWL_WEB=wikispeedia:{data}", "-s", f"TOPICCRAWL_WEB_PROXY={proxy}",
           "-s", "DEPTH_LIMIT=3", "-s", f"TOPICCRAWL_OUTPUT_DIR={out}",
           "-s", "TOPICCRAWL_PLOT_ENABLED=false", "-s", "TOPICCRAWL_PROGRESS_INTERVAL=0",
           "-s", "LOG_LEVEL=WARNING", "-O", str(out / "pages.jsonl")]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{scorer} {node} failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - t0, cmd


def value(curve: list[float], n: int) -> float | None:
    return curve[n - 1] if len(curve) >= n else None


def fmt(values) -> str:
    return mean_sd(values, 1)


def report(runs: list[dict], nodes: list[str], scorers: list[str], pages: int, out: Path, data: str) -> str:
    checkpoints = [c for c in CHECKPOINTS if c <= pages]
    web = f"wikispeedia:{data}"
    corpus = open_corpus(web)
    lines = ["Ceiling: held-out pages of the node within depth 3 of the repetition's seeds "
             "(pages within depth 3 in brackets).", "", "| node | " + " | ".join(
                 f"rep {r}" for r in sorted({r['rep'] for r in runs})) + " |",
             "|---|" + "---:|" * len({r['rep'] for r in runs})]
    for node in nodes:
        cells = []
        for rep in sorted({r["rep"] for r in runs}):
            run = next(r for r in runs if r["node"] == node and r["rep"] == rep)
            tree = load_tree(f"{web}?seed={rep}")
            near = reach(corpus, run["seeds"])
            cells.append(f"{sum(tree[node].id in tree.heldout.get(u, ()) for u in near)} ({len(near)})")
        lines.append(f"| {node} | " + " | ".join(cells) + " |")
    lines.append("")
    for node in nodes:
        mine = [r for r in runs if r["node"] == node]
        if not mine:
            continue
        lines += [f"#### {node} ({len({r['rep'] for r in mine})} repetitions; held-out pages of the node: "
                  + ", ".join(str(t) for t in sorted({r['heldout_node'] for r in mine})) + ")", ""]
        for metric, title in (("relevant", "relevant held-out pages found"), ("info", "information sum"),
                              ("self", "Σ own relevance (self-assessed, not comparable)")):
            lines += [f"{title}, mean ± sd:", "",
                      "| scorer | " + " | ".join(f"@{c}" for c in checkpoints) + " |",
                      "|---|" + "---:|" * len(checkpoints)]
            for s in scorers:
                rs = [r for r in mine if r["scorer"] == s]
                cells = " | ".join(fmt([value(r[metric], c) for r in rs]) for c in checkpoints)
                lines.append(f"| {s} | {cells} |")
            lines.append("")
        plot(mine, scorers, node, out / f"tdcs-{node.split('.')[-1].lower().replace('_', '-')}.png")
    return "\n".join(lines)


def plot(runs: list[dict], scorers: list[str], node: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for ax, metric, title in zip(axes, ("relevant", "info"), ("relevant held-out pages", "information sum")):
        for s in scorers:
            rs = [r[metric] for r in runs if r["scorer"] == s]
            if not rs:
                continue
            n = min(len(c) for c in rs)
            m = np.array([c[:n] for c in rs])
            x = np.arange(1, n + 1)
            ax.plot(x, m.mean(axis=0), label=f"{s} (n={len(rs)})")
            ax.fill_between(x, m.mean(axis=0) - m.std(axis=0, ddof=1) if len(rs) > 1 else m[0],
                            m.mean(axis=0) + m.std(axis=0, ddof=1) if len(rs) > 1 else m[0], alpha=0.15)
        ax.set_title(title)
        ax.set_xlabel("pages fetched")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(node)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="the Wikispeedia directory (default: DATA_DIR/wikispeedia)")
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"),
                    help="folder of the third-party corpora (default: $TOPICCRAWL_DATA_DIR)")
    ap.add_argument("--nodes", default="Science.Biology.Birds,Music.Musical_genres_styles_eras_and_events")
    ap.add_argument("--scorers", default="tdcs,tdctkw,tdkw")
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--resume", action="store_true", help="keep the runs already in OUT/runs.jsonl")
    ap.add_argument("--report-only", action="store_true", help="only rebuild results.md and the plots")
    args = ap.parse_args()
    if args.data is None:
        if not args.data_dir:
            ap.error("give --data, or --data-dir or TOPICCRAWL_DATA_DIR (the folder holding wikispeedia/)")
        args.data = str(Path(args.data_dir) / "wikispeedia")
    nodes, scorers = args.nodes.split(","), args.scorers.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "runs.jsonl"
    keep = (args.resume or args.report_only) and log.exists()
    runs = [json.loads(l) for l in log.open(encoding="utf-8")] if keep else []
    if not args.resume and not args.report_only:
        log.write_text("", encoding="utf-8")
    done = {(r["node"], r["scorer"], r["rep"]) for r in runs}
    if not args.report_only:
        web = f"wikispeedia:{args.data}"
        corpus = open_corpus(web)
        with WebLab(web) as lab:
            for rep in range(args.repeats):
                tree = load_tree(f"{web}?seed={rep}")
                for node in nodes:
                    node_id = tree[node].id
                    seeds = draw_seeds(corpus, node_id, rep)
                    for s in scorers:
                        if (node, s, rep) in done:
                            continue
                        run_dir = args.out / f"{node.split('.')[-1]}-{s}-{rep}"
                        wall, cmd = run_one(args.data, lab.proxy_url, s, node, rep, seeds, args.pages, run_dir)
                        res = {"node": node, "scorer": s, "rep": rep, "seeds": seeds, "wall_s": wall,
                               "heldout_node": sum(node_id in l for l in tree.heldout.values()),
                               "cmd": " ".join(cmd), **curves(run_dir / "pages.jsonl", tree.heldout, node_id)}
                        runs.append(res)
                        with log.open("a", encoding="utf-8") as f:
                            f.write(json.dumps(res) + "\n")
                        print(f"rep {rep} {node} {s}: {len(res['relevant'])} pages, "
                              f"{res['relevant'][-1]:.0f} relevant, info {res['info'][-1]:.1f}, {wall:.0f} s",
                              file=sys.stderr, flush=True)
    text = report(runs, nodes, scorers, args.pages, args.out, args.data)
    (args.out / "results.md").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
