"""Throughput of the web lab server, next to Scrapy on the same machine.

    python -m bench.bench_server --web "generated:zh-disaster?pages=20000" --seconds 10 --crawl-pages 2000

1. Load generator through the proxy, rotating over the corpus's first ``--urls`` page URLs:
   ``wrk`` (one thread, ``--connections`` keep-alive connections, a Lua script that sends
   absolute-URL proxy requests) when installed, else ``--clients`` Python processes with
   keep-alive ``http.client`` connections. The search index is built before measuring.
2. The same load with the example fault spec (``--faults``), for the cost of fault decisions.
3. ``bench/plain_spider.py``: a plain Scrapy BFS spider crawling the web through the proxy.
4. ``scrapy bench`` (Scrapy's own local benchmark server and spider) for reference.

Prints a markdown block for ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from itertools import islice
from pathlib import Path
from urllib.parse import urlsplit

from topiccrawl.weblab.api import WebLab
from topiccrawl.weblab.corpus import open_corpus

REPO = Path(__file__).resolve().parent.parent

LUA = """urls = {}
for line in io.lines(os.getenv("WRK_URLS")) do urls[#urls + 1] = line end
i = 0
request = function()
  i = i % #urls + 1
  return wrk.format("GET", urls[i], {Host = urls[i]:match("^http://([^/]+)")})
end
"""


def wrk_rate(proxy: str, urls_file: str, seconds: int, connections: int) -> tuple[float, str]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write(LUA)
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", lua.name, proxy + "/"]
    out = subprocess.run(cmd, env=dict(os.environ, WRK_URLS=urls_file), capture_output=True,
                         text=True, check=True).stdout
    os.unlink(lua.name)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rate, f"{bad.group(1) if bad else 0} non-2xx/3xx"


def _client(proxy: str, urls: list[str], seconds: float, queue) -> None:
    host, port = urlsplit(proxy).hostname, urlsplit(proxy).port
    conn, done, end = http.client.HTTPConnection(host, port, timeout=30), 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            conn.request("GET", urls[done % len(urls)])
            conn.getresponse().read()
            done += 1
        except (OSError, http.client.HTTPException):  # injected resets, timeouts, cut bodies
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=5)
    queue.put(done)


def python_rate(proxy: str, urls: list[str], seconds: int, clients: int) -> tuple[float, str]:
    queue = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_client, args=(proxy, urls[i::clients], seconds, queue))
             for i in range(clients)]
    for p in procs:
        p.start()
    total = sum(queue.get() for _ in procs)
    for p in procs:
        p.join()
    return total / seconds, f"{clients} Python client processes"


def scrapy_bench(seconds: int) -> float:
    """Pages/s of ``scrapy bench`` (run outside any project)."""
    scrapy = str(Path(sys.executable).parent / "scrapy")
    with tempfile.TemporaryDirectory() as cwd:
        log = subprocess.run([scrapy, "bench", "-s", f"CLOSESPIDER_TIMEOUT={seconds}"], cwd=cwd,
                             capture_output=True, text=True).stderr
    pages = int(re.search(r"'response_received_count': (\d+)", log).group(1))
    elapsed = float(re.search(r"'elapsed_time_seconds': ([\d.]+)", log).group(1))
    return pages / elapsed


def plain_crawl(proxy: str, seeds: list[str], pages: int) -> dict:
    cmd = [sys.executable, str(REPO / "bench" / "plain_spider.py"), "--proxy", proxy,
           "--pages", str(pages), "--seeds", ",".join(seeds)]
    out = subprocess.run(cmd, cwd=REPO / "bench", capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def load(lab: WebLab, urls_file: str, urls: list[str], args) -> tuple[float, str]:
    if shutil.which("wrk") and not args.python_client:
        return wrk_rate(lab.proxy_url, urls_file, args.seconds, args.connections)
    return python_rate(lab.proxy_url, urls, args.seconds, args.clients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--web", default="generated:zh-disaster?pages=20000")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--urls", type=int, default=5000, help="distinct URLs the load rotates over")
    parser.add_argument("--connections", type=int, default=32, help="wrk keep-alive connections")
    parser.add_argument("--clients", type=int, default=4, help="Python client processes (no wrk)")
    parser.add_argument("--python-client", action="store_true", help="use the Python client even if wrk exists")
    parser.add_argument("--faults", default="latency=0.05-0.2@0.1,timeout=1@0.01,5xx@0.02,reset@0.01,"
                                            "truncate@0.01,badlength@0.01,drip=0.5@0.01,seed=7")
    parser.add_argument("--crawl-pages", type=int, default=2000)
    args = parser.parse_args()

    urls = list(islice(open_corpus(args.web).iter_urls(), args.urls))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(urls) + "\n")
    rows = []
    with WebLab(args.web) as lab:
        started = time.monotonic()
        while lab.info["search"]["state"] == "building":
            time.sleep(0.5)
        index_s = time.monotonic() - started
        rate, note = load(lab, f.name, urls, args)
        rows.append(("lab server, plain pages (load generator)", rate, note))
        seeds = lab.info["seeds"][:5]
        crawl = plain_crawl(lab.proxy_url, seeds, args.crawl_pages)
        rows.append(("plain Scrapy BFS spider through the proxy", crawl["pages_per_s"],
                     f"{crawl['pages']} pages in {crawl['seconds']} s"))
        pages, indexed = lab.pages, lab.info["search"]["indexed"]
    with WebLab(args.web, faults=args.faults) as lab:
        rate, note = load(lab, f.name, urls, args)
        rows.append(("lab server with --faults (load generator)", rate,
                     note + " (the 5xx answers); resets, timeouts and cut bodies are errors, not counted"))
    os.unlink(f.name)
    rows.append(("`scrapy bench` (Scrapy's own server and spider)", scrapy_bench(args.seconds), ""))

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    load1 = os.getloadavg()[0]
    tool = "wrk 1 thread" if shutil.which("wrk") and not args.python_client else "Python clients"
    print(f"Date {date.today()}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
          f"corpus `{args.web}` ({pages} pages; search index {indexed} pages built in {index_s:.0f} s "
          f"before measuring). Load: {tool}, {args.connections if tool.startswith('wrk') else args.clients} "
          f"connections, {args.seconds} s, rotating over {len(urls)} URLs. Load average at the end: {load1:.1f}.\n")
    print("| Measurement | pages/s | Notes |\n|---|---:|---|")
    for name, value, note in rows:
        print(f"| {name} | {value:,.0f} | {note} |")


if __name__ == "__main__":
    main()
