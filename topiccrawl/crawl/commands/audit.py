"""``scrapy audit OUTPUT_DIR``: the true harvest rate of a finished crawl from the pages a person
labelled in its ``audit.csv`` (docs/audit.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topiccrawl.crawl.audit import audit, crawl_folder, write_report
from topiccrawl.scoring.audit import AuditError


def _interval(iv, digits: int = 3) -> str:
    if iv.low is None:
        return f"{iv.estimate:.{digits}f} (one label: no interval)"
    return f"{iv.estimate:.{digits}f} [{iv.low:.{digits}f}, {iv.high:.{digits}f}]"


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "OUTPUT_DIR [--truth] [--confidence 0.95]"

    def short_desc(self) -> str:
        return "Estimate a crawl's true harvest rate from the pages labelled in its audit.csv"

    def long_desc(self) -> str:
        return ("Read OUTPUT_DIR/audit.csv (label 1 = relevant, 0 = not, from the top) and harvest.csv, print "
                "the audited harvest rate with its confidence interval next to the crawl's self-assessed "
                "one, and write OUTPUT_DIR/audit.json (with --truth audit.truth.json; OUTPUT_DIR may be "
                "given as OUTPUT_DIR/audit.csv); see docs/audit.md.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--truth", action="store_true",
                            help="label the audit's pages from the offline web's ground truth (a person simulated)")
        parser.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("expected exactly one OUTPUT_DIR (a crawl's output folder)")
        out = crawl_folder(Path(args[0]))
        try:
            estimate, extra = audit(out, truth=opts.truth, confidence=opts.confidence)
            report = write_report(out, estimate, extra, truth=opts.truth)
        except (AuditError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            self.exitcode = 2
            return
        level = f"{estimate.confidence:.0%}"
        print(f"pages counted: {estimate.pages}, labelled: {estimate.labelled} ({extra['labels']})")
        if extra["unjudged"]:  # e.g. pages counted again from a JOBDIR journal after a forced stop
            print(f"warning: {extra['unjudged']} of the {extra['counted']} counted pages have no judgement in "
                  f"harvest.csv (a page counted again from a JOBDIR journal after a forced stop keeps none, and so "
                  f"do the pages before a resume that started the page classifier) and are "
                  f"left out: every figure here is of the other {estimate.pages}", file=sys.stderr)
        if extra["skipped"]:
            print(f"warning: {extra['skipped']} unlabelled rows lie above labelled ones; label from the top, or the "
                  "labelled pages are not a random sample", file=sys.stderr)
        if extra.get("no_estimate"):  # a classifier crawl without a kept fit: stopped before its first, or
            discarded = extra.get("discarded_refits", 0)  # each refit discarded (it could not rank the pages)
            why = (f"each of the page classifier's {discarded} refits was discarded, none ranking its held-out "
                   "positives above the fetched pages" if discarded
                   else "the page classifier had not fit when the crawl stopped")
            print(f"self-assessed harvest rate: none reported ({why}); the lines here judge the mean of the pages' "
                  f"R(P), which stands in for P(relevant) until a fit is kept: {estimate.self_assessed:.3f}")
        else:
            print(f"self-assessed harvest rate: {estimate.self_assessed:.3f}")
        if "reported_harvest_rate" in extra:  # TOPICCRAWL_CLASSIFIER_ESTIMATE=auc raised it to the bound
            reported = extra["reported_harvest_rate"]
            print(f"the crawl reported {reported:.3f}, the held-out AUC's bound (TOPICCRAWL_CLASSIFIER_ESTIMATE=auc; "
                  f"{reported - estimate.audited.estimate:+.3f} from the audited rate); the lines here judge the "
                  f"mean of its judgements, {estimate.self_assessed:.3f}")
        if estimate.labelled == estimate.pages:  # a census, not a sample: no interval
            whole = (f"each of the {estimate.pages} pages with a judgement" if extra["unjudged"]
                     else "every counted page")
            print(f"audited harvest rate: {estimate.audited.estimate:.3f}, known: {whole} is labelled")
        else:
            print(f"audited harvest rate ({level} interval): {_interval(estimate.audited)}; the crawl's judgement "
                  f"weighed {estimate.weight:.2f}")
            print(f"labels alone ({level} Wilson interval): {_interval(estimate.plain)}")
        bias = estimate.bias
        if bias.low is not None:
            verdict = ("consistent with the labels" if bias.low <= 0.0 <= bias.high else
                       "too high" if bias.low > 0 else "too low")
            print(f"self-assessment − audited: {bias.estimate:+.3f} [{bias.low:+.3f}, {bias.high:+.3f}]: {verdict}")
        if "true_harvest_rate" in extra:
            print(f"true harvest rate (ground truth): {extra['true_harvest_rate']:.3f}")
        print(f"wrote {report}")
        self.exitcode = 0
