"""What flushing the feed after each item costs: crawls with ``-O pages.jsonl`` and
``TOPICCRAWL_FEED_FLUSH_ENABLED`` on and off, alternating, on one generated web (synthetic).

    python -m bench.feed_flush [--runs 5] [--pages 1000] [--web 'generated:zh-disaster?pages=5000&seed=5']

Prints pages/s (DP / Scrapy's elapsed time) and the crawl process's CPU seconds from spider open to
close (``topiccrawl/cpu_seconds``) of every crawl, and the medians of each side
(docs/benchmarks.md, "Feed lines flushed as they are written").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median


def crawl(out: Path, web: str, pages: int, flush: bool) -> tuple[float, float, int]:
    cmd = [str(Path(sys.executable).parent / "scrapy"), "crawl", "focused", "-a", "topic=台风灾害",
           "-a", f"max_pages={pages}", "-a", "strategy=bestfirst", "-s", f"TOPICCRAWL_WEB={web}",
           "-s", f"TOPICCRAWL_OUTPUT_DIR={out}", "-s", "TOPICCRAWL_PLOT_ENABLED=false",
           "-s", f"TOPICCRAWL_FEED_FLUSH_ENABLED={str(flush).lower()}", "-s", "LOG_LEVEL=WARNING",
           "-O", str(out / "pages.jsonl")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    lines = len((out / "pages.jsonl").read_text(encoding="utf-8").splitlines())
    return stats["topiccrawl/dp"] / stats["elapsed_time_seconds"], stats["topiccrawl/cpu_seconds"], lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--web", default="generated:zh-disaster?pages=5000&seed=5")
    args = ap.parse_args(argv)
    results: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for flush in ((True, False) if i % 2 == 0 else (False, True)):
                r = crawl(Path(tmp) / f"{flush}-{i}", args.web, args.pages, flush)
                results[flush].append(r)
                print(f"run {i} flush={flush}: {r[0]:.1f} pages/s, {r[1]:.3f} CPU s, {r[2]} feed lines", flush=True)
    for flush, rows in results.items():
        print(f"flush={flush}: median {median(r[0] for r in rows):.1f} pages/s "
              f"({min(r[0] for r in rows):.1f}-{max(r[0] for r in rows):.1f}), "
              f"median {median(r[1] for r in rows):.3f} CPU s ({min(r[1] for r in rows):.3f}-{max(r[1] for r in rows):.3f})")


if __name__ == "__main__":
    main()
