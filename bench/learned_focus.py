"""Evaluation of the learned focus (docs/benchmarks.md, "Learned focus"): every topic × variant ×
repetition is a real ``scrapy crawl focused`` against one shared web lab, scored on ground truth.

    TOPICCRAWL_DATA_DIR=/path/to/data python -m bench.learned_focus --corpus wikispeedia --out out/learned-wiki
    python -m bench.learned_focus --corpus generated --out out/learned-generated        # 台风灾害
    python -m bench.learned_focus --corpus libreoffice --out out/learned-lo             # scalc-zh, when present

Corpora: ``wikispeedia`` (``wikispeedia:DIR/wikispeedia``, the topics ``bench/topics/wikispeedia/*.toml``,
written before any crawl and used unchanged), ``generated`` (``generated:zh-disaster?pages=20000&seed=1``,
topic ``台风灾害``), ``libreoffice`` (``htmltree:TEXT?opaque=1&labeldepth=1`` over Debian's
libreoffice-help-zh-cn in the cache, topic ``bench/topics/scalc-zh.toml``; skipped with a message
when it has not been fetched with ``scripts/fetch-libreoffice-help.sh``). ``--web`` overrides the spec.
``--topics 'bench/topics/wikispeedia-dev/*.toml'`` crawls the development topics instead: written
before any crawl like the evaluation ones, they are where the learned strategy's rules are chosen
(docs/learned.md), so that the evaluation topics are never tuned on; ``--corpus libreoffice
--topics 'bench/topics/libreoffice-dev/*.toml'`` is the real Chinese development set (the help's
other modules).

Variants (``--variants``): ``bfs``, ``bestfirst``, ``wl`` (the focused spider's strategy ``wl``),
``learned`` (the topic's words), ``learned-examples`` (a temporary copy of the topic file without
``[words]`` and ``beta`` -- same name, labels and seeds -- plus ``-a examples=truth:5``; if the topic
loader refuses a file with neither words nor examples, the copy lists that same pick as its
``examples``, and results.md says so), ``learned-both`` (the topic's words *and* ``-a examples=truth:5``,
the same pick), ``oracle`` and ``oracle-path`` (the stronger bound: truly relevant targets first,
then the fewest links to a relevant page not fetched yet; docs/benchmarks.md, "A stronger oracle").
Repetition r sets the variant's RNG seed setting to r (``TOPICCRAWL_WL_SEED``,
``TOPICCRAWL_LEARNED_SEED``; r = 0 is the default configuration; ``--first-seed N`` numbers the
repetitions from N, for crawls that must not repeat an earlier session's seeds); nothing else changes between
repetitions (the ``truth:5`` pick has a fixed seed), so the variants without a seed setting repeat
identically up to Scrapy's concurrency timing (16 responses in flight arrive in varying order).
``--settings NAME=VALUE`` / ``--args NAME=VALUE`` (repeatable) go to every run.

Reported per topic and averaged over topics: target recall and true harvest rate at 100 / 250 /
500 / 1,000 pages (a crawl whose frontier ran dry keeps its last value), the ratio of the mean
recall to the oracle's at 100 and 250 (and to ``oracle-path``'s, when it is crawled), the
self-assessed harvest rate (Accuracy = LP/DP, and the page classifier's mean P(relevant) when on)
against the true one at the last checkpoint, example pages fetched, pages/s (DP / Scrapy's elapsed
time) next to a plain Scrapy BFS spider run on the same lab in the same session
(``--plain-repeats N`` runs it N times), and each run's close reason. A Friedman test over topics
(blocks) compares the variants' mean recall at 250 pages (or the largest checkpoint below it).
With ``bestfirst`` among the variants, every other variant (the oracles aside) is judged against
it per (topic, checkpoint): below or above beyond two standard errors of the difference of the mean
recalls, the target "never below best-first beyond noise" (:func:`against_bestfirst`).
Writes ``results.md``, ``results.json``, ``recall.png`` (recall curves, one panel per topic) and ``ratio.png`` (ratio to
the oracle) into ``--out``; runs go to ``--out/runs/<topic>/<variant>-<rep>/`` and ``--resume``
reuses those that finished under the same command (a run made with other ``--pages``, settings,
arguments or web runs again); Ctrl-C stops the session, keeping the finished runs.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys
import time
from bisect import bisect_right
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from bench.strategies import (
    SEED_SETTINGS,
    CrawlFailed,
    check_labels,
    check_passed_through,
    checkpoints_for,
    crawl_command,
    ended,
    ended_cell,
    load_run,
    name_value,
    run_plain,
    run_strategy,
    writable_folder,
)
from topiccrawl.scoring.metrics import mean_sd
from topiccrawl.scoring.topic import Topic, TopicError, load_topic

REPO = Path(__file__).resolve().parent.parent
RATIO_AT = (100, 250)
FRIEDMAN_AT = 250
EXAMPLES = "truth:5"


@dataclass(frozen=True)
class Variant:
    """One compared configuration: a strategy, the setting its repetitions vary (empty: none, the
    run is deterministic up to Scrapy's concurrency timing), spider arguments, and whether the
    topic keeps its words and β."""

    strategy: str
    seed_setting: str = ""
    args: tuple[str, ...] = ()
    words: bool = True


VARIANTS = {
    "bfs": Variant("bfs"),
    "bestfirst": Variant("bestfirst"),
    "wl": Variant("wl", SEED_SETTINGS["wl"]),
    "learned": Variant("learned", SEED_SETTINGS["learned"]),
    "learned-examples": Variant("learned", SEED_SETTINGS["learned"], (f"examples={EXAMPLES}",), words=False),
    "learned-both": Variant("learned", SEED_SETTINGS["learned"], (f"examples={EXAMPLES}",)),
    "oracle": Variant("oracle"),
    "oracle-path": Variant("oracle-path"),
}
DEFAULT_VARIANTS = "bfs,bestfirst,wl,learned,learned-examples,oracle"

LO_TEXT = "libreoffice-help-zh-cn/usr/share/libreoffice/help/zh-CN/text"
#: corpus -> (title, lab spec with {data}/{lo} filled in, default --topics)
CORPORA = {
    "wikispeedia": ("Wikispeedia", "wikispeedia:{data}/wikispeedia", "bench/topics/wikispeedia/*.toml"),
    "generated": ("generated zh web (synthetic)", "generated:zh-disaster?pages=20000&seed=1", "台风灾害"),
    "libreoffice": ("LibreOffice help zh-CN", "htmltree:{lo}?opaque=1&labeldepth=1", "bench/topics/scalc-zh.toml"),
}


# -- pure helpers ---------------------------------------------------------------------------------

def friedman_checkpoint(checkpoints: list[int]) -> int:
    """:data:`FRIEDMAN_AT` when measured, else the largest checkpoint below it (else the first)."""
    below = [c for c in checkpoints if c <= FRIEDMAN_AT]
    return max(below) if below else checkpoints[0]


def value_at(curve: list[tuple], dp: int, idx: int) -> float | None:
    """Column ``idx`` of the last row of ``curve`` (rows ``(dp, ...)`` by increasing dp) with
    ``row[0] <= dp``: the value at ``dp``, or the final one when the crawl ended earlier. None
    when no page was counted by then."""
    i = bisect_right([row[0] for row in curve], dp)
    return curve[i - 1][idx] if i else None


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def mean_ranks(blocks: list[dict[str, float]], variants: list[str]) -> dict[str, float]:
    """Mean rank of each variant over the blocks (1 = highest value; ties share their mean rank)."""
    from scipy.stats import rankdata

    ranks = [rankdata([-b[v] for v in variants]) for b in blocks]
    return {v: statistics.fmean(float(r[i]) for r in ranks) for i, v in enumerate(variants)}


def friedman(blocks: list[dict[str, float | None]], variants: list[str]) -> dict:
    """Friedman test over complete blocks (scipy.stats.friedmanchisquare) and the mean ranks, as in
    bench/wl_tables.py. ``statistic``/``p`` are None with fewer than 3 variants or 2 blocks."""
    from scipy.stats import friedmanchisquare

    complete = [b for b in blocks if all(b.get(v) is not None for v in variants)]
    out = {"blocks": len(complete), "statistic": None, "p": None,
           "mean_rank": mean_ranks(complete, variants) if complete else {}}
    if len(variants) >= 3 and len(complete) >= 2:
        stat, p = friedmanchisquare(*[[b[v] for b in complete] for v in variants])
        out["statistic"] = None if math.isnan(stat) else float(stat)
        out["p"] = None if math.isnan(p) else float(p)
    return out


def plot_name(name: str) -> str:
    """A topic name for a plot: matplotlib's bundled fonts have no CJK glyphs, so a Chinese name
    becomes its ASCII alias (``typhoon``), or ``topic`` (as the crawl's own harvest.png does)."""
    from topiccrawl.scoring.text import has_cjk
    from topiccrawl.scoring.topic import ALIASES

    if not has_cjk(name):
        return name
    return next((alias for alias, target in ALIASES.items() if target == name), "topic")


def _toml_value(value) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


def topic_without_words(topic: Topic, examples: list[str] | None = None) -> str:
    """TOML of a copy of ``topic`` without ``[words]`` and ``beta``: same name, language,
    description, labels and seeds (``seed_file`` entries inlined); ``examples`` replaces the topic's."""
    examples = list(topic.examples) if examples is None else examples
    fields = {"name": topic.name, "language": topic.language, "description": topic.description,
              "labels": sorted(topic.labels), "seeds": list(topic.seeds), "examples": examples,
              "examples_dir": topic.examples_dir, "counter_examples": list(topic.counter_examples)}
    lines = [f"# {topic.path} without [words] and beta (bench/learned_focus.py, variant learned-examples)"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in fields.items() if v]
    return "\n".join(lines) + "\n"


def truth_examples(spec: str, labels, n: int, seed: int = 1) -> list[str]:
    """The pages ``-a examples=truth:N`` picks (``Corpus.truth_sample`` with seed 1)."""
    from topiccrawl.weblab.corpus import open_corpus

    return open_corpus(spec).truth_sample(labels, n, seed)


def resolve_topics(spec: str) -> list[str]:
    """``--topics``: comma-separated topic files, globs (relative to the working directory, else to
    the repository) or shipped topic names, in order; files become absolute paths (crawls run in the
    repository)."""
    found: list[str] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        matches = sorted(glob.glob(part)) or sorted(glob.glob(str(REPO / part)))
        found += [str(Path(m).resolve()) for m in matches] if matches else [part]
    return list(dict.fromkeys(found))


# -- running --------------------------------------------------------------------------------------

@dataclass
class Job:
    topic: str  # name for display and folders
    variant: str
    rep: int
    topic_arg: str  # the -a topic= value
    settings: tuple[str, ...]
    args: tuple[str, ...]
    out: Path


def plan(topics: dict[str, tuple[str, str]], variants: list[str], repeats: int, settings: list[str],
         args: list[str], out: Path, first: int = 0) -> list[Job]:
    """Every (rep, topic, variant) run, repetitions outermost so a partial session has whole reps.
    ``topics``: name -> (topic argument, topic argument without words); repetitions are numbered
    ``first`` .. ``first + repeats - 1`` (the seed and the folder name)."""
    jobs = []
    for rep in range(first, first + repeats):
        for name, (with_words, without_words) in topics.items():
            for v in variants:
                var = VARIANTS[v]
                seed = (f"{var.seed_setting}={rep}",) if var.seed_setting else ()
                jobs.append(Job(name, v, rep, with_words if var.words else without_words,
                                seed + tuple(settings), var.args + tuple(args), out / "runs" / name / f"{v}-{rep}"))
    return jobs


#: the prefix of the temporary folder of a session's topic copies (runs made before the eighty-first
#: session name one; it was deleted after the session)
TOPIC_COPIES = "learned-focus-topics-"
#: the folder under --out holding the topics' copies without words (kept, so that a run's
#: command.json can be run again as recorded)
COPIES_DIR = "topics-without-words"


def same_run(folder: Path, command: list[str]) -> bool:
    """Whether the run in ``folder`` (its ``command.json``) was made by ``command``, but for what
    changes between sessions of one plan: the lab's port and the topic copy's folder."""
    try:
        old = json.loads((folder / "command.json").read_text(encoding="utf-8"))["command"]
    except (OSError, ValueError, KeyError, TypeError):
        return False

    def plain(cmd: list[str]) -> list[str]:
        out = []
        for x in cmd[1:]:  # the scrapy executable aside
            if x.startswith("TOPICCRAWL_WEB_PROXY="):
                x = "TOPICCRAWL_WEB_PROXY="
            elif x.startswith("topic=") and (TOPIC_COPIES in x or Path(x[6:]).parent.name == COPIES_DIR):
                x = "topic=" + Path(x[6:]).name
            out.append(x)
        return out

    return plain(old) == plain(command)


def execute(jobs: list[Job], spec: str, proxy: str, pages: int, n_jobs: int, resume: bool) -> tuple[list, list]:
    """Run the jobs (``n_jobs`` at a time); returns (results, failures). With ``resume`` a run whose
    folder holds its stats and the same command is reused, unless it was stopped (Ctrl-C); one made
    otherwise (other ``--pages``, ``--settings``, ``--args``, corpus) runs again. Ctrl-C stops the session: no queued crawl
    starts (those running stop with the terminal's Ctrl-C), the finished runs stay for ``--resume``."""
    results, failures = [], []

    def one(job: Job):
        strategy = VARIANTS[job.variant].strategy
        if resume and (job.out / "stats.json").exists():
            command = crawl_command(spec, proxy, job.topic_arg, strategy, pages, job.out, "focused", job.settings,
                                    job.args)
            done = load_run(job.out, strategy) if same_run(job.out, command) else None
            if done is not None and done["finish_reason"] != "shutdown":
                return job, done, True
            why = "was stopped (Ctrl-C)" if done is not None else ("was made by another command (pages, settings, "
                                                                     "arguments or web)")
            print(f"{job.topic} {job.variant} rep {job.rep}: its run in {job.out} {why}: run again", file=sys.stderr,
                  flush=True)
        return job, run_strategy(spec, proxy, job.topic_arg, strategy, pages, job.out, "focused", job.settings,
                                 job.args), False

    t0 = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=max(1, n_jobs))
    try:
        futures = {pool.submit(one, j): j for j in jobs}
        for k, fut in enumerate(as_completed(futures), 1):
            job = futures[fut]
            try:
                _, res, reused = fut.result()
            except CrawlFailed as err:
                failures.append({"topic": job.topic, "variant": job.variant, "rep": job.rep, "error": str(err)[-1500:]})
                print(f"[{k}/{len(jobs)}] {job.topic} {job.variant} rep {job.rep}: FAILED\n{err}", file=sys.stderr)
                continue
            res.update(topic=job.topic, variant=job.variant, rep=job.rep, dir=str(job.out))
            results.append(res)
            recall = res["curve"][-1][2] if res["curve"] else 0.0
            pps = f"{res['pages_per_s']:.0f} pages/s" if res["pages_per_s"] else "? pages/s"
            print(f"[{k}/{len(jobs)} {time.monotonic() - t0:.0f} s] {job.topic} {job.variant} rep {job.rep}: "
                  f"DP {res['dp']}, recall {recall:.3f}, {pps}, {ended(res)}{' (reused)' if reused else ''}",
                  file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)  # the crawls running got the terminal's Ctrl-C too
        print(f"stopped (Ctrl-C) after {len(results)} of {len(jobs)} runs: the finished ones are kept under "
              "--out/runs; --resume goes on from them", file=sys.stderr)
        raise SystemExit(130) from None  # the shell's status for a Ctrl-C
    pool.shutdown(wait=True)
    return results, failures


# -- summaries ------------------------------------------------------------------------------------

def summarise(results: list[dict], topics: list[str], variants: list[str], checkpoints: list[int]) -> dict:
    """Per (topic, variant): mean/sd cells and values of every reported quantity; averages over topics."""
    last = checkpoints[-1]
    per: dict[str, dict[str, dict]] = {}
    for t in topics:
        per[t] = {}
        for v in variants:
            runs = sorted((r for r in results if r["topic"] == t and r["variant"] == v), key=lambda r: r["rep"])
            s: dict = {"n": len(runs), "runs": runs}
            for c in checkpoints:
                s[f"recall@{c}"] = [value_at(r["curve"], c, 2) for r in runs]
                s[f"harvest@{c}"] = [value_at(r["curve"], c, 1) for r in runs]
            s["true@last"] = s[f"harvest@{last}"]
            s["accuracy@last"] = [value_at(r["self_curve"], last, 1) for r in runs]
            s["expected@last"] = [value_at(r["self_curve"], last, 2) for r in runs]
            s["acc_err"] = [abs(a - b) if a is not None and b is not None else None
                            for a, b in zip(s["accuracy@last"], s["true@last"])]
            s["exp_err"] = [abs(a - b) if a is not None and b is not None else None
                            for a, b in zip(s["expected@last"], s["true@last"])]
            s["examples"] = [r["examples_fetched"] for r in runs]
            s["pages_per_s"] = [r["pages_per_s"] for r in runs]
            s["total_relevant"] = sorted({r["total_relevant"] for r in runs})
            per[t][v] = s
        for key, bound in (("ratio", "oracle"), ("path_ratio", "oracle-path")):
            oracle = per[t].get(bound)
            for v in variants:
                for c in RATIO_AT:
                    if c in checkpoints and (oracle or key == "ratio"):
                        per[t][v][f"{key}@{c}"] = ratio(mean(per[t][v][f"recall@{c}"]),
                                                        mean(oracle[f"recall@{c}"]) if oracle else None)
    return per


def averaged(per: dict, topics: list[str], variants: list[str], checkpoints: list[int]) -> dict:
    """Mean over topics of each topic's mean (ratios: mean of the per-topic ratios; errors: also the
    largest topic mean)."""
    avg: dict[str, dict] = {}
    for v in variants:
        a: dict = {}
        for c in checkpoints:
            for k in ("recall", "harvest"):
                a[f"{k}@{c}"] = mean(mean(per[t][v][f"{k}@{c}"]) for t in topics)
        for c in RATIO_AT:
            if c in checkpoints:
                a[f"ratio@{c}"] = mean(per[t][v].get(f"ratio@{c}") for t in topics)
                if "oracle-path" in variants:
                    a[f"path_ratio@{c}"] = mean(per[t][v].get(f"path_ratio@{c}") for t in topics)
        for k in ("acc_err", "exp_err", "accuracy@last", "expected@last", "true@last", "examples", "pages_per_s"):
            a[k] = mean(mean(per[t][v][k]) for t in topics)
        for k in ("acc_err", "exp_err"):
            worst = [mean(per[t][v][k]) for t in topics]
            a[f"{k}_missing"] = sum(w is None for w in worst)  # topics none of whose crawls gave the figure
            a["topics"] = len(topics)
            worst = [w for w in worst if w is not None]
            a[f"{k}_max"] = max(worst) if worst else None
        avg[v] = a
    return avg


def beyond_noise(before: list[float], after: list[float]) -> tuple[float, float, str]:
    """The difference of the means (after − before), two standard errors of it (each side's sample
    sd over √n; at least two values a side) and the verdict ``"lower"`` / ``"higher"`` beyond them,
    else ``"within"``."""
    diff = statistics.fmean(after) - statistics.fmean(before)
    two_se = 2 * math.sqrt(statistics.variance(before) / len(before) + statistics.variance(after) / len(after))
    return diff, two_se, "lower" if diff < -two_se else "higher" if diff > two_se else "within"


def against_bestfirst(per: dict, topics: list[str], variants: list[str], checkpoints: list[int]) -> list[dict]:
    """Each variant other than best-first and the oracles against best-first, per (topic, checkpoint):
    the two mean recalls, their difference, two standard errors of it (each side's sample sd over
    √n) and the verdict ``"below"`` / ``"above"`` when the difference is beyond them, else
    ``"within"`` (the target "never below best-first beyond noise", docs/benchmarks.md). Pairs where
    either side has fewer than two crawls are left out: they have no spread to judge by."""
    if "bestfirst" not in variants:
        return []
    rows = []
    for v in variants:
        if v == "bestfirst" or v.startswith("oracle"):
            continue
        for t in topics:
            for c in checkpoints:
                a = [x for x in per[t][v][f"recall@{c}"] if x is not None]
                b = [x for x in per[t]["bestfirst"][f"recall@{c}"] if x is not None]
                if len(a) < 2 or len(b) < 2:
                    continue
                diff, two_se, side = beyond_noise(b, a)
                verdict = {"lower": "below", "higher": "above"}.get(side, side)
                rows.append({"variant": v, "topic": t, "at": c, "mean": statistics.fmean(a),
                             "bestfirst": statistics.fmean(b), "diff": diff, "two_se": two_se, "verdict": verdict})
    return rows


def against_bestfirst_lines(rows: list[dict]) -> list[str]:
    """The pairs below best-first beyond noise, per variant, and how many of the pairs judged."""
    if not rows:
        return ["Not judged: best-first not crawled, or fewer than two crawls a side."]
    lines = ["Difference of mean recall against best-first per (topic, checkpoint), judged against two "
             "standard errors of the difference (each side's sd over √n); pairs with fewer than two crawls "
             "a side are not judged.", ""]
    for v in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == v]
        below = [r for r in mine if r["verdict"] == "below"]
        above = sum(r["verdict"] == "above" for r in mine)
        lines.append(f"* `{v}`: below beyond noise in {len(below)} of {len(mine)} pairs, above in {above}"
                     + (":" if below else "."))
        lines += [f"  {r['topic']} at {r['at']} pages: {r['mean']:.3f} against {r['bestfirst']:.3f} "
                  f"({r['diff']:+.3f}; two standard errors {r['two_se']:.3f})" for r in below]
    return lines


