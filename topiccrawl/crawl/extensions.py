"""The stats extension: progress lines during the crawl; stats JSON, harvest CSV and plot at close.

Output folder: ``TOPICCRAWL_OUTPUT_DIR`` (``%(name)s`` = spider name, ``%(time)s`` = start time),
files ``stats.json``, ``harvest.csv`` (one row per counted fetch), ``harvest.png`` and ``audit.csv``
(pages for a person to label, docs/audit.md).
"""

from __future__ import annotations

import csv
import json
import logging
import random
import time
from pathlib import Path

from scrapy import signals
from scrapy.exceptions import CloseSpider
from twisted.internet import task

from topiccrawl.crawl.audit import keep_earlier_audit, write_audit
from topiccrawl.crawl.feeds import NO_PAGES, writes_nothing
from topiccrawl.crawl.runtime import TopicComponent, checks_sites

logger = logging.getLogger(__name__)


CSV_FIELDS = ["dp", "lp", "accuracy", "truth_relevant", "truth_harvest_rate", "target_recall", "url", "relevance",
              "expected_harvest", "estimate", "observed", "judged"]


def _plot_name(name: str) -> str:
    """The topic name for a plot title: matplotlib's bundled fonts have no CJK glyphs, so a
    Chinese name becomes its ASCII alias (``typhoon``), or ``topic``."""
    from topiccrawl.scoring.text import has_cjk
    from topiccrawl.scoring.topic import ALIASES

    if not has_cjk(name):
        return name
    return next((alias for alias, target in ALIASES.items() if target == name), "topic")


def _estimate_label(rows: list[dict]) -> str:
    """The legend of the page classifier's self-assessed harvest rate: the mean P, the held-out
    AUC's bound (TOPICCRAWL_CLASSIFIER_ESTIMATE=auc) where every estimate was the bound, or both."""
    rules = {r.get("estimate") for r in rows if r.get("expected_harvest") is not None} - {None}
    if rules == {"auc_bound"}:
        return "held-out AUC's bound (self-assessed, page classifier)"
    if "auc_bound" in rules:
        return "mean P(relevant) or the held-out AUC's bound (self-assessed, page classifier)"
    return "mean P(relevant) (self-assessed, page classifier)"


