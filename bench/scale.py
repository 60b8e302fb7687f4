"""Scale benchmarks (issue 8): frontier memory and decision cost at 10^4-10^6 queued links for the
memory and Redis backends, and pages/s with 1-3 Redis workers on a 1,000,000-page generated web.

    python -m bench.scale queue                     # 10^4, 10^5, 10^6; memory and redis; bestfirst
    python -m bench.scale queue --sizes 10000,100000 --strategies bestfirst,wl --decisions 20000
    python -m bench.scale workers --budget 3000     # 1, 2, 3 workers + memory backend + plain Scrapy

``queue``: every (backend, strategy, N) runs in a fresh process (clean RSS) through the real
scheduler: the class in ``SCHEDULER`` (set by the add-on) on a ``get_crawler(FocusedSpider, project settings)``
crawler with a real (not started) ExecutionEngine, ``TOPICCRAWL_WEB`` a 20,000-page generated
corpus for ground truth and ``TOPICCRAWL_WEB_PROXY`` pointing nowhere, so no lab server starts;
``TOPICCRAWL_STORE=redis`` gives the RedisScheduler, on a fresh ``redis-server`` per measurement.
The Redis scheduler's lease-renewal LoopingCall is stopped right after ``open`` (the reactor never
runs here). N requests shaped as the focused spider yields them (callback, ``meta["topiccrawl"]``
score/depth/parent/anchor/potential, Scrapy's ``depth``, a Referer = parent; one parent per 10
links, 70 % on the parent's host; 3,000 hosts with skewed popularity; URLs of ~70 characters;
anchors of 4-12 CJK characters; R(l) ~ Beta(1.5, 4)) go through ``enqueue_request`` (duplicate
filter included; the Redis scheduler buffers them and the ``len()`` that ends the timed fill sends
its last batch). Memory: RSS growth (/proc/self/statm) over the N enqueues / N, and for
N <= --trace-up-to a second fresh run under tracemalloc (Python heap only, by allocating file);
Redis: ``INFO memory`` used_memory growth / N and ``MEMORY USAGE`` per key. Then, with the set-up
objects frozen out of the cyclic GC (``gc.freeze``, as bench/bench_decisions.py), --decisions
times one ``enqueue_request`` of a pre-built request + one ``next_request``, so the queue stays
at N; Redis also settles each lease (``finish``, timed apart). Memory-backend in-flight requests
are dropped by the scheduler's own pruning against the idle engine every 100 pops.

``workers``: one lab server (``TOPICCRAWL_WEB_PROXY``) and one redis-server shared by every run;
for k workers, k ``scrapy crawl focused`` processes on a fresh crawl id with the global budget B;
pages/s = B / (last worker's ``finish_time`` - first worker's ``start_time``, stats.json). In the
same session: one memory-backend ``scrapy crawl focused`` with budget B, and the plain Scrapy
spider (bench/plain_spider.py) with Scrapy's defaults and with CONCURRENT_ITEMS=8.

Both print markdown tables and write JSON to ``--out`` (default out/scale).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CORPUS = "generated:zh-disaster?pages=20000&seed=1"
HOSTS = 3000
CJK = ("台风暴雨洪水地震灾害救援应急预警气象局发布通知新闻政府部门受灾群众转移安置损失统计"
       "防汛抗旱指挥部消息记者报道现场视频图片专题市县镇村道路交通电力通信恢复重建捐款志愿者")
SECTIONS = ("news", "xinwen", "article", "content", "html/zhuanti", "info/gov", "bbs/thread", "shehui/difang")
TLDS = ("com", "cn", "com.cn", "gov.cn", "org.cn", "net")


def machine() -> str:
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, load average {load} (1/5/15 min)"


# -- queue ------------------------------------------------------------------------------------------
def link_stream(spider, rng: random.Random, n: int, start: int = 0):
    """Requests as FocusedSpider.parse yields them (see the module docstring)."""
    import scrapy

    hosts = [f"{rng.choice(('www', 'news', 'bbs', 'info'))}."
             f"{''.join(rng.choices('abcdefghjklmnpqrstwxyz', k=rng.randint(6, 12)))}{h}.{rng.choice(TLDS)}"
             for h in range(HOSTS)]
    parent, depth, host = "", 1, hosts[0]
    for i in range(start, start + n):
        if i % 10 == 0:
            host = hosts[int(HOSTS * rng.random() ** 2)]
            depth = rng.randint(1, 6)
            parent = f"http://{host}/{rng.choice(SECTIONS)}/{2015 + i % 10}/{i % 1231:04d}/p{i:x}.shtml"
        h = host if rng.random() < 0.7 else hosts[int(HOSTS * rng.random() ** 2)]
        url = (f"http://{h}/{rng.choice(SECTIONS)}/{2015 + i % 10}/{rng.randint(101, 1231):04d}/"
               f"{i:x}{rng.getrandbits(40):010x}.html")
        meta = {"score": min(1.0, rng.betavariate(1.5, 4)), "depth": depth + 1, "parent": parent,
                "anchor": "".join(rng.choices(CJK, k=rng.randint(4, 12))), "potential": rng.random() < 0.05}
        yield scrapy.Request(url, callback=spider.parse, meta={"topiccrawl": meta, "depth": depth + 1},
                             headers={"Referer": parent})


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def make_scheduler(backend: str, strategy: str, redis_url: str | None):
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy.core.engine import ExecutionEngine
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    import topiccrawl.settings as project
    from topiccrawl.spiders.focused import FocusedSpider

    settings = {k: getattr(project, k) for k in dir(project) if k.isupper()}
    settings.update(TOPICCRAWL_WEB=CORPUS, TOPICCRAWL_WEB_PROXY="http://127.0.0.1:9", TOPICCRAWL_STRATEGY=strategy,
                    TOPICCRAWL_MAX_PAGES=0, LOG_LEVEL="WARNING")
    if backend == "redis":
        settings.update(TOPICCRAWL_STORE="redis", TOPICCRAWL_REDIS_URL=redis_url, TOPICCRAWL_CRAWL_ID="scale",
                        TOPICCRAWL_LEASE_SECONDS=3600)
    crawler = get_crawler(FocusedSpider, settings)
    crawler.spider = FocusedSpider.from_crawler(crawler)
    # a real engine, never started (what Crawler.crawl builds): the in-flight pruning reads it
    crawler.engine = ExecutionEngine(crawler, lambda _spider: crawler.stop_async())
    # the class the add-on wrote into SCHEDULER (TopicScheduler, or RedisScheduler for the Redis store)
    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(crawler.spider)
    if backend == "redis":
        scheduler._renewal.stop()  # the lease-renewal loop needs the running reactor
    return scheduler


def queue_one(backend: str, strategy: str, n: int, decisions: int, trace: bool, redis_url: str | None,
              seed: int) -> dict:
    """One measurement in this (fresh) process; see the module docstring."""
    from topiccrawl.crawl.runtime import registered_domain

    scheduler = make_scheduler(backend, strategy, redis_url)
    spider = scheduler.spider
    rng = random.Random(seed)
    r = scheduler.r if backend == "redis" else None
    warm = next(link_stream(spider, random.Random(seed - 1), 1))  # one-time loads: the public-suffix list,
    registered_domain(warm.url)                                    # the fingerprinter
    scheduler.crawler.request_fingerprinter.fingerprint(warm)
    gc.collect()
    base_rss, base_redis = rss(), r.info("memory")["used_memory"] if r else 0
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    url_chars = accepted = 0
    for request in link_stream(spider, rng, n):
        url_chars += len(request.url)
        accepted += scheduler.enqueue_request(request)
    queued = len(scheduler)  # Redis: flushes the scheduler's enqueue buffer, so all N are in Redis
    fill = time.perf_counter() - t0
    del request
    gc.collect()
    out = {"backend": backend, "strategy": strategy, "n": n, "accepted": accepted, "queued": queued,
           "url_chars": url_chars / n, "fill_us_per_enqueue": fill / n * 1e6, "load": os.getloadavg()}
    if trace:
        snapshot = tracemalloc.take_snapshot()
        total = sum(s.size for s in snapshot.statistics("filename"))
        out["trace_bytes_per_url"] = total / n
        out["trace_by_file"] = {Path(s.traceback[0].filename).name: round(s.size / n, 1)
                                for s in snapshot.statistics("filename")[:6]}
        tracemalloc.stop()
        return out
    out["rss_bytes_per_url"] = (rss() - base_rss) / n
    if r:
        out["redis_bytes_per_url"] = (r.info("memory")["used_memory"] - base_redis) / n
        keys = (scheduler.keys[x] for x in ("requests", "requests:data", "dupefilter"))
        out["redis_key_bytes_per_url"] = {k.split(":", 2)[2]: round((r.memory_usage(k, samples=1000) or 0) / n, 1)
                                          for k in keys}
    fresh = list(link_stream(spider, random.Random(seed + 1), decisions, start=n))
    gc.collect()
    gc.freeze()
    t_push = t_pop = t_settle = 0.0
    cpu = time.process_time()
    for request in fresh:
        t0 = time.perf_counter()
        scheduler.enqueue_request(request)
        t1 = time.perf_counter()
        popped = scheduler.next_request()
        t2 = time.perf_counter()
        if r:
            scheduler.finish(popped.meta["topiccrawl"]["lease"], "nopage")
            t_settle += time.perf_counter() - t2
        t_push, t_pop = t_push + t1 - t0, t_pop + t2 - t1
    cpu = time.process_time() - cpu
    gc.unfreeze()
    out["cpu_us_per_decision"] = cpu / decisions * 1e6
    out["us_per_decision"] = (t_push + t_pop) / decisions * 1e6
    out["us_enqueue"], out["us_next"] = t_push / decisions * 1e6, t_pop / decisions * 1e6
    if r:
        out["us_per_settle"] = t_settle / decisions * 1e6
    out["queued_after"] = len(scheduler)
    return out


class RedisServer:
    """A private redis-server on a free loopback port, no persistence; stopped by :meth:`stop`."""

    def __init__(self) -> None:
        import redis

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="scale-redis-")
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                                      "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        for _ in range(100):
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise SystemExit("redis-server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def cmd_queue(args) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    for n in sizes:
        for backend in args.backends.split(","):
            for strategy in args.strategies.split(","):
                for trace in ([True, False] if n <= args.trace_up_to and backend == "memory" else [False]):
                    server = RedisServer() if backend == "redis" else None
                    cmd = [sys.executable, "-m", "bench.scale", "_queue_one", backend, strategy, str(n),
                           str(args.decisions), str(int(trace)), server.url if server else "", str(args.seed)]
                    try:
                        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
                    finally:
                        if server:
                            server.stop()
                    if proc.returncode:
                        raise SystemExit(f"{backend}/{strategy}/{n} failed:\n{proc.stderr[-3000:]}")
                    res = json.loads(proc.stdout.strip().splitlines()[-1])
                    results.append(res)
                    print(f"# {json.dumps(res, ensure_ascii=False)}", file=sys.stderr, flush=True)
    rows = {}
    for res in results:
        rows.setdefault((res["backend"], res["strategy"], res["n"]), {}).update(res)
    lines = [f"Machine: {machine()} at the end; load per row in the JSON.", "",
             "| backend | strategy | queued N | µs/decision (enqueue + next) | of which enqueue / next "
             "| CPU µs/decision | Redis µs/lease settle | bytes/URL: RSS | bytes/URL: tracemalloc "
             "| bytes/URL: Redis used_memory | µs/enqueue while filling | load (1 min) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (backend, strategy, n), res in rows.items():
        f = lambda k, d=0, res=res: f"{res[k]:,.{d}f}" if k in res else "–"  # noqa: E731
        lines.append(f"| {backend} | {strategy} | {n:,} | {f('us_per_decision', 1)} | "
                     f"{f('us_enqueue', 1)} / {f('us_next', 1)} | {f('cpu_us_per_decision', 1)} | "
                     f"{f('us_per_settle', 1)} | "
                     f"{f('rss_bytes_per_url')} | {f('trace_bytes_per_url')} | {f('redis_bytes_per_url')} | "
                     f"{f('fill_us_per_enqueue', 1)} | {res['load'][0]:.2f} |")
    notes = [f"- {b}/{s}/{n:,}: tracemalloc by file (bytes/URL) {res['trace_by_file']}"
             for (b, s, n), res in rows.items() if "trace_by_file" in res]
    notes += [f"- {b}/{s}/{n:,}: Redis MEMORY USAGE per key (bytes/URL) {res['redis_key_bytes_per_url']}"
              for (b, s, n), res in rows.items() if "redis_key_bytes_per_url" in res]
    mean_url = sum(r["url_chars"] for r in results) / len(results)
    lines += ["", f"{args.decisions:,} decisions per cell; mean URL length {mean_url:.0f} characters. CPU µs: this "
              "process's CPU time over the decision loop (Redis: the client's, lease settling included; the "
              "server's is not).", *notes]
    finish(args.out / "queue", lines, results)


# -- workers ----------------------------------------------------------------------------------------
def scrapy_crawl(out: Path, budget: int, settings: dict, log: Path) -> subprocess.Popen:
    cmd = [str(Path(sys.executable).parent / "scrapy"), "crawl", "focused", "-a", "topic=台风灾害",
           "-a", "strategy=bestfirst", "-a", f"max_pages={budget}"]
    merged = {"TOPICCRAWL_OUTPUT_DIR": str(out), "TOPICCRAWL_PROGRESS_INTERVAL": "0",
              "TOPICCRAWL_PLOT_ENABLED": "false", "LOG_LEVEL": "WARNING", **settings}
    for k, v in merged.items():
        cmd += ["-s", f"{k}={v}"]
    return subprocess.Popen(cmd, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT)


def read_stats(out: Path) -> dict:
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    stats["_start"] = datetime.fromisoformat(stats["start_time"]).timestamp()
    stats["_finish"] = datetime.fromisoformat(stats["finish_time"]).timestamp()
    return stats


def cmd_workers(args) -> None:
    from bench.strategies import run_plain
    from topiccrawl.settings import CONCURRENT_ITEMS
    from topiccrawl.weblab.api import WebLab

    run_dir = args.out.resolve() / "workers" / time.strftime("%Y%m%dT%H%M%S")
    run_dir.mkdir(parents=True)
    results = {"web": args.web, "budget": args.budget, "machine_start": machine(), "runs": []}
    server = RedisServer()
    try:
        with WebLab(args.web) as lab:
            common = {"TOPICCRAWL_WEB": args.web, "TOPICCRAWL_WEB_PROXY": lab.proxy_url}
            for k in [int(x) for x in args.workers.split(",")]:
                load = os.getloadavg()[0]
                crawl = {**common, "TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": server.url,
                         "TOPICCRAWL_CRAWL_ID": f"scale-{k}-{time.time_ns()}", "TOPICCRAWL_IDLE_TIMEOUT": "30"}
                procs = [scrapy_crawl(run_dir / f"redis{k}" / f"w{i}", args.budget, crawl,
                                      run_dir / f"redis{k}-w{i}.log") for i in range(k)]
                for i, p in enumerate(procs):
                    if p.wait(1800):
                        raise SystemExit(f"worker {i} of {k} failed: see {run_dir}/redis{k}-w{i}.log")
                stats = [read_stats(run_dir / f"redis{k}" / f"w{i}") for i in range(k)]
                window = max(s["_finish"] for s in stats) - min(s["_start"] for s in stats)
                pages = max(s.get("topiccrawl/global/dp", 0) for s in stats)
                starts = [s["_start"] for s in stats]
                results["runs"].append({"config": f"redis, {k} worker{'s' * (k > 1)}", "pages": pages,
                                        "seconds": window, "pages_per_s": pages / window, "load": load,
                                        "start_spread_s": max(starts) - min(starts),
                                        "per_worker": [s.get("topiccrawl/dp", 0) for s in stats],
                                        "duplicate_fetch": sum(s.get("topiccrawl/redis/duplicate_fetch", 0)
                                                               for s in stats)})
                print(f"# {results['runs'][-1]}", file=sys.stderr, flush=True)
            load = os.getloadavg()[0]
            out = run_dir / "memory"
            if scrapy_crawl(out, args.budget, common, run_dir / "memory.log").wait(1800):
                raise SystemExit(f"memory-backend crawl failed: see {run_dir}/memory.log")
            s = read_stats(out)
            results["runs"].append({"config": "memory backend, 1 process", "pages": s["topiccrawl/dp"],
                                    "seconds": s["_finish"] - s["_start"], "load": load,
                                    "pages_per_s": s["topiccrawl/dp"] / (s["_finish"] - s["_start"])})
            seeds = lab.info.get("seeds", [])[:5]
            ci = f"CONCURRENT_ITEMS={CONCURRENT_ITEMS}"
            for label, extra in (("plain Scrapy spider (defaults)", ()), (f"plain Scrapy spider, {ci}", (ci,))):
                load = os.getloadavg()[0]
                results["runs"].append({"config": label, "pages": args.budget, "load": load,
                                        "pages_per_s": run_plain(lab.proxy_url, seeds, args.budget, extra)})
    finally:
        server.stop()
    results["machine_end"] = machine()
    lines = [f"Web `{args.web}`, strategy bestfirst, budget {args.budget:,} pages per configuration; "
             f"{results['machine_start']} at the start, {results['machine_end']} at the end.", "",
             "| configuration | pages | seconds | pages/s | pages per worker | load (1 min) at start |",
             "|---|---:|---:|---:|---|---:|"]
    for run in results["runs"]:
        seconds = f"{run['seconds']:.1f}" if "seconds" in run else "–"
        lines.append(f"| {run['config']} | {run['pages']:,} | {seconds} | {run['pages_per_s']:.0f} | "
                     f"{', '.join(map(str, run.get('per_worker', []))) or '–'} | {run['load']:.2f} |")
    finish(args.out / "workers", lines, results)


def finish(path: Path, lines: list[str], results) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps(results, ensure_ascii=False, indent=1, default=str),
                                         encoding="utf-8")
    print("\n".join(lines))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_queue_one":  # internal: one measurement, fresh process
        backend, strategy, n, decisions, trace, url, seed = sys.argv[2:]
        print(json.dumps(queue_one(backend, strategy, int(n), int(decisions), trace == "1", url or None, int(seed))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=REPO / "out" / "scale")
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("queue", parents=[common], help="frontier memory per URL and µs per decision")
    q.add_argument("--sizes", default="10000,100000,1000000")
    q.add_argument("--backends", default="memory,redis")
    q.add_argument("--strategies", default="bestfirst")
    q.add_argument("--decisions", type=int, default=20000)
    q.add_argument("--trace-up-to", type=int, default=100000, help="tracemalloc run for sizes up to this")
    q.add_argument("--seed", type=int, default=1)
    w = sub.add_parser("workers", parents=[common],
                       help="pages/s with 1-3 Redis workers next to one process and plain Scrapy")
    w.add_argument("--web", default="generated:zh-disaster?pages=1000000&seed=1")
    w.add_argument("--budget", type=int, default=3000)
    w.add_argument("--workers", default="1,2,3")
    args = ap.parse_args()
    (cmd_queue if args.cmd == "queue" else cmd_workers)(args)


if __name__ == "__main__":
    main()
