"""Compare frontier strategies on one corpus and topic, next to a plain Scrapy spider.

    python -m bench.strategies --web "generated:zh-disaster?pages=20000&seed=1" --topic 台风灾害 \
        --strategies bfs,bestfirst,oracle --pages 1000 --repeats 1 --out bench/results/typhoon

One web-lab server is started and shared by every run (``TOPICCRAWL_WEB_PROXY``), each strategy
runs as a real ``scrapy crawl focused`` process, and a plain Scrapy BFS spider (no scoring, no
custom scheduler) crawls the same web in the same session for the throughput reference.
``-s NAME=VALUE`` (a setting) and ``-a NAME=VALUE`` (a spider argument) are passed to every run,
e.g. ``-s TOPICCRAWL_CLASSIFIER=on -a examples=truth:5``. Repetition r of a strategy with an RNG
(:data:`SEED_SETTINGS`) sets its seed setting to r (``--first-seed N`` numbers them from N), as
``bench.learned_focus`` does. The table's "ended" column is each run's close reason
(``finish_reason``), or "frontier ran dry at N" when no queued link was left before the page
budget. A crawl that fails is listed and the others go on; the table averages the runs that
finished and the exit status is 1. Writes ``results.md`` (markdown table), ``results.json`` and
``harvest.png`` (every repetition) into ``--out``; each run's folder keeps ``stderr.txt`` and
``command.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from topiccrawl.scoring.metrics import mean_sd
from topiccrawl.scoring.topic import TopicError, load_topic
from topiccrawl.settings import CONCURRENT_ITEMS
from topiccrawl.weblab.api import WebLab, WebLabError
from topiccrawl.weblab.corpus import CorpusError

REPO = Path(__file__).resolve().parent.parent

CHECKPOINTS = (100, 250, 500, 1000)


def checkpoints_for(pages: int) -> list[int]:
    """The standard checkpoints below the page budget, then the budget itself."""
    return [c for c in CHECKPOINTS if c < pages] + [pages]


def scrapy_bin() -> str:
    return str(Path(sys.executable).parent / "scrapy")


class CrawlFailed(RuntimeError):
    """A ``scrapy crawl`` that exited non-zero or wrote no ``stats.json`` (its stderr is in ``stderr.txt``)."""


def name_value(text: str) -> str:
    """argparse type of ``-s NAME=VALUE`` / ``-a NAME=VALUE``."""
    name, sep, _ = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return text


#: what every run's command sets from the bench's own options, as a spider argument and as a
#: setting: given again with ``-a`` / ``-s`` they would override the bench's choice (or be
#: overridden by it) while its table still labels the runs by it
RESERVED = {"topic": ("topic", "TOPICCRAWL_TOPIC"), "strategy": ("strategy", "TOPICCRAWL_STRATEGY"),
            "pages": ("max_pages", "TOPICCRAWL_MAX_PAGES"), "web": (None, "TOPICCRAWL_WEB"),
            "lab": (None, "TOPICCRAWL_WEB_PROXY"), "out": (None, "TOPICCRAWL_OUTPUT_DIR")}
#: the setting of each strategy's RNG seed, varied between repetitions (strategies not named
#: here are deterministic up to Scrapy's concurrency timing)
SEED_SETTINGS = {"wl": "TOPICCRAWL_WL_SEED", "learned": "TOPICCRAWL_LEARNED_SEED"}
#: what would make a run's topic a category node instead of the topic its rows are labelled by
#: (the crawl then ignores ``topic``): a node's crawls are ``bench.tdcs_crawl``'s
NODE_TOPIC = {"scorer": "TOPICCRAWL_SCORER", "topic_tree": "TOPICCRAWL_TOPIC_TREE", "topic_node": "TOPICCRAWL_TOPIC_NODE"}


def check_passed_through(settings: Sequence[str], spider_args: Sequence[str], options: dict[str, str] | None = None,
                         setting_flag: str = "-s", arg_flag: str = "-a", own: Sequence[dict[str, str]] = ({}, {})) -> None:
    """SystemExit (one line) when a passed-through setting or spider argument (``NAME=VALUE``) names
    what the bench sets itself (:data:`RESERVED`); ``options`` names the bench's option for each;
    ``own``: more names the bench sets (arguments, settings: name -> what sets it)."""
    options = {"topic": "--topic", "strategy": "--strategies", "pages": "--pages", "web": "--web",
               "lab": "the bench's own web lab", "out": "--out", **(options or {})}
    for flag, values, column in ((setting_flag, settings, 1), (arg_flag, spider_args, 0)):
        reserved = {names[column]: options[key] for key, names in RESERVED.items() if names[column]}
        reserved.update(own[column])
        node = {(arg, setting)[column] for arg, setting in NODE_TOPIC.items()}
        for text in values:
            name = text.partition("=")[0].strip()
            if name in reserved:
                raise SystemExit(f"{flag} {text}: the bench sets {name} for every run; use {reserved[name]}")
            if name in node and not (name in ("scorer", "TOPICCRAWL_SCORER") and text.partition("=")[2].strip() == "vsm"):
                raise SystemExit(f"{flag} {text}: the runs are labelled by the topic of {options['topic']}, which this "
                                 "would replace by a category node; a node's crawls: python -m bench.tdcs_crawl")


def check_labels(spec: str, topics) -> None:
    """SystemExit (one line) for a topic whose labels match no page of the corpus (a typo in a
    label): its crawls would find no relevant page, and a recall of 0 of 0 entered the means."""
    from topiccrawl.weblab.corpus import open_corpus

    corpus = open_corpus(spec)
    for topic in topics:
        if not topic.labels:
            raise SystemExit(f"{topic.path or topic.name}: no labels = [...]: the evaluation labels the bench "
                             "measures harvest and recall by")
        if not any(corpus.labels(u) & topic.labels for u in corpus.iter_urls()):
            raise SystemExit(f"{topic.path or topic.name}: its labels ({', '.join(sorted(topic.labels))}) match no "
                             f"page of {spec}: a typo in a label?")


def check_strategies(names: Sequence[str]) -> None:
    """SystemExit (one line) for a strategy the crawler does not know: before any crawl runs, not
    after the first ones (a typo lost a session's finished runs)."""
    from topiccrawl.strategies.base import STRATEGIES

    unknown = next((n for n in names if n not in STRATEGIES), None)
    if unknown is not None:
        raise SystemExit(f"unknown strategy {unknown!r}; expected one of: {', '.join(STRATEGIES)}")


def writable_folder(path: Path, what: str = "--out") -> None:
    """Make ``path`` (a folder) or SystemExit in one line: before any crawl, not after them."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-check"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise SystemExit(f"{what} {path}: cannot write there ({exc.strerror or exc})") from None


def crawl_command(web: str, proxy: str, topic: str, strategy: str, pages: int, out: Path,
                  spider: str = "focused", settings: Sequence[str] = (), spider_args: Sequence[str] = ()) -> list[str]:
    """The ``scrapy crawl`` command line of one run; ``settings`` / ``spider_args`` (``NAME=VALUE``)
    come last, so they override the bench's own (Scrapy keeps the last of a repeated name)."""
    return [
        scrapy_bin(), "crawl", spider, "-a", f"topic={topic}", "-a", f"strategy={strategy}",
        "-a", f"max_pages={pages}", "-s", f"TOPICCRAWL_WEB={web}", "-s", f"TOPICCRAWL_WEB_PROXY={proxy}",
        "-s", f"TOPICCRAWL_OUTPUT_DIR={out}", "-s", "TOPICCRAWL_PLOT_ENABLED=false",
        "-s", "TOPICCRAWL_PROGRESS_INTERVAL=0", "-s", "LOG_LEVEL=WARNING",
        *(x for s in settings for x in ("-s", s)), *(x for a in spider_args for x in ("-a", a)),
    ]


def run_strategy(web: str, proxy: str, topic: str, strategy: str, pages: int, out: Path,
                 spider: str = "focused", settings: Sequence[str] = (), spider_args: Sequence[str] = ()) -> dict:
    """Run one real ``scrapy crawl`` and return :func:`load_run` of its output folder."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = crawl_command(web, proxy, topic, strategy, pages, out, spider, settings, spider_args)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (out / "stderr.txt").write_text(proc.stderr, encoding="utf-8")
    if proc.returncode != 0 or not (out / "stats.json").exists():
        raise CrawlFailed(f"{strategy} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    (out / "command.json").write_text(json.dumps({"command": cmd, "wall_s": round(wall, 3)}, ensure_ascii=False),
                                      encoding="utf-8")
    return load_run(out, strategy, wall)


def load_run(out: Path, strategy: str, wall: float | None = None) -> dict:
    """One run's ``stats.json`` and ``harvest.csv``: ``curve`` = [(dp, true harvest, target recall)],
    ``self_curve`` = [(dp, Accuracy, classifier expected harvest or None)], one row per counted page."""
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    rows = list(csv.DictReader((out / "harvest.csv").open(encoding="utf-8")))
    if wall is None and (out / "command.json").exists():
        wall = json.loads((out / "command.json").read_text(encoding="utf-8")).get("wall_s")
    total = stats.get("topiccrawl/truth/total_relevant") or 0
    curve = [(int(r["dp"]), float(r["truth_harvest_rate"]), float(r["target_recall"] or 0)) for r in rows]
    self_curve = [(int(r["dp"]), float(r["accuracy"]),
                   float(r["expected_harvest"]) if r.get("expected_harvest") not in (None, "") else None)
                  for r in rows]
    crawl_seconds = float(stats.get("elapsed_time_seconds") or wall or 0) or None
    return {
        "strategy": strategy,
        "dp": stats["topiccrawl/dp"],
        "accuracy": stats["topiccrawl/accuracy"],
        "expected_harvest": stats.get("topiccrawl/classifier/expected_harvest"),
        "unreliable": stats.get("topiccrawl/classifier/unreliable"),
        "total_relevant": total,
        "finish_reason": stats.get("finish_reason"),
        "frontier_exhausted": bool(stats.get("topiccrawl/frontier_exhausted")),
        "examples_fetched": stats.get("topiccrawl/examples/fetched", 0),
        "curve": curve,
        "self_curve": self_curve,
        "pages_per_s": stats["topiccrawl/dp"] / crawl_seconds if crawl_seconds else None,
        "cpu_seconds": stats.get("topiccrawl/cpu_seconds"),
        "wall_s": wall,
    }


def ended(run: dict) -> str:
    """Why a crawl stopped: Scrapy's close reason, or "frontier ran dry at N" when no queued link
    was left before the page budget (``topiccrawl/frontier_exhausted``)."""
    if run.get("frontier_exhausted"):
        return f"frontier ran dry at {run['dp']}"
    return str(run.get("finish_reason") or "–")


def ended_cell(runs: list[dict]) -> str:
    """:func:`ended` over repetitions: distinct reasons in first-seen order, "×k" when repeated."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[ended(r)] = counts.get(ended(r), 0) + 1
    return ", ".join(reason if k == 1 else f"{reason} ×{k}" for reason, k in counts.items()) or "–"


def estimate_cell(runs: list[dict]) -> str:
    """The page classifier's self-assessed harvest rate over repetitions (``learned``, or any run
    with the classifier on), "unreliable k/n" when it flagged itself; "–" for runs without one."""
    values = [r["expected_harvest"] for r in runs if r.get("expected_harvest") is not None]
    if not values:
        return "–"
    flagged = sum(bool(r.get("unreliable")) for r in runs if r.get("expected_harvest") is not None)
    missing = len(runs) - len(values)
    return (fmt(values) + (f", unreliable {flagged}/{len(values)}" if flagged else "")
            + (f", none in {missing} of {len(runs)} runs" if missing else ""))


def run_plain(proxy: str, seeds: list[str], pages: int, settings: tuple[str, ...] = ()) -> float:
    """Pages/s of a plain Scrapy BFS spider over the same web (bench/plain_spider.py)."""
    return run_plain_stats(proxy, seeds, pages, settings)["pages_per_s"]


def run_plain_stats(proxy: str, seeds: list[str], pages: int, settings: tuple[str, ...] = ()) -> dict:
    """The JSON line of bench/plain_spider.py: pages, seconds, pages_per_s, cpu_seconds."""
    cmd = [sys.executable, str(REPO / "bench" / "plain_spider.py"), "--proxy", proxy, "--pages", str(pages),
           "--seeds", ",".join(seeds), *(x for s in settings for x in ("-s", s))]
    proc = subprocess.run(cmd, cwd=REPO / "bench", capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"plain spider failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


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
    ap.add_argument("--spider", default="focused", choices=("focused", "wl"),
                    help="focused, or wl (the WL paper's settings: threshold 0.2)")
    ap.add_argument("-s", "--setting", dest="settings", action="append", default=[], type=name_value,
                    metavar="NAME=VALUE", help="a Scrapy/topiccrawl setting for every run (repeatable)")
    ap.add_argument("-a", "--arg", dest="spider_args", action="append", default=[], type=name_value,
                    metavar="NAME=VALUE", help="a spider argument for every run (repeatable)")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="number the repetitions (their seed setting and folder) from N (default 0)")
    args = ap.parse_args()
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    seeded = {SEED_SETTINGS[s]: "--first-seed (the repetitions' seeds)" for s in strategies if s in SEED_SETTINGS}
    check_passed_through(args.settings, args.spider_args, own=({}, seeded))
    if not strategies or args.pages < 1 or args.repeats < 1 or args.first_seed < 0:
        raise SystemExit("--strategies needs at least one strategy; --pages and --repeats must be >= 1, "
                         "--first-seed >= 0")
    twice = next((s for s in strategies if strategies.count(s) > 1), None)
    if twice is not None:  # one folder and one row per strategy: the second run would replace the first
        raise SystemExit(f"--strategies names {twice} twice; use --repeats for more runs of one strategy")
    check_strategies(strategies)
    args.out = args.out.resolve()  # the crawls run in the repository, as does a topic file named here
    if Path(args.topic).is_file():
        args.topic = str(Path(args.topic).resolve())
    try:  # a misspelt topic, or labels that match no page (a recall of 0 of 0 in every row), before any crawl
        # read as the crawls read it: they run in the repository (a path relative to it works from anywhere)
        topic = load_topic(args.topic if Path(args.topic).is_absolute() or not (REPO / args.topic).is_file()
                           else str(REPO / args.topic))
    except TopicError as err:
        raise SystemExit(str(err)) from None
    # labels of the corpus itself: a ground-truth file of the user's (-s TOPICCRAWL_GROUND_TRUTH) is not checked
    own_truth = any(s.partition("=")[0] == "TOPICCRAWL_GROUND_TRUTH" for s in args.settings)
    if args.web.strip().lower() != "live" and not own_truth:
        try:
            check_labels(args.web, [topic])
        except CorpusError as err:  # an unknown preset, a missing corpus: as the lab would say it
            raise SystemExit(str(err)) from None
    writable_folder(args.out)
    results: dict[str, list[dict]] = {s: [] for s in strategies}
    failures: list[dict] = []
    try:
        with WebLab(args.web) as lab:
            for rep in range(args.first_seed, args.first_seed + args.repeats):
                for s in strategies:
                    seed = (f"{SEED_SETTINGS[s]}={rep}",) if s in SEED_SETTINGS else ()
                    out = args.out / f"{s}-{rep}"
                    try:
                        res = run_strategy(args.web, lab.proxy_url, args.topic, s, args.pages, out, args.spider,
                                           seed + tuple(args.settings), args.spider_args)
                    except CrawlFailed as err:  # the others go on; listed in results.md, exit status 1
                        failures.append({"strategy": s, "rep": rep, "dir": str(out), "error": str(err)[-1500:]})
                        print(f"{s} rep {rep}: FAILED\n{err}", file=sys.stderr, flush=True)
                        continue
                    results[s].append(res)
                    print(f"{s} rep {rep}: {res['dp']} pages, {res['pages_per_s']:.0f} pages/s, {ended(res)}",
                          file=sys.stderr, flush=True)
            seeds = lab.info.get("seeds", [])[:5] or []
            plain = run_plain(lab.proxy_url, seeds, args.pages)
            # the project sets CONCURRENT_ITEMS = 8 (topiccrawl/settings.py); the same for the plain spider
            plain_ci = run_plain(lab.proxy_url, seeds, args.pages, (f"CONCURRENT_ITEMS={CONCURRENT_ITEMS}",))
            info = lab.info
    except WebLabError as err:  # an unknown preset, a missing corpus: the lab's own line
        raise SystemExit(str(err)) from None
    except KeyboardInterrupt:  # the running crawl got the terminal's Ctrl-C too and closed its files
        print(f"stopped (Ctrl-C); the finished runs' folders are kept under {args.out}", file=sys.stderr)
        raise SystemExit(130) from None  # the shell's status for a Ctrl-C

    checkpoints = checkpoints_for(args.pages)
    lines = [
        f"Corpus `{args.web}` ({info.get('pages')} pages), topic `{args.topic}`, "
        f"{args.repeats} run(s) per strategy, {args.pages} pages each, spider `{args.spider}`"
        + "".join(f", `-s {x}`" for x in args.settings) + "".join(f", `-a {x}`" for x in args.spider_args) + ".",
        "",
        "| strategy | " + " | ".join(f"harvest@{c}" for c in checkpoints) + " | "
        + " | ".join(f"recall@{c}" for c in checkpoints)
        + " | Accuracy (self-assessed) | classifier's estimate (self-assessed) | pages/s | × plain Scrapy | ended |",
        "|---|" + "---|" * (2 * len(checkpoints) + 5),
    ]
    for s in strategies:
        runs = results[s]
        failed = sum(f["strategy"] == s for f in failures)
        if not runs:
            lines.append(f"| {s} | " + " | ".join("–" for _ in range(2 * len(checkpoints) + 4))
                         + f" | failed: {failed} of {failed} runs |")
            continue
        pps = statistics.mean(r["pages_per_s"] for r in runs)
        lines.append(
            f"| {s} | " + " | ".join(fmt([at(r["curve"], c, 1) for r in runs]) for c in checkpoints) + " | "
            + " | ".join(fmt([at(r["curve"], c, 2) for r in runs]) for c in checkpoints)
            + f" | {fmt([r['accuracy'] for r in runs])} | {estimate_cell(runs)} | {pps:.0f} | {pps / plain:.2f} "
            f"| {ended_cell(runs)}{f', failed ×{failed}' if failed else ''} |"
        )
    lines += ["", f"Plain Scrapy BFS spider on the same web, same session: {plain:.0f} pages/s with Scrapy's "
              f"defaults (the × column), {plain_ci:.0f} pages/s with the project's "
              f"CONCURRENT_ITEMS={CONCURRENT_ITEMS}."]
    if failures:
        lines += ["", "Failed crawls (the table averages the others):", ""] + [
            f"- {f['strategy']} rep {f['rep']}: see {f['dir']}/stderr.txt" for f in failures]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = {"plain_pages_per_s": plain, "plain_ci_pages_per_s": plain_ci, "settings": args.settings,
               "spider_args": args.spider_args, "first_seed": args.first_seed, "results": results,
               "failures": failures}
    (args.out / "results.json").write_text(json.dumps(summary), encoding="utf-8")
    plot(results, args.out / "harvest.png", args.topic)
    print("\n".join(lines))
    if failures:
        raise SystemExit(f"{len(failures)} crawl(s) failed (results.md lists them)")


def plot(results: dict, path: Path, topic: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for k, (s, runs) in enumerate(results.items()):
        for i, run in enumerate(runs):  # every repetition, one colour per strategy
            curve = run["curve"]
            style = {"color": f"C{k % 10}", "alpha": 1.0 if len(runs) == 1 else 0.6, "label": s if i == 0 else None}
            ax1.plot([r[0] for r in curve], [r[1] for r in curve], **style)
            ax2.plot([r[0] for r in curve], [r[2] for r in curve], **style)
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
