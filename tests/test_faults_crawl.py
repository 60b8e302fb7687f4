"""A focused crawl through every fault the web lab can inject, plus the calendar spider trap.

`scrapy crawl focused` runs in a subprocess (as a user would) over a generated web whose lab
injects latency, timeouts, 5xx, resets, truncated bodies, wrong Content-Length, slow drip and
redirect loops; the web itself has the calendar trap, a 3-6 MB page and GBK pages served with a
``charset=utf-8`` header. The topic is built to make the trap attractive ("日历", "信息" are the
calendar's own words, even its "上个月"/"下个月" anchors), so without the guard a best-first crawl
walks into it for good.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_crawl
from topiccrawl.weblab.corpus import open_corpus
from topiccrawl.weblab.faults import NO_FAULT, parse_faults

WEB = "generated:zh-disaster?pages=2000&seed=1"  # seed 1 has a huge page (seed 3 has none)
FAULTS = ("latency=0.6-0.8@0.04,timeout=30@0.02,5xx@0.03,reset@0.03,truncate@0.03,"
          "badlength@0.03,drip=0.8@0.03,loop@0.03")
#: the lab fault kind -> the counter(s) the crawl must show for it
COUNTERS = {"latency": "slow_response", "timeout": "timeout", "5xx": "5xx", "reset": "reset",
            "truncate": "truncated", "badlength": "badlength", "drip": "slow_body",
            "loop": "redirect_loop"}
BUDGET, DEPTH = 300, 8
TOPIC = """name = "trap-bait"
language = "zh"
beta = 0.3
labels = ["topic:台风灾害"]
[words]
"日历" = 1.0
"暂无" = 0.9
"上个月" = 0.9
"下个月" = 0.9
"台风" = 0.8
"灾害" = 0.5
"""

def _special_urls():
    """The trap's entry page, the huge page and a GBK home page served as utf-8 (from the
    generated web's own tables), which the crawl gets as extra seeds so that it meets them."""
    web = open_corpus(WEB)
    huge = next(web._url(h, j) for h in web.table for j in sorted(h.huge))
    wrong = next(h for h in web.table if h.enc == "wrong-header")
    trap = web.describe()["trap"]
    return web, trap.split("/calendar/")[0] + "/", trap, huge, f"http://{wrong.name}/", wrong.site


def _seed_without_faults(urls: list[str]) -> str:
    """The first fault seed under which the special seeds themselves are served normally."""
    for seed in range(1000):
        plan = parse_faults(f"{FAULTS},seed={seed}")
        if all(plan.decide(u) is NO_FAULT and plan.decide(u + "robots.txt") is NO_FAULT for u in urls):
            return f"{FAULTS},seed={seed}"
    raise AssertionError("no fault seed leaves the special seeds alone")


def _crawl(tmp_path, seeds, faults, guard=True, concurrency=32):
    topic = tmp_path / "trap-bait.toml"
    topic.write_text(TOPIC, encoding="utf-8")
    return run_crawl(tmp_path, args={"topic": str(topic), "strategy": "bestfirst", "max_pages": BUDGET,
                                     "seeds": ",".join(seeds)},
                     settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_FAULTS": faults,
                               "TOPICCRAWL_PLOT_ENABLED": "false", "TOPICCRAWL_SLOW_SECONDS": "0.5",
                               "TOPICCRAWL_TRAP_GUARD_ENABLED": str(guard).lower(),
                               "TOPICCRAWL_TRAP_GUARD_DEPTH": str(DEPTH),
                               "DOWNLOAD_TIMEOUT": "2", "DOWNLOAD_MAXSIZE": "500000",
                               "DOWNLOAD_WARNSIZE": "40000", "CONCURRENT_REQUESTS": str(concurrency)},
                     timeout=240)


def test_crawl_survives_every_fault_and_the_trap(tmp_path):
    web, trap_home, trap_url, huge, wrong_home, wrong_site = _special_urls()
    seeds = web.seeds() + [trap_home, huge, wrong_home]
    proc, out = _crawl(tmp_path, seeds, _seed_without_faults(seeds + [trap_url]))
    log = proc.stderr
    (out / "crawl.log").write_text(log, encoding="utf-8")
    assert proc.returncode == 0, log[-3000:]
    # Scrapy itself logs each download it gave up on ("Gave up retrying", "Error downloading"
    # with the twisted failure); nothing may escape our components, the spider or the pipelines
    ours = [l for l in log.splitlines() if re.search(r"\[topiccrawl[.\w]*\] (ERROR|CRITICAL)", l)
            or "/topiccrawl/" in l and l.lstrip().startswith("File ")
            or re.search(r"Spider error processing|Error processing|Error caught on signal|Unhandled error", l)]
    assert not ours, ours[:5]

    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    faults = {k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("topiccrawl/faults/")}
    missing = {kind: key for kind, key in COUNTERS.items() if not faults.get(key)}
    assert not missing, (missing, faults)
    assert faults.get("too_large", 0) >= 1 and faults.get("large", 0) >= 1, faults
    assert faults.get("wrong_charset", 0) >= 1, faults
    # Scrapy's own retries still run under the fault counting (heal=0: broken URLs stay broken)
    assert stats["retry/count"] > 0 and stats["retry/max_reached"] > 0
    assert stats["topiccrawl/dp"] == BUDGET and stats["finish_reason"] == "topiccrawl_max_pages"

    pages = [json.loads(l) for l in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pages) == BUDGET
    trap = [p for p in pages if "/calendar/" in p["url"]]
    assert faults["trap_dropped"] >= 1 and 1 <= len(trap) <= 1 + 2 * DEPTH, (len(trap), faults)
    assert huge not in {p["url"] for p in pages}  # cancelled above DOWNLOAD_MAXSIZE
    wrong = next(p for p in pages if p["url"] == wrong_home)
    assert wrong_site in wrong["title"] and "\ufffd" not in wrong["title"], wrong["title"]
    cjk_titles = [p["title"] for p in pages if re.search(r"[\u4e00-\u9fff]", p["title"])]
    assert len(cjk_titles) > BUDGET // 2 and not any("\ufffd" in t for t in cjk_titles)


@pytest.mark.parametrize("guard", [True, False])
def test_trap_guard_keeps_the_trap_from_eating_the_budget(tmp_path, guard):
    """One request at a time, so best-first always takes the most attractive link: the trap's."""
    web, trap_home, _, _, _, _ = _special_urls()
    proc, out = _crawl(tmp_path, web.seeds() + [trap_home], "", guard=guard, concurrency=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == BUDGET
    pages = [json.loads(l) for l in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    trap = [p for p in pages if "/calendar/" in p["url"]]
    if guard:
        assert len(trap) == 1 + 2 * DEPTH and stats["topiccrawl/faults/trap_dropped"] >= 2, len(trap)
    else:
        assert len(trap) > BUDGET // 2 and "topiccrawl/faults/trap_dropped" not in stats, len(trap)
