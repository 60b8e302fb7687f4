"""Cost of one scheduling decision (push + pop) per frontier strategy, and memory per queued link.

    python -m bench.bench_decisions                     # 10^4, 10^5, 10^6 queued links
    python -m bench.bench_decisions --sizes 10000 --decisions 5000 --strategies wl,bestfirst

For each size N the frontier is filled with N links (one registered domain per 200 links, domain
popularity skewed, R(l) ~ Beta(1, 4) shifted by a per-domain quality, 5 % "potential" links);
then ``--decisions`` times one new link is pushed and one link popped, so the queue stays at N.
Memory: tracemalloc's growth while pushing the N links (the Link objects are created before, so
this is the strategy's own overhead per queued link). The filled queue is moved out of the cyclic
GC's view (``gc.freeze``) before timing, as full collections re-scanning the N set-up objects
would measure the process heap rather than the strategy (``--no-freeze`` to include them).
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc

from topiccrawl.strategies.base import Link, make_frontier


def make_links(n: int, rng: random.Random, domains: int, start: int = 0) -> list[Link]:
    quality = [rng.betavariate(2, 5) for _ in range(domains)]
    out = []
    for i in range(start, start + n):
        d = int(domains * rng.random() ** 2)  # a few big sites, many small ones
        score = min(1.0, 0.6 * rng.betavariate(1, 4) + 0.4 * quality[d] * rng.random())
        out.append(Link(f"http://site{d}.example/p{i}", score, domain=f"site{d}.example",
                        potential=rng.random() < 0.05))
    return out


def measure(strategy: str, n: int, decisions: int, seed: int, memory: bool, freeze: bool) -> tuple[float, float | None]:
    rng = random.Random(seed)
    domains = max(1, n // 200)
    queued, fresh = make_links(n, rng, domains), make_links(decisions, rng, domains, start=n)
    frontier = make_frontier(strategy, None, {})
    gc.collect()
    if memory:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
    for link in queued:
        frontier.push(link)
    per_link = None
    if memory:
        per_link = (tracemalloc.get_traced_memory()[0] - base) / n
        tracemalloc.stop()
    del queued
    if freeze:
        gc.freeze()  # full collections would re-scan the N set-up links on every run; new objects still count
    t0 = time.perf_counter()
    for link in fresh:
        frontier.push(link)
        frontier.pop()
    elapsed = time.perf_counter() - t0
    gc.unfreeze()
    return elapsed / decisions * 1e6, per_link


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--strategies", default="bestfirst,wl,sa,fcsa-host")
    ap.add_argument("--decisions", type=int, default=20000)
    ap.add_argument("--memory-up-to", type=int, default=100000,
                    help="tracemalloc only for sizes up to this (it slows pushing several-fold)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-freeze", action="store_true", help="let full GC passes re-scan the set-up queue")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    strategies = args.strategies.split(",")
    rows = {s: {} for s in strategies}
    for n in sizes:
        for s in strategies:
            rows[s][n] = measure(s, n, args.decisions, args.seed, n <= args.memory_up_to, not args.no_freeze)
            print(f"# {s} N={n}: {rows[s][n][0]:.1f} µs/decision", file=sys.stderr, flush=True)
    link_bytes = sys.getsizeof(Link("http://site1.example/p1", 0.5, domain="site1.example"))
    print("| strategy | " + " | ".join(f"µs/decision @ {n:,}" for n in sizes)
          + " | bytes/queued link (strategy overhead) |")
    print("|---|" + "---:|" * (len(sizes) + 1))
    for s in strategies:
        mem = [rows[s][n][1] for n in sizes if rows[s][n][1] is not None]
        print(f"| {s} | " + " | ".join(f"{rows[s][n][0]:.1f}" for n in sizes)
              + (f" | {mem[-1]:.0f} |" if mem else " | – |"))
    print(f"\n{args.decisions:,} decisions (push + pop) per cell, Python {sys.version.split()[0]}; "
          f"a Link object itself is {link_bytes} bytes plus its strings.")


if __name__ == "__main__":
    main()