def _f(x, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ratio_columns(checkpoints: list[int], variants: list[str]) -> list[tuple[str, int, str]]:
    """(key, checkpoint, heading) of the ratio columns: to the oracle, and to ``oracle-path`` when crawled."""
    ratios = [c for c in RATIO_AT if c in checkpoints]
    cols = [("ratio", c, f"×oracle@{c}") for c in ratios]
    if "oracle-path" in variants:
        cols += [("path_ratio", c, f"×oracle-path@{c}") for c in ratios]
    return cols


def topic_table(per_t: dict, variants: list[str], checkpoints: list[int], plain: float | None) -> list[str]:
    last = checkpoints[-1]
    ratios = _ratio_columns(checkpoints, variants)
    head = (["variant", "n"] + [f"recall@{c}" for c in checkpoints] + [f"harvest@{c}" for c in checkpoints]
            + [h for _, _, h in ratios]
            + [f"Accuracy@{last}", f"P̄@{last}", f"true harvest@{last}", "abs(Accuracy − true)", "abs(P̄ − true)",
               "examples fetched", "pages/s", "× plain", "ended"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in variants:
        s = per_t[v]
        pps = mean(s["pages_per_s"])
        cells = ([v, str(s["n"])] + [mean_sd(s[f"recall@{c}"]) for c in checkpoints]
                 + [mean_sd(s[f"harvest@{c}"]) for c in checkpoints] + [_f(s.get(f"{k}@{c}"), 2) for k, c, _ in ratios]
                 + [_missing(mean_sd(s[k]), s[k].count(None), len(s[k]))
                    for k in ("accuracy@last", "expected@last", "true@last", "acc_err", "exp_err")]
                 + [mean_sd(s["examples"], 1), mean_sd(s["pages_per_s"], 0),
                    _f(ratio(pps, plain), 2), ended_cell(s["runs"])])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _missing(cell: str, missing: int, total: int, what: str = "crawl") -> str:
    """A table cell, and how many of its ``total`` ``what`` (crawls, topics) lack the figure when
    some do but not all (a crawl whose page classifier never gave an estimate): a mean over the
    others would hide them."""
    if not 0 < missing < total:
        return cell
    return f"{cell} ({missing} of {total} {what}s without)"


def average_table(avg: dict, variants: list[str], checkpoints: list[int], plain: float | None) -> list[str]:
    ratios = _ratio_columns(checkpoints, variants)
    head = (["variant"] + [f"recall@{c}" for c in checkpoints] + [f"harvest@{c}" for c in checkpoints]
            + [h for _, _, h in ratios]
            + ["abs(Accuracy − true) mean / worst topic", "abs(P̄ − true) mean / worst topic", "examples fetched",
               "pages/s", "× plain"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in variants:
        a = avg[v]
        cells = ([v] + [_f(a[f"recall@{c}"]) for c in checkpoints] + [_f(a[f"harvest@{c}"]) for c in checkpoints]
                 + [_f(a.get(f"{k}@{c}"), 2) for k, c, _ in ratios]
                 + [_missing(f"{_f(a[k])} / {_f(a[f'{k}_max'])}", a[f"{k}_missing"], a["topics"], "topic")
                    for k in ("acc_err", "exp_err")]
                 + [_f(a["examples"], 1), _f(a["pages_per_s"], 0), _f(ratio(a["pages_per_s"], plain), 2)])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def friedman_lines(result: dict, variants: list[str], at: int) -> list[str]:
    if not result["mean_rank"]:
        return [f"Friedman test on recall@{at}: no topic with a result for every variant."]
    order = sorted(variants, key=lambda v: result["mean_rank"][v])
    head = (f"Friedman test over {result['blocks']} topic(s) (blocks; each topic's mean over repetitions) of "
            f"recall@{at}: ")
    if result["statistic"] is None:
        head += "not computable (needs 3+ variants and 2+ topics, and not all values tied)."
    else:
        head += f"χ² = {result['statistic']:.2f}, p = {result['p']:.3g}."
    return [head, "", "| variant | " + " | ".join(order) + " |", "|---|" + "---|" * len(order),
            "| mean rank (1 = highest recall) | " + " | ".join(f"{result['mean_rank'][v]:.2f}" for v in order) + " |"]


def plot_recall(per: dict, topics: list[str], variants: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ncols = min(5, len(topics))
    nrows = math.ceil(len(topics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.8 * nrows), dpi=110, squeeze=False)
    for ax, t in zip(axes.flat, topics):
        for v in variants:
            runs = [r for r in per[t][v]["runs"] if r["curve"]]
            if not runs:
                continue
            n = min(len(r["curve"]) for r in runs)
            x = [p[0] for p in runs[0]["curve"][:n]]
            ax.plot(x, np.mean([[p[2] for p in r["curve"][:n]] for r in runs], axis=0), label=v, lw=1.2)
        ax.set_title(plot_name(t), fontsize=9)
        ax.set_xlabel("pages fetched", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(topics):]:
        ax.axis("off")
    axes.flat[0].set_ylabel("target recall (mean over reps)", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(variants), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    fig.savefig(path)
    plt.close(fig)


def plot_ratio(per: dict, avg: dict, topics: list[str], variants: list[str], checkpoints: list[int], path: Path,
               title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ratios = [c for c in RATIO_AT if c in checkpoints]
    shown = [v for v in variants if v != "oracle"]
    if not ratios or not shown:
        path.unlink(missing_ok=True)  # an earlier session's figure is not of these crawls
        return
    labels = [plot_name(t) for t in topics] + ["mean"]
    x = np.arange(len(labels))
    width = 0.8 / len(shown)
    fig, axes = plt.subplots(len(ratios), 1, figsize=(max(6, 0.9 * len(labels) + 2), 2.8 * len(ratios)), dpi=110,
                             squeeze=False)
    for ax, c in zip(axes[:, 0], ratios):
        top = 1.0
        for i, v in enumerate(shown):
            vals = [per[t][v].get(f"ratio@{c}") for t in topics] + [avg[v].get(f"ratio@{c}")]
            vals = [0.0 if y is None else y for y in vals]
            ax.bar(x + (i - (len(shown) - 1) / 2) * width, vals, width, label=v)
            top = max(top, *vals)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylim(0, 1.25 * top)
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(f"recall@{c} / oracle's", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=len(shown), loc="upper left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


@dataclass
class Session:
    """One evaluation session: its options, topics, measurements and summaries."""

    args: argparse.Namespace
    spec: str
    title: str
    variants: list[str]
    checkpoints: list[int]
    topics: dict[str, Topic] = field(default_factory=dict)
    workaround: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    sha: list[str] = field(default_factory=list)
    plain: float = 0.0
    plain_runs: list[float] = field(default_factory=list)
    plain_ci: float = 0.0
    lab_pages: int = 0
    seconds: float = 0.0
    per: dict = field(default_factory=dict)
    avg: dict = field(default_factory=dict)
    friedman: dict = field(default_factory=dict)
    friedman_at: int = FRIEDMAN_AT
    vs_bestfirst: list = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(self.topics)


# -- main -----------------------------------------------------------------------------------------

def lo_text_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    return Path(os.environ.get("TOPICCRAWL_CACHE") or Path.home() / ".cache" / "topiccrawl") / LO_TEXT


def corpus_spec(args) -> str | None:
    """The lab spec of ``--corpus`` (``--web`` wins); None (after a message) when the corpus is absent."""
    if args.web:
        return args.web
    _, spec, _ = CORPORA[args.corpus]
    if args.corpus == "wikispeedia":
        if not args.data_dir:
            raise SystemExit("--corpus wikispeedia needs the data folder: --data-dir DIR or TOPICCRAWL_DATA_DIR")
        if not (Path(args.data_dir) / "wikispeedia").is_dir():
            raise SystemExit(f"no folder {Path(args.data_dir) / 'wikispeedia'} (docs/real-corpora.md)")
        return spec.format(data=args.data_dir)
    if args.corpus == "libreoffice":
        text = lo_text_dir(args.lo_dir)
        if not text.is_dir():
            print(f"skipping --corpus libreoffice: {text} is absent (fetch it with "
                  "scripts/fetch-libreoffice-help.sh, or pass --lo-dir)", file=sys.stderr)
            return None
        return spec.format(lo=text)
    return spec


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=tuple(CORPORA), default="wikispeedia")
    ap.add_argument("--web", help="lab spec overriding the corpus's (e.g. another generated seed)")
    ap.add_argument("--topics", help="comma-separated topic files, globs or shipped names (default: the corpus's)")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"from {', '.join(VARIANTS)}")
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="number the repetitions (their seed setting and folder) from N (default 0)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"),
                    help="folder holding wikispeedia/ (default: $TOPICCRAWL_DATA_DIR)")
    ap.add_argument("--lo-dir", help=f"LibreOffice help text/ folder (default: $TOPICCRAWL_CACHE/{LO_TEXT})")
    ap.add_argument("--jobs", type=int, default=1,
                    help="crawls at once (default 1; more make the pages/s columns incomparable)")
    ap.add_argument("--settings", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                    help="a setting for every run (repeatable)")
    ap.add_argument("--args", dest="spider_args", action="append", default=[], type=name_value,
                    metavar="NAME=VALUE", help="a spider argument for every run (repeatable)")
    ap.add_argument("--resume", action="store_true",
                    help="reuse runs under --out/runs that wrote stats.json with the same command")
    ap.add_argument("--plain-repeats", type=int, default=1,
                    help="runs of the plain Scrapy spider after the crawls (the × plain columns use their mean)")
    args = ap.parse_args(argv)
    variants = list(dict.fromkeys(v.strip() for v in args.variants.split(",") if v.strip()))
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise SystemExit(f"unknown variant {unknown[0]!r}: choose from {', '.join(VARIANTS)}" if unknown else
                         f"--variants names none: choose from {', '.join(VARIANTS)}")
    # what a chosen variant sets itself (its examples, its repetition's seed) labels its rows too
    own_args = {a.partition("=")[0]: f"the variant {v} (it sets it)" for v in variants for a in VARIANTS[v].args}
    own_settings = {VARIANTS[v].seed_setting: "--first-seed (the repetitions' seeds)" for v in variants
                    if VARIANTS[v].seed_setting}
    check_passed_through(args.settings, args.spider_args, {"topic": "--topics", "strategy": "--variants",
                                                          "web": "--corpus or --web"}, "--settings", "--args",
                         (own_args, own_settings))
    if args.pages < 1 or args.repeats < 1 or args.plain_repeats < 1:
        raise SystemExit("--pages, --repeats and --plain-repeats must be >= 1")
    if args.first_seed < 0:
        raise SystemExit("--first-seed must be >= 0")
    spec = corpus_spec(args)
    if spec is None:
        return

    from bench.wl_tables import code_sha1

    ses = Session(args=args, spec=spec, title=CORPORA[args.corpus][0] if not args.web else args.web,
                  variants=variants, checkpoints=checkpoints_for(args.pages))
    topics: dict[str, tuple[str, str]] = {}
    for arg in resolve_topics(args.topics or CORPORA[args.corpus][2]):
        try:
            topic = load_topic(arg)
        except TopicError as err:  # a missing or broken topic file: its one line, no traceback
            raise SystemExit(str(err)) from None
        if topic.name in ses.topics:
            raise SystemExit(f"{arg}: a second topic named {topic.name!r}")
        if not topic.labels:
            raise SystemExit(f"{arg}: the topic has no labels, so no ground truth to evaluate on")
        topics[topic.name] = (arg, "")
        ses.topics[topic.name] = topic
    check_labels(spec, ses.topics.values())
    args.out = args.out.resolve()  # the crawls run in the repository
    writable_folder(args.out)
    copies = args.out / COPIES_DIR
    copies.mkdir(exist_ok=True)
    for k, (name, topic) in enumerate(ses.topics.items()):
        copy = copies / f"{k}-{Path(topic.path).stem}.toml"
        copy.write_text(topic_without_words(topic), encoding="utf-8")
        if any(not VARIANTS[v].words for v in variants):
            try:
                load_topic(str(copy))
            except TopicError as err:
                # the topic loader wants examples in a file without [words], even when the
                # crawl gets them as -a examples=truth:N: the copy then lists that same pick
                ses.workaround.append(f"{topic.name}: {err}")
                print(f"warning: {err}; the copy lists the {EXAMPLES} pick as its examples", file=sys.stderr)
                copy.write_text(topic_without_words(topic, truth_examples(
                    spec, topic.labels, int(EXAMPLES.split(":")[1]))), encoding="utf-8")
                load_topic(str(copy))
        topics[name] = (topics[name][0], str(copy))
    jobs = plan(topics, variants, args.repeats, args.settings, args.spider_args, args.out, args.first_seed)
    ses.sha = [code_sha1()]
    print(f"{len(jobs)} crawls: {len(topics)} topic(s) × {len(variants)} variant(s) × {args.repeats} rep(s), "
          f"{args.pages} pages each, on {spec}", file=sys.stderr, flush=True)
    from topiccrawl.settings import CONCURRENT_ITEMS
    from topiccrawl.weblab.api import WebLab, WebLabError

    t0 = time.monotonic()
    try:
        with WebLab(spec) as lab:
            results, ses.failures = execute(jobs, spec, lab.proxy_url, args.pages, args.jobs, args.resume)
            seeds = list(next(iter(ses.topics.values())).seeds) or lab.info.get("seeds", [])[:5]
            ses.plain_runs = [run_plain(lab.proxy_url, seeds, args.pages) for _ in range(args.plain_repeats)]
            ses.plain = mean(ses.plain_runs)
            ses.plain_ci = run_plain(lab.proxy_url, seeds, args.pages, (f"CONCURRENT_ITEMS={CONCURRENT_ITEMS}",))
            ses.lab_pages = lab.pages
    except WebLabError as err:  # an unknown preset, a missing corpus: the lab's own line
        raise SystemExit(str(err)) from None
    ses.seconds = time.monotonic() - t0
    ses.sha.append(code_sha1())

    names = ses.names
    ses.per = summarise(results, names, variants, ses.checkpoints)
    ses.avg = averaged(ses.per, names, variants, ses.checkpoints)
    ses.friedman_at = friedman_checkpoint(ses.checkpoints)
    ses.friedman = friedman([{v: mean(ses.per[t][v][f"recall@{ses.friedman_at}"]) for v in variants}
                             for t in names], variants)
    ses.vs_bestfirst = against_bestfirst(ses.per, names, variants, ses.checkpoints)
    args.out.mkdir(parents=True, exist_ok=True)
    plot_recall(ses.per, names, variants, args.out / "recall.png", f"{ses.title}: target recall")
    plot_ratio(ses.per, ses.avg, names, variants, ses.checkpoints, args.out / "ratio.png",
               f"{ses.title}: recall relative to the oracle's (1 = oracle)")
    md = report_lines(ses)
    (args.out / "results.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    (args.out / "results.json").write_text(json.dumps(results_json(ses), ensure_ascii=False, indent=1),
                                           encoding="utf-8")
    print("\n".join(md))
    if ses.failures:
        raise SystemExit(f"{len(ses.failures)} crawl(s) failed (results.md lists them)")


def describe_variant(v: str) -> str:
    var = VARIANTS[v]
    parts = [f"`-a strategy={var.strategy}`"] + [f"`-a {a}`" for a in var.args]
    if not var.words:
        parts.append("topic copy without `[words]`/`beta`")
    parts.append(f"rep r: `{var.seed_setting}=r`" if var.seed_setting
                 else "deterministic up to Scrapy's concurrency timing")
    return f"`{v}`: " + ", ".join(parts)


def report_lines(ses: Session) -> list[str]:
    args, names, variants, checkpoints, per = ses.args, ses.names, ses.variants, ses.checkpoints, ses.per
    last = checkpoints[-1]
    changed = len(set(ses.sha)) > 1
    lines = [f"## Learned focus: {ses.title}", "",
             f"Lab `{ses.spec}` ({ses.lab_pages} pages); {len(names)} topic(s); {args.pages} pages per crawl; "
             f"{args.repeats} repetition(s)"
             + (f" (seeds {args.first_seed}–{args.first_seed + args.repeats - 1})" if args.first_seed else "")
             + f"; spider `focused`; {args.jobs} crawl(s) at once; "
             f"session {ses.seconds / 60:.1f} min; code {ses.sha[0]}"
             + (f" at the start, {ses.sha[-1]} at the end (the sources changed during the session)" if changed else "")
             + "."]
    if args.settings or args.spider_args:
        lines[-1] += " Every run: " + ", ".join([f"`-s {s}`" for s in args.settings]
                                                + [f"`-a {a}`" for a in args.spider_args]) + "."
    lines += ["", "Variants:", ""] + [f"* {describe_variant(v)}" for v in variants]
    if ses.workaround:
        lines += ["", f"The topic loader rejected the copies without `[words]` and examples ({ses.workaround[0]}), "
                  f"so each copy lists the pages `{EXAMPLES}` picks as its `examples` (the crawl still gets "
                  f"`-a examples={EXAMPLES}`)."]
    lines += ["", "Recall/harvest at a checkpoint a crawl did not reach (frontier ran dry) are its final values. "
              f"Self-assessed vs true harvest rate at {last} pages: Accuracy = LP/DP (pages with R ≥ β), "
              "P̄ = the page classifier's mean P(relevant) (only when it is on). "
              "×oracle = mean recall / the oracle's mean recall on the same topic (×oracle-path: / "
              "oracle-path's); averages are means over topics of the per-topic means.", ""]
    lines += [f"### Averaged over {len(names)} topic(s)", ""] + average_table(ses.avg, variants, checkpoints, ses.plain)
    lines += ["", "### Friedman test", ""] + friedman_lines(ses.friedman, variants, ses.friedman_at)
    if "bestfirst" in variants:
        lines += ["", "### Against best-first", ""] + against_bestfirst_lines(ses.vs_bestfirst)
    lines += ["", "### Throughput", "",
              f"Plain Scrapy BFS spider (bench/plain_spider.py) on the same lab, same session, {args.pages} pages: "
              f"{mean_sd(ses.plain_runs, 0) if len(ses.plain_runs) > 1 else f'{ses.plain:.0f}'} pages/s with Scrapy's "
              f"defaults ({len(ses.plain_runs)} run(s); the × columns), {ses.plain_ci:.0f} pages/s with the "
              "project's CONCURRENT_ITEMS.", "", "| variant | pages/s | × plain |", "|---|---|---|"]
    for v in variants:
        pps = [p for t in names for p in per[t][v]["pages_per_s"] if p]
        lines.append(f"| {v} | {mean_sd(pps, 0)} | {_f(ratio(mean(pps), ses.plain), 2)} |")
    if args.jobs > 1:
        lines += ["", f"(--jobs {args.jobs}: crawls ran concurrently, so pages/s are lower than alone.)"]
    lines += ["", "![recall curves](recall.png)", ""]
    if any(c in checkpoints for c in RATIO_AT) and any(v != "oracle" for v in variants):  # plot_ratio drew it
        lines += ["![ratio to the oracle](ratio.png)", ""]
    for t in names:
        totals = sorted({x for v in variants for x in per[t][v]["total_relevant"]})
        lines += [f"### {t}", "", f"`{ses.topics[t].path}`; truly relevant pages: "
                  f"{', '.join(map(str, totals)) or '?'}.", ""]
        lines += topic_table(per[t], variants, checkpoints, ses.plain) + [""]
    if ses.failures:
        lines += ["### Failed crawls", ""]
        lines += [f"* {f['topic']} {f['variant']} rep {f['rep']}: {(f['error'].strip().splitlines() or ['?'])[-1]}"
                  for f in ses.failures] + [""]
    return lines


def results_json(ses: Session) -> dict:
    args, checkpoints = ses.args, ses.checkpoints
    keep = ("recall@", "harvest@", "ratio@", "accuracy@last", "expected@last", "true@last", "acc_err", "exp_err",
            "examples", "pages_per_s", "total_relevant", "n")
    per_json = {t: {v: {k: val for k, val in s.items() if k.startswith(keep)} for v, s in ses.per[t].items()}
                for t in ses.names}
    runs = [{"topic": r["topic"], "variant": r["variant"], "rep": r["rep"], "dir": r["dir"], "dp": r["dp"],
             "ended": ended(r), "finish_reason": r["finish_reason"], "frontier_exhausted": r["frontier_exhausted"],
             "examples_fetched": r["examples_fetched"], "pages_per_s": r["pages_per_s"], "wall_s": r["wall_s"],
             "unreliable": r.get("unreliable"),
             "total_relevant": r["total_relevant"],
             "recall": {c: value_at(r["curve"], c, 2) for c in checkpoints},
             "harvest": {c: value_at(r["curve"], c, 1) for c in checkpoints},
             "accuracy": {c: value_at(r["self_curve"], c, 1) for c in checkpoints},
             "expected_harvest": {c: value_at(r["self_curve"], c, 2) for c in checkpoints}}
            for t in ses.names for v in ses.variants for r in ses.per[t][v]["runs"]]
    return {"corpus": args.corpus, "spec": ses.spec, "pages": args.pages, "repeats": args.repeats,
            "first_seed": args.first_seed, "jobs": args.jobs,
            "checkpoints": checkpoints, "settings": args.settings, "spider_args": args.spider_args,
            "variants": {v: {"strategy": VARIANTS[v].strategy, "seed_setting": VARIANTS[v].seed_setting,
                             "args": list(VARIANTS[v].args), "words": VARIANTS[v].words} for v in ses.variants},
            "topics": {t: topic.path for t, topic in ses.topics.items()}, "examples_workaround": ses.workaround,
            "code_sha1": ses.sha, "session_s": round(ses.seconds, 1),
            "plain_pages_per_s": ses.plain, "plain_runs_pages_per_s": ses.plain_runs, "plain_ci_pages_per_s": ses.plain_ci,
            "friedman": {"at": ses.friedman_at, **ses.friedman}, "averaged": ses.avg, "per_topic": per_json,
            "against_bestfirst": ses.vs_bestfirst,
            "runs": runs, "failures": ses.failures}


if __name__ == "__main__":
    main()
