"""Pages/s of strategies against a plain Scrapy spider, measured in adjacent pairs.

    TOPICCRAWL_DATA_DIR=... python -m bench.throughput_paired [--strategies learned,bestfirst]
        [--strategies learned,learned:TOPICCRAWL_LEARNED_ASSOCIATION=off]   # NAME:SETTING=VALUE[+SETTING=VALUE...]: settings
        [--topics 'bench/topics/wikispeedia/*.toml'] [--pages 1000] [--rounds 1] [--out OUT.json]

On one Wikispeedia lab, for each topic: a plain Scrapy BFS spider crawl (bench/plain_spider.py,
Scrapy's defaults) and one ``scrapy crawl focused`` per strategy, one crawl at a time, the plain
crawl first on even topics and last on odd ones. A machine whose speed drifts (other load,
thermal limits) then moves both sides of a pair alike, which a plain spider run once before or
after all the crawls cannot give. Pages/s is DP / Scrapy's elapsed time for both (as
``bench.learned_focus``). Prints every pair and, per strategy, the median ratio with its range,
the mean ratio and the ratio of the mean pages/s; then the CPU time each crawl process spent from
spider open to close per 1,000 pages (``topiccrawl/cpu_seconds``; the plain spider measures it the
same way) and plain ÷ strategy of it: the pages/s ratio a crawl limited by its own CPU would see,
which does not depend on how fast the web answers (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
from pathlib import Path
from statistics import mean, median

from bench.strategies import CrawlFailed, check_strategies, run_plain_stats, run_strategy, writable_folder
from topiccrawl.scoring.topic import TopicError, load_topic


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strategies", default="learned,bestfirst")
    ap.add_argument("--topics", default="bench/topics/wikispeedia/*.toml")
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1, help="times every topic is measured")
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"))
    ap.add_argument("--out", type=Path, help="also write every pair here (JSON)")
    args = ap.parse_args(argv)
    if not args.data_dir or not (Path(args.data_dir) / "wikispeedia").is_dir():
        raise SystemExit("needs the Wikispeedia folder: --data-dir DIR or TOPICCRAWL_DATA_DIR (docs/real-corpora.md)")
    # absolute: the crawls run in the repository, not in the directory the pattern was given from
    try:
        topics = [(str(Path(path).resolve()), load_topic(path)) for path in sorted(glob.glob(args.topics))]
    except TopicError as err:
        raise SystemExit(str(err)) from None
    if not topics:
        raise SystemExit(f"--topics {args.topics!r}: no topic file")
    strategies = [s for s in args.strategies.split(",") if s]
    check_strategies([s.partition(":")[0] for s in strategies])  # NAME:SETTING=VALUE names strategy NAME
    if args.out:  # checked now: it was written after every crawl, and a missing folder lost them all
        writable_folder(args.out.parent, "--out's folder")
    spec = f"wikispeedia:{args.data_dir}/wikispeedia"
    from topiccrawl.weblab.api import WebLab

    pairs = []
    with WebLab(spec) as lab, tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for i, (path, topic) in enumerate(topics):
                seeds = list(topic.seeds) or lab.info.get("seeds", [])[:5]
                plain_first = (i + rnd) % 2 == 0
                plain = run_plain_stats(lab.proxy_url, seeds, args.pages) if plain_first else None
                measured, cpu = {}, {}
                for s in strategies:
                    name, _, setting = s.partition(":")
                    try:
                        run = run_strategy(spec, lab.proxy_url, path, name, args.pages,
                                           Path(tmp) / f"{rnd}-{i}-{len(cpu)}", settings=[x for x in setting.split("+") if x])
                    except CrawlFailed as err:  # a pair needs every crawl: the crawl's own lines, then stop
                        raise SystemExit(f"{topic.name} {s}: {err}") from None
                    measured[s] = run["pages_per_s"]
                    cpu[s] = 1000 * run["cpu_seconds"] / run["dp"]
                if not plain_first:
                    plain = run_plain_stats(lab.proxy_url, seeds, args.pages)
                cpu["plain"] = 1000 * plain["cpu_seconds"] / plain["pages"]
                pair = {"round": rnd, "topic": topic.name, "plain": plain["pages_per_s"], **measured,
                        "cpu_s_per_1000": cpu}
                pairs.append(pair)
                print(f"{topic.name}: plain {pair['plain']:.0f} pages/s ({cpu['plain']:.1f} CPU s per 1,000), " + ", ".join(
                    f"{s} {v:.0f} ({v / pair['plain']:.2f}×; {cpu[s]:.1f} CPU s)" for s, v in measured.items()),
                    file=sys.stderr, flush=True)
    print("| strategy | pairs | median ratio (range) | mean ratio | ratio of means | pages/s (plain) |")
    print("|---|---|---|---|---|---|")
    plain_mean = mean(p["plain"] for p in pairs)
    for s in strategies:
        ratios = [p[s] / p["plain"] for p in pairs]
        print(f"| {s} | {len(pairs)} | {median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) | "
              f"{mean(ratios):.2f} | {mean(p[s] for p in pairs) / plain_mean:.2f} | "
              f"{mean(p[s] for p in pairs):.0f} ({plain_mean:.0f}) |")
    print()
    print("| strategy | pairs | CPU s per 1,000 pages: strategy (plain) | plain ÷ strategy: median (range) |")
    print("|---|---|---|---|")
    for s in strategies:
        ratios = [p["cpu_s_per_1000"]["plain"] / p["cpu_s_per_1000"][s] for p in pairs]
        print(f"| {s} | {len(pairs)} | {mean(p['cpu_s_per_1000'][s] for p in pairs):.2f} "
              f"({mean(p['cpu_s_per_1000']['plain'] for p in pairs):.2f}) | "
              f"{median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |")
    if args.out:
        args.out.write_text(json.dumps({"pages": args.pages, "pairs": pairs}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
