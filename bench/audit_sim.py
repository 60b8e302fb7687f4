"""Simulated harvest audits of finished crawls (docs/benchmarks.md, "Harvest audit").

    python -m bench.audit_sim OUT [OUT ...] [--audits 2000] [--sizes 20,50,100] [--estimators D,D+W,R+W,R]
        [--seed 0] [--markdown FILE]

OUT: a ``bench.learned_focus --out`` folder (its ``runs/TOPIC/VARIANT-REP/harvest.csv``) or a
crawl's output folder. For every crawl of an offline web with labels, draws ``--audits`` uniform
samples of n counted pages (without replacement) for each n of ``--sizes``, labels them from the
ground truth (a person who labels as the benchmark does), and runs the shipped estimator
(:func:`topiccrawl.scoring.audit.audit_estimate`) on each, for each estimator of
``--estimators`` on the same samples (R+W is what ``scrapy audit`` ships). Per crawl, n and
estimator: how often the audited rate's interval covers the crawl's true harvest rate, how often
the audited rate is within 0.1 of it, the mean absolute error of the audited rate and of the
labels alone, the mean interval width. Prints one table per estimator and n, then the claims
(a)–(d) of docs/benchmarks.md checked as written.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from statistics import mean

from topiccrawl.crawl.audit import read_harvest
from topiccrawl.scoring.audit import AuditError, audit_estimate


def load_crawl(harvest: Path) -> dict | None:
    """Judgements and ground-truth labels of one crawl's counted pages (None without either)."""
    try:
        judged_by_url, hits = read_harvest(harvest.parent)
    except AuditError:
        return None
    if not hits:
        return None
    judged = list(judged_by_url.values())
    truth = [hits.get(url, False) for url in judged_by_url]
    run = harvest.parent
    variant = run.name.rsplit("-", 1)[0] if run.name.rsplit("-", 1)[-1].isdigit() else run.name
    return {"topic": run.parent.name, "variant": variant, "run": str(run), "judged": judged, "truth": truth,
            "true": sum(truth) / len(truth), "self": sum(judged) / len(judged)}


#: the estimators compared (docs/benchmarks.md, "Harvest audit"): name -> keyword arguments
ESTIMATORS = {"D": {"method": "difference", "widen": False}, "D+W": {"method": "difference", "widen": True},
              "R+W": {"method": "tuned", "widen": True}, "R": {"method": "tuned", "widen": False}}


def simulate(crawl: dict, n: int, audits: int, rng: random.Random, estimators: list[str]) -> dict:
    """Per estimator: interval coverage, share within 0.1, mean abs. error (and the labels alone's),
    mean interval width, over ``audits`` samples of n pages (the same samples for every estimator)."""
    judged, truth, true = crawl["judged"], crawl["truth"], crawl["true"]
    n = min(n, len(judged))
    acc = {e: {"coverage": 0, "within": 0, "mae": 0.0, "mae_plain": 0.0, "width": 0.0} for e in estimators}
    for _ in range(audits):
        idx = rng.sample(range(len(judged)), n)
        fs, ys = [judged[i] for i in idx], [truth[i] for i in idx]
        for e in estimators:
            est = audit_estimate(judged, fs, ys, **ESTIMATORS[e])
            a, out = est.audited, acc[e]
            out["coverage"] += a.low is not None and a.low <= true <= a.high
            out["within"] += abs(a.estimate - true) <= 0.1
            out["mae"] += abs(a.estimate - true)
            out["mae_plain"] += abs(est.plain.estimate - true)
            out["width"] += (a.high - a.low) if a.low is not None else 1.0
    return {e: {k: v / audits for k, v in out.items()} for e, out in acc.items()}