class TopicStats(TopicComponent):
    def __init__(self, crawler) -> None:
        super().__init__(crawler)
        self.started = time.monotonic()
        self._dp_started = 0  # pages counted before this process (a JOBDIR resume)
        self._cpu_started: float | None = None
        self._loop: task.LoopingCall | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)

    def spider_opened(self, spider) -> None:
        self._cpu_started = time.process_time()
        # the rate counts this process's pages: a JOBDIR resume restored the earlier runs' count
        # when the scheduler opened, before this signal
        self.started = time.monotonic()
        self._dp_started = self.tc.metrics.dp
        stats = self.crawler.stats
        stats.set_value("topiccrawl/strategy", self.tc.config.strategy)
        stats.set_value("topiccrawl/web", self.tc.config.web)
        sites = checks_sites(spider)  # it counts no page and ignores the topic: no topic figures of it
        if not sites:
            stats.set_value("topiccrawl/topic", self.tc.topic.name)
        total = None if sites else self.tc.total_relevant()
        if total is not None:
            stats.set_value("topiccrawl/truth/total_relevant", total)
            if self.tc.truth_held_out:  # a topic tree's node: its descriptive pages count as not relevant
                stats.set_value("topiccrawl/truth/held_out_only", True)
        interval = self.tc.config.progress_interval
        if interval > 0:
            self._loop = task.LoopingCall(self.log_progress)
            self._loop.start(interval, now=False)

    def log_progress(self) -> None:
        m = self.tc.metrics
        minutes = max((time.monotonic() - self.started) / 60, 1e-9)
        publish = getattr(self.crawler.engine, "scheduler", None)
        publish = getattr(publish, "publish_stats", None)  # the project's schedulers have it
        if publish is not None:
            publish()
        frontier = self.crawler.stats.get_value("topiccrawl/frontier_size", 0)
        if checks_sites(self.crawler.spider):  # no DP: sites are what it counts
            stats = self.crawler.stats
            logger.info("Checked %d of %d candidate sites (%d judged relevant), %d pages fetched, frontier %d",
                        stats.get_value("topiccrawl/sites/checked", 0), stats.get_value("topiccrawl/sites/candidates", 0),
                        stats.get_value("topiccrawl/sites/judged_relevant", 0),
                        stats.get_value("topiccrawl/sites/pages_fetched", 0), frontier)
            return
        # a topic without evaluation labels has no true harvest rate, even on an offline web
        rate = m.truth_harvest_rate if self.tc.ground_truth else None
        truth = f", true harvest {rate:.3f}" if rate is not None else ""
        holds = self.crawler.stats.get_value("topiccrawl/dispatch/holds")
        held = (f", dispatch held back {holds}x for {self.crawler.stats.get_value('topiccrawl/dispatch/held_seconds', 0):.1f} s"
                if holds is not None else "")
        logger.info(
            "Crawled %d pages (%.0f pages/min), Accuracy %.3f (LP %d)%s%s, frontier %d%s",
            m.dp, (m.dp - self._dp_started) / minutes, m.accuracy, m.lp, self._classifier_estimate(), truth,
            frontier, held,
        )

    def _classifier_estimate(self) -> str:
        """The page classifier's self-assessed harvest rate for a progress line, beside Accuracy
        (pages with R(P) >= beta, eq. 7): either can be far off (docs/learned.md)."""
        focus = self.tc.focus
        if focus is None:
            return ""
        expected = focus.expected_harvest
        if expected is None:
            why = f"{focus.discarded} refits discarded" if focus.discarded else "not fitted yet"
            return f", page classifier's estimate – ({why})"
        bound = "; the held-out AUC's bound" if focus.bound_applied else ""
        return f", page classifier's estimate {expected:.3f}{f' (unreliable{bound})' if focus.unreliable else ''}"

    def spider_closed(self, spider, reason) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        stats = self.crawler.stats
        if not checks_sites(spider):
            snapshot = self.tc.metrics.snapshot(self.tc.total_relevant())
            for key, value in {**snapshot, **self.tc.learning_stats()}.items():
                stats.set_value(f"topiccrawl/{key}", value)
            self.tc.warn_if_unreliable()
        if self._cpu_started is not None:  # the crawl's own CPU cost, beside Scrapy's elapsed_time_seconds
            stats.set_value("topiccrawl/cpu_seconds", round(time.process_time() - self._cpu_started, 3))
        self.write_outputs(reason)
        self.log_progress()

    def spider_idle(self, spider) -> None:
        # the budget is checked here, when in-flight requests are done, rather than the moment
        # the last page is counted: late responses are then kept for a JOBDIR resume
        if self.tc.budget_spent:
            raise CloseSpider("topiccrawl_max_pages")
        if (not self.tc.metrics.dp and self.tc.config.store == "memory"  # a Redis worker: its crawl's pages, or refused
                and getattr(spider, "topiccrawl_queue", None) == "frontier"):
            # nothing to crawl from: the empty files would replace an earlier run's in the folder (exit 0)
            logger.error("no page was crawled: the seeds gave none (the lines above say why)")
            raise CloseSpider(NO_PAGES)

    # -- files ------------------------------------------------------------------------------------
    def write_outputs(self, reason: str) -> None:
        out = self.tc.output_dir
        if writes_nothing(self.crawler, reason):
            logger.info("stopped before any page (%s): nothing written to %s", reason, out)
            return
        out.mkdir(parents=True, exist_ok=True)
        if checks_sites(self.crawler.spider):  # its verdicts are its feed and sites.jsonl: no page rows, no audit
            self._write_stats(out, reason)
            logger.info("wrote stats.json to %s", out)
            return
        total = self.tc.total_relevant()
        self.tc.final_judgements()
        audit = None
        if self.tc.config.audit_enabled:
            try:  # an audit that cannot be written must not cost the stats and the harvest CSV
                audit = write_audit(out, self.tc.harvest_rows, self.tc.config.audit_pages, random.Random())
            except OSError as exc:
                logger.error("could not write the audit to %s: %s", out, exc)
            if audit is not None:
                self.crawler.stats.set_value("topiccrawl/audit/pages", min(
                    self.tc.config.audit_pages, sum(r.get("judged") is not None for r in self.tc.harvest_rows)))
        else:  # an earlier run's audit here is not of this crawl's pages
            try:
                keep_earlier_audit(out, replace=False)
            except OSError as exc:
                logger.error("could not keep the earlier audit in %s aside: %s", out, exc)
        self._write_stats(out, reason, checkpoints=self.tc.metrics.checkpoints(self.tc.config.checkpoints, total))
        with (out / "harvest.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
            writer.writeheader()
            for row in self.tc.harvest_rows:
                if total:
                    row = {**row, "target_recall": round(row.get("truth_distinct", 0) / total, 6)}
                writer.writerow(row)
        plotted = self.tc.config.plot_enabled and bool(self.tc.harvest_rows)  # no counted page, no plot
        if plotted:
            self._plot(out / "harvest.png", total)
        written = ["stats.json", "harvest.csv"] + (["harvest.png"] if plotted else [])
        logger.info("wrote %s to %s", ", ".join(written + (["audit.csv"] if audit else [])), out)
        if audit is not None:
            logger.info("label the pages of %s (1 on topic, 0 not; from the top, as many as you like), then "
                        "'scrapy audit %s' measures the harvest rate from your labels", audit, out)

    def _write_stats(self, out: Path, reason: str, **extra) -> None:
        """``stats.json``: the crawl's stats, its close reason, and ``extra`` as ``topiccrawl/<key>``."""
        stats = {**self.crawler.stats.get_stats(), "finish_reason": reason,
                 **{f"topiccrawl/{k}": v for k, v in extra.items()}}
        (out / "stats.json").write_text(json.dumps(stats, default=str, ensure_ascii=False, indent=2), encoding="utf-8")

    def _plot(self, path: Path, total: int | None) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = self.tc.harvest_rows
        dp = [r["dp"] for r in rows]
        fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
        ax.plot(dp, [r["accuracy"] for r in rows], label="Accuracy = LP/DP (self-assessed, R ≥ β)")
        if any(r.get("expected_harvest") is not None for r in rows):
            ax.plot(dp, [r.get("expected_harvest") for r in rows],
                    label=_estimate_label(rows))
        if self.tc.ground_truth:
            ax.plot(dp, [r["truth_harvest_rate"] for r in rows], label="true harvest rate (ground truth)")
            if total:
                ax.plot(dp, [r["truth_distinct"] / total for r in rows], label="target recall (ground truth)")
        ax.set_xlabel("pages downloaded (DP)")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{_plot_name(self.tc.topic.name)} · {self.tc.config.strategy} · {self.tc.config.web}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
