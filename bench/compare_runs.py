"""Paired comparison of two sets of crawls of the same topics (docs/learned.md, "Judging a criterion").

    python -m bench.compare_runs BEFORE AFTER [--variant learned] [--variant-after NAME]

BEFORE and AFTER are ``bench.learned_focus`` output folders (``runs/<topic>/<variant>-<rep>/``).
Per topic, the mean over the repetitions of the target recall at 100 / 250 / 500 / 1,000 pages,
of the mean of those four ("recall@100–1000 mean", a measure no single checkpoint's noise decides)
and of |self-assessed − true harvest rate| at the last page; then, over the topics both folders
hold, the two means, the mean difference, on how many topics AFTER is higher / lower, and the two-sided
Wilcoxon signed-rank p-value of the paired differences (``scipy.stats.wilcoxon``; zero differences
dropped). A criterion for a behaviour change can then ask for a gain *and* a paired test, instead of
a mean over a few topics that the spread between repetitions alone can move by 0.02. Last, per
topic with at least two crawls a side, each measure's difference of the means against two standard
errors of it (each side's sample sd over √n, as ``bench.learned_focus`` judges a variant against
best-first): the test for a topic crawled many times, such as a generated web (ten crawls a side).
A crawl that stopped before 1,000 pages counts only when its frontier ran dry (it keeps its last
recall); one whose budget was smaller is refused in one line, as its later checkpoints would only
repeat its last value.

``--bestfirst`` (BEFORE holding ``bestfirst-<rep>`` runs too) lists the candidate's new losses to
best-first: the (topic, checkpoint) pairs where AFTER is below best-first beyond two standard errors
of the difference while BEFORE is not, and AFTER's mean is lower than BEFORE's by more than
``--margin`` (0.01). A pair where both sides' crawls agree exactly has two standard errors of 0, so
beyond-noise alone would count a pair whose mean did not move; the margin keeps those out.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
from pathlib import Path

from scipy.stats import wilcoxon

from bench.learned_focus import beyond_noise, value_at
from bench.strategies import ended, load_run

CHECKPOINTS = (100, 250, 500, 1000)
MEAN_LABEL = "recall@100–1000 mean"  # the mean of the four checkpoints


def topic_means(root: str, variant: str) -> dict[str, dict]:
    """Topic -> {checkpoint: mean recall, "mean": their mean, "err": mean |self-assessed − true|, "n": runs,
    "runs": {each of those keys: the per-crawl values}}."""
    out = {}
    if not os.path.isdir(root):
        raise SystemExit(f"{root}: no such folder (give a bench.learned_focus --out folder)")
    for tdir in sorted(glob.glob(os.path.join(root, "runs", "*"))):
        runs = [load_run(Path(r), variant) for r in sorted(glob.glob(os.path.join(tdir, f"{variant}-[0-9]*")))
                if os.path.exists(os.path.join(r, "stats.json"))]
        if not runs:
            continue
        short = next((r for r in runs if r["dp"] < CHECKPOINTS[-1] and not r["frontier_exhausted"]), None)
        if short is not None:  # its budget: a later checkpoint would only repeat its last recall
            raise SystemExit(f"{tdir}: a {variant} crawl stopped at {short['dp']} pages ({ended(short)}), before "
                             f"{CHECKPOINTS[-1]}: the comparison is of recall at {', '.join(map(str, CHECKPOINTS))} "
                             "pages (a crawl whose frontier ran dry keeps its last recall)")
        per: dict = {}
        for c in CHECKPOINTS:  # a crawl that stopped before c (its frontier ran dry) keeps its last recall
            per[c] = [value_at(r["curve"], c, 2) or 0.0 for r in runs]
        per["mean"] = [statistics.fmean(v) for v in zip(*(per[c] for c in CHECKPOINTS))]
        # a strategy without the page classifier reports no self-assessed P̄: no error then
        per["err"] = (None if any(r["expected_harvest"] is None for r in runs) else
                      [abs(r["expected_harvest"] - r["curve"][-1][1]) for r in runs])
        res: dict = {k: None if v is None else statistics.fmean(v) for k, v in per.items()}
        res.update(n=len(runs), runs=per)
        out[os.path.basename(tdir)] = res
    return out


def paired(before: dict, after: dict, key) -> dict:
    """Means, mean difference, counts of higher / lower and the Wilcoxon p-value over common topics
    (those where both sides have the measure)."""
    topics = [t for t in before if t in after and before[t][key] is not None and after[t][key] is not None]
    if not topics:
        return {"topics": 0}
    a = [before[t][key] for t in topics]
    b = [after[t][key] for t in topics]
    diffs = [y - x for x, y in zip(a, b)]
    nonzero = [d for d in diffs if abs(d) > 1e-12]
    p = float(wilcoxon(nonzero).pvalue) if len(nonzero) >= 2 else 1.0
    return {"topics": len(topics), "before": statistics.fmean(a), "after": statistics.fmean(b),
            "diff": statistics.fmean(diffs), "higher": sum(d > 1e-12 for d in diffs),
            "lower": sum(d < -1e-12 for d in diffs), "p": p}


def spread(before: dict, after: dict, topic: str, key) -> dict | None:
    """One topic's difference of the mean ``key`` (after − before) against two standard errors of it,
    each side's sample sd over √n, with the verdict ``"lower"`` / ``"higher"`` beyond them, else
    ``"within"``; None where either side has fewer than two crawls or lacks the measure."""
    a, b = before[topic]["runs"][key], after[topic]["runs"][key]
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return None
    diff, two_se, verdict = beyond_noise(a, b)
    return {"diff": diff, "two_se": two_se, "verdict": verdict}


def new_losses(before: dict, after: dict, best: dict, margin: float = 0.01) -> list[dict]:
    """The (topic, checkpoint) pairs AFTER loses to best-first that BEFORE did not: AFTER below
    ``best`` beyond two standard errors, BEFORE not, and AFTER's mean below BEFORE's by more than
    ``margin``. Pairs with fewer than two crawls on any side are not judged."""
    out = []
    for t in (t for t in after if t in before and t in best):
        for c in CHECKPOINTS:
            a, b, bf = before[t]["runs"][c], after[t]["runs"][c], best[t]["runs"][c]
            if min(len(a), len(b), len(bf)) < 2:
                continue
            diff, two_se, side = beyond_noise(bf, b)
            if side != "lower" or beyond_noise(bf, a)[2] == "lower":
                continue
            if statistics.fmean(b) < statistics.fmean(a) - margin:
                out.append({"topic": t, "at": c, "after": statistics.fmean(b), "before": statistics.fmean(a),
                            "bestfirst": statistics.fmean(bf), "diff": diff, "two_se": two_se})
    return out


def _f(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--variant", default="learned", help="variant name in BEFORE (and AFTER)")
    ap.add_argument("--variant-after", help="variant name in AFTER, when it differs")
    ap.add_argument("--bestfirst", action="store_true",
                    help="list AFTER's new losses to BEFORE's bestfirst runs (see above)")
    ap.add_argument("--margin", type=float, default=0.01, help="for --bestfirst (default 0.01)")
    args = ap.parse_args(argv)
    before = topic_means(args.before, args.variant)
    after = topic_means(args.after, args.variant_after or args.variant)
    common = [t for t in before if t in after]
    if not common:
        raise SystemExit(f"no topic has {args.variant} runs in both {args.before} and {args.after}")
    keys = (*CHECKPOINTS, "mean", "err")
    print("| topic | runs | " + " | ".join(f"recall@{c}" for c in CHECKPOINTS)
          + f" | {MEAN_LABEL} | self-assessment error |")
    print("|---|---|" + "---|" * len(keys))
    for t in common:
        cells = " | ".join(f"{_f(before[t][k])} → {_f(after[t][k])}" for k in keys)
        print(f"| {t} | {before[t]['n']} / {after[t]['n']} | {cells} |")
    print()
    print("| measure | topics | before | after | difference | higher / lower after | Wilcoxon p |")
    print("|---|---|---|---|---|---|---|")
    for k in keys:
        s = paired(before, after, k)
        name = {"mean": MEAN_LABEL, "err": "self-assessment error (lower is better)"}.get(k, f"recall@{k}")
        if not s["topics"]:
            print(f"| {name} | 0 | – | – | – | – | – |")
            continue
        print(f"| {name} | {s['topics']} | {s['before']:.3f} | {s['after']:.3f} | {s['diff']:+.3f} | "
              f"{s['higher']} / {s['lower']} | {s['p']:.3f} |")
    judged = {t: [spread(before, after, t, k) for k in keys] for t in common}
    judged = {t: cells for t, cells in judged.items() if any(cells)}
    if judged:
        print()
        print("Per topic, the difference of the means against two standard errors of it (each side's sd over "
              "√n; **lower** / **higher**: beyond them):")
        print()
        print("| topic | " + " | ".join(f"recall@{c}" for c in CHECKPOINTS) + f" | {MEAN_LABEL} | self-assessment error |")
        print("|---|" + "---|" * len(keys))
        for t, cells in judged.items():
            out = ["–" if s is None else f"{s['diff']:+.3f} (2 SE {s['two_se']:.3f})"
                   + ("" if s["verdict"] == "within" else f" **{s['verdict']}**") for s in cells]
            print(f"| {t} | " + " | ".join(out) + " |")
    if args.bestfirst:
        best = topic_means(args.before, "bestfirst")
        if not best:
            raise SystemExit(f"no bestfirst runs in {args.before}")
        lost = new_losses(before, after, best, args.margin)
        print()
        print(f"New losses to best-first (AFTER below it beyond two standard errors, BEFORE not, AFTER's mean "
              f"lower than BEFORE's by more than {args.margin}): {len(lost)}" + (":" if lost else "."))
        for r in lost:
            print(f"* {r['topic']} at {r['at']} pages: {r['before']:.3f} → {r['after']:.3f}, best-first "
                  f"{r['bestfirst']:.3f} ({r['diff']:+.3f}; two standard errors {r['two_se']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