def claims(crawls: list[dict], estimator: str, sizes: list[int]) -> tuple[bool, list[str]]:
    """Claims (a)-(c) as written, for one estimator; (b) and (c) per variant over all crawls."""
    lines, ok = [], True
    for n in (m for m in sizes if m in (50, 100)):
        worst = min(crawls, key=lambda c: c["sim"][n][estimator]["coverage"])
        cov = worst["sim"][n][estimator]["coverage"]
        ok &= cov >= 0.90
        lines.append(f"- (a) n = {n}: lowest coverage {cov:.3f} ({worst['corpus']} {worst['topic']}, "
                     f"{worst['variant']}): {'holds' if cov >= 0.90 else 'FAILS'}")
    if 50 not in sizes:
        return ok, lines
    variants: dict[str, list[dict]] = {}
    for c in crawls:
        variants.setdefault(c["variant"], []).append(c)
    for variant, cs in variants.items():
        sims = [c["sim"][50][estimator] for c in cs]
        avg, low = mean(s["within"] for s in sims), min(cs, key=lambda c: c["sim"][50][estimator]["within"])
        lowv = low["sim"][50][estimator]["within"]
        mae, mae_plain = mean(s["mae"] for s in sims), mean(s["mae_plain"] for s in sims)
        b, c_ = avg >= 0.9 and lowv >= 0.8, mae <= mae_plain
        ok &= b and c_
        lines.append(f"- (b) {variant} ({len(cs)} crawls): within 0.1 in {avg:.3f} on average, lowest {lowv:.3f} "
                     f"({low['corpus']} {low['topic']}): {'holds' if b else 'FAILS'}; (c) mean abs. error "
                     f"{mae:.3f} audited, {mae_plain:.3f} labels alone: {'holds' if c_ else 'FAILS'}; "
                     f"mean interval width {mean(s['width'] for s in sims):.3f}")
    return ok, lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="+", type=Path)
    ap.add_argument("--audits", type=int, default=2000)
    ap.add_argument("--sizes", default="20,50,100")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--estimators", default="R+W", help=f"comma-separated, from {', '.join(ESTIMATORS)}")
    ap.add_argument("--markdown", type=Path, help="also write the tables here")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    crawls = []
    for out in args.out:
        for harvest in sorted(out.glob("runs/*/*/harvest.csv")) or sorted(out.glob("harvest.csv")):
            crawl = load_crawl(harvest)
            if crawl is not None:
                crawl["corpus"] = out.name
                crawls.append(crawl)
    if not crawls:
        raise SystemExit("no crawl with a 'judged' column and ground truth under the folders given")
    estimators = [e for e in args.estimators.split(",") if e]
    unknown = set(estimators) - set(ESTIMATORS)
    if unknown:
        raise SystemExit(f"--estimators: unknown {', '.join(sorted(unknown))} (from {', '.join(ESTIMATORS)})")
    rng = random.Random(args.seed)
    lines = []
    for crawl in crawls:
        crawl["sim"] = {n: simulate(crawl, n, args.audits, rng, estimators) for n in sizes}
    for e in estimators:
        for n in sizes:
            lines += [f"\nEstimator {e}, n = {n} labelled pages, {args.audits} simulated audits per crawl\n",
                      "| corpus | topic | variant | pages | true | self-assessed | interval covers | within 0.1 "
                      "| mean abs. error: audited | labels alone | mean interval width |",
                      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for c in crawls:
                r = c["sim"][n][e]
                lines.append(f"| {c['corpus']} | {c['topic']} | {c['variant']} | {len(c['judged'])} | {c['true']:.3f} | "
                             f"{c['self']:.3f} | {r['coverage']:.3f} | {r['within']:.3f} | {r['mae']:.3f} | "
                             f"{r['mae_plain']:.3f} | {r['width']:.3f} |")
    lines.append("\nClaims (docs/benchmarks.md, \"Harvest audit\"):")
    for e in estimators:
        ok, text = claims(crawls, e, sizes)
        lines.append(f"\nEstimator {e}: (a)-(c) {'all hold' if ok else 'do not all hold'}")
        lines += text
    if 50 in sizes:
        off = [c for c in crawls if abs(c["self"] - c["true"]) > 0.1]
        lines.append(f"\n- (d) {len(off)} crawl(s) with a self-assessment off by more than 0.1 (audits of 50 within "
                     f"0.1, per estimator):")
        for c in off:
            within = ", ".join(f"{e} {c['sim'][50][e]['within']:.3f}" for e in estimators)
            lines.append(f"  - {c['corpus']} {c['topic']} {c['variant']}: self-assessed {c['self']:.3f}, true "
                         f"{c['true']:.3f}; {within}")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
