"""Harvest-aware dispatch (docs/dispatch.md, docs/benchmarks.md "Harvest-aware dispatch"): the
truly relevant pages among the first 100 and 250 fetches, and pages/s, for each strategy under
CONCURRENT_REQUESTS 1, 4 and 16 with eager and patient dispatch — every strategy next to the
oracle under the same dispatch and concurrency.

    TOPICCRAWL_DATA_DIR=/path/to/data python -m bench.dispatch --corpus wikispeedia --out out/dispatch-wiki
    python -m bench.dispatch --corpus generated --out out/dispatch-generated

Corpora: ``wikispeedia`` (the evaluation topics ``bench/topics/wikispeedia/*.toml``, or
``--topics`` files, seeds Earth, United_States, Geography from the topic files) and ``generated``
(``generated:zh-disaster?pages=20000&seed=1``, topic 台风灾害, the lab's seeds). One web lab per
corpus, every run a real ``scrapy crawl focused``; runs go one at a time, so pages/s compares
configurations on an otherwise idle machine. CONCURRENT_REQUESTS_PER_DOMAIN is set to the same
value as CONCURRENT_REQUESTS (the Wikispeedia web is one host).

Writes ``results.md`` (per strategy and configuration: relevant pages at 100 / 250 fetches, mean
over topics and repetitions, their ratio to the same strategy at concurrency 1, pages/s and its
ratio to eager dispatch at the same concurrency, holds and seconds held), ``results.json`` and
``tradeoff.png`` (relevant at 250 against pages/s, one marker per configuration) into ``--out``
(``results.json`` after every run, so ``--summarise`` can report an interrupted benchmark and
``--resume`` run only what is missing, e.g. more repetitions).
``--variant NAME:K=V,...`` adds a concurrency-16 patient configuration with other dispatch settings
(e.g. another rule) next to the others; ``--web``/``--topics`` pick a development web.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from bench.strategies import CrawlFailed, run_strategy
from topiccrawl.weblab.api import WebLab

REPO = Path(__file__).resolve().parent.parent
AT = (100, 250)
CONFIGS = (("c1", 1, "eager"), ("c4-eager", 4, "eager"), ("c4-patient", 4, "patient"),
           ("c16-eager", 16, "eager"), ("c16-patient", 16, "patient"))


def relevant_at(run_dir: Path, dp: int) -> int | None:
    """Truly relevant pages among the first ``dp`` counted fetches (harvest.csv), None if fewer."""
    import csv

    with (run_dir / "harvest.csv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if int(row["dp"]) == dp:
                return int(row["truth_relevant"])
    return None


def corpus(args) -> tuple[str, list[str]]:
    if args.corpus == "generated":
        return args.web or "generated:zh-disaster?pages=20000&seed=1", args.topics or ["台风灾害"]
    data = os.environ.get("TOPICCRAWL_DATA_DIR")
    if not data:
        raise SystemExit("set TOPICCRAWL_DATA_DIR to the folder holding wikispeedia/")
    topics = args.topics or sorted(str(p) for p in (REPO / "bench" / "topics" / "wikispeedia").glob("*.toml"))
    return f"wikispeedia:{Path(data) / 'wikispeedia'}", topics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=("wikispeedia", "generated"), required=True)
    ap.add_argument("--topics", nargs="*", help="topics (wikispeedia: files, default every evaluation topic; "
                    "generated: default 台风灾害)")
    ap.add_argument("--web", help="generated: another corpus spec (e.g. a development web)")
    ap.add_argument("-s", "--setting", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for every run (repeatable), e.g. TOPICCRAWL_DISPATCH_MARGIN=1.5")
    ap.add_argument("--variant", dest="variants", action="append", default=[], metavar="NAME:K=V,K=V",
                    help="an extra concurrency-16 patient configuration c16-patient-NAME with these settings "
                    "(repeatable), run next to the others, e.g. p35:TOPICCRAWL_DISPATCH_RULE=probability,"
                    "TOPICCRAWL_DISPATCH_P=0.35")
    ap.add_argument("--strategies", default="bestfirst,learned,oracle")
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    ap.add_argument("--pages", type=int, default=250)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--once", default="", metavar="[STRATEGY:]CONFIG,...",
                    help="run these only in the first repetition (e.g. bestfirst:c1,oracle:c1, deterministic "
                    "at concurrency 1; c16-eager as the pages/s reference): saves time on a busy machine")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs already in --out/results.json and run only the missing ones (e.g. more "
                    "repetitions: --repeats 6 after --repeats 3)")
    ap.add_argument("--summarise", action="store_true",
                    help="no crawls: rebuild results.md and tradeoff.png from --out/results.json (e.g. an interrupted run)")
    args = ap.parse_args()
    web, topics = corpus(args)
    strategies = args.strategies.split(",")
    configs = [(*c, ()) for c in CONFIGS if c[0] in args.configs.split(",")]
    for variant in args.variants:
        name, _, extra = variant.partition(":")
        configs.append((f"c16-patient-{name}", 16, "patient", tuple(x for x in extra.split(",") if x)))
    once = {x for x in args.once.split(",") if x}
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "results.json"
    if args.summarise and not saved.exists():
        raise SystemExit(f"--summarise: no {saved}")
    runs: list[dict] = json.loads(saved.read_text(encoding="utf-8")) if args.summarise or (
        args.resume and saved.exists()) else []
    if args.summarise:
        report(args, web, topics, strategies, configs, runs)
        return
    done = {(r["topic"], r["strategy"], r["config"], r["rep"]) for r in runs}
    with WebLab(web) as lab:
        for rep in range(args.repeats):
            for topic in topics:
                for strategy in strategies:
                    for name, conc, dispatch, extra in configs:
                        if rep and ({name, f"{strategy}:{name}"} & once):
                            continue
                        if (Path(topic).stem, strategy, name, rep) in done:
                            continue
                        out = args.out / "runs" / Path(topic).stem / f"{strategy}-{name}-{rep}"
                        settings = [f"CONCURRENT_REQUESTS={conc}", f"CONCURRENT_REQUESTS_PER_DOMAIN={conc}",
                                    f"TOPICCRAWL_DISPATCH={dispatch}", f"TOPICCRAWL_LEARNED_SEED={rep}", *args.settings, *extra]
                        try:
                            res = run_strategy(web, lab.proxy_url, topic, strategy, args.pages, out, settings=settings)
                        except CrawlFailed as exc:
                            print(exc, file=sys.stderr)
                            continue
                        stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
                        runs.append({"topic": Path(topic).stem, "strategy": strategy, "config": name, "rep": rep,
                                     **{f"relevant@{n}": relevant_at(out, n) for n in AT},
                                     "pages_per_s": res["pages_per_s"],
                                     "holds": stats.get("topiccrawl/dispatch/holds", 0),
                                     "held_s": stats.get("topiccrawl/dispatch/held_seconds", 0.0)})
                        print(json.dumps(runs[-1], ensure_ascii=False), flush=True)
                        saved.write_text(json.dumps(runs, ensure_ascii=False, indent=1),
                                         encoding="utf-8")  # so far: an interrupted run keeps them
    saved.write_text(json.dumps(runs, ensure_ascii=False, indent=1), encoding="utf-8")
    report(args, web, topics, strategies, configs, runs)


def report(args, web: str, topics: list[str], strategies: list[str], configs: list[tuple], runs: list[dict]) -> None:
    table = summarise(runs, strategies, [c[0] for c in configs])
    reps = len({r["rep"] for r in runs})
    header = (f"Corpus `{web.split(':', 1)[0]}`, {len(topics)} topic(s), {reps} repetition(s), {len(runs)} runs, "
              f"{args.pages} pages per run; relevant = truly relevant pages among the first N fetches, "
              "mean over topics and repetitions.\n\n")
    (args.out / "results.md").write_text(header + table + "\n", encoding="utf-8")
    print(header + table)
    plot(runs, strategies, [c[0] for c in configs], args.out / "tradeoff.png", web.split(":", 1)[0])


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def summarise(runs: list[dict], strategies: list[str], configs: list[str]) -> str:
    rows = ["| strategy | configuration | relevant@100 | relevant@250 | × c1 @100 | × c1 @250 | pages/s | × eager "
            "| holds | s held |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in strategies:
        mine = [r for r in runs if r["strategy"] == s]
        base = {n: _mean(r[f"relevant@{n}"] for r in mine if r["config"] == "c1") for n in AT}
        for c in configs:
            rs = [r for r in mine if r["config"] == c]
            if not rs:
                continue
            rel = {n: _mean(r[f"relevant@{n}"] for r in rs) for n in AT}
            pps = _mean(r["pages_per_s"] for r in rs)
            eager = c if "-" not in c else c.split("-", 1)[0] + "-eager"
            e_pps = _mean(r["pages_per_s"] for r in mine if r["config"] == eager)
            cells = [f"{rel[n]:.1f}" if rel[n] is not None else "–" for n in AT]
            cells += [f"{rel[n] / base[n]:.2f}" if rel[n] is not None and base[n] else "–" for n in AT]
            cells += [f"{pps:.0f}" if pps else "–", f"{pps / e_pps:.2f}" if pps and e_pps else "–",
                      f"{_mean(r['holds'] for r in rs):.0f}", f"{_mean(r['held_s'] for r in rs):.1f}"]
            rows.append(f"| {s} | {c} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def plot(runs: list[dict], strategies: list[str], configs: list[str], path: Path, corpus_name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    markers = {"c1": "o", "c4-eager": "s", "c4-patient": "D", "c16-eager": "^", "c16-patient": "*"}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, s in enumerate(strategies):
        for c in configs:
            rs = [r for r in runs if r["strategy"] == s and r["config"] == c]
            x, y = _mean(r["pages_per_s"] for r in rs), _mean(r["relevant@250"] for r in rs)
            if x is None or y is None:
                continue
            ax.scatter(x, y, marker=markers.get(c, "P"), color=f"C{i}", s=70,
                       label=f"{s} {c}")
    ax.set_xlabel("pages/s")
    ax.set_ylabel("truly relevant among the first 250 fetches")
    ax.set_title(f"Harvest against speed, {corpus_name}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
