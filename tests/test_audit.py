"""The harvest audit: the difference estimator on plain data, audit.csv written by a real crawl on
loopback HTTP, and ``scrapy audit`` reading it back as a user runs it."""

from __future__ import annotations

import csv
import json
import random
import statistics
import subprocess

import pytest

from conftest import REPO, bin_path, run_crawl
from topiccrawl.crawl.audit import AUDIT_FIELDS, write_audit
from topiccrawl.scoring.audit import AuditError, Interval, audit_estimate, parse_label, sample_positions, wilson
from topiccrawl.scoring.topic import load_topic

WEB = "generated:zh-disaster?pages=5000&seed=11"


def _population(n: int, rate: float, seed: int) -> list[bool]:
    rng = random.Random(seed)
    return [rng.random() < rate for _ in range(n)]


def test_a_census_gives_the_true_rate_with_no_width():
    y = _population(200, 0.3, 1)
    f = [0.8] * 200  # a judgement biased by +0.5
    est = audit_estimate(f, f, y, method="difference", widen=False)
    assert est.audited.estimate == pytest.approx(sum(y) / 200)
    assert audit_estimate(f, f, y).audited.estimate == pytest.approx(sum(y) / 200)  # the shipped form too
    assert est.audited.low == pytest.approx(est.audited.high)  # sampling without replacement: nothing left to guess
    assert est.self_assessed == pytest.approx(0.8)
    assert est.bias.estimate == pytest.approx(0.8 - sum(y) / 200)


def test_the_audit_corrects_a_biased_judgement_and_its_interval_holds():
    y = _population(1000, 0.12, 2)
    rng = random.Random(3)
    # a judgement that ranks pages a little but is far too high on average (as a flagged classifier)
    f = [min(1.0, 0.55 + 0.2 * yi + rng.uniform(-0.1, 0.1)) for yi in y]
    true = sum(y) / len(y)
    forms = {"difference": {"method": "difference", "widen": False}, "shipped": {}}
    estimates = {form: [] for form in forms}
    covered = dict.fromkeys(forms, 0)
    for _ in range(1500):
        idx = rng.sample(range(1000), 50)
        for form, kw in forms.items():
            est = audit_estimate(f, [f[i] for i in idx], [y[i] for i in idx], **kw)
            estimates[form].append(est.audited.estimate)
            covered[form] += est.audited.low <= true <= est.audited.high
    assert abs(sum(f) / len(f) - true) > 0.4  # the self-assessment is far off
    for form in forms:  # the audit is not
        assert sum(estimates[form]) / 1500 == pytest.approx(true, abs=0.01), form
    assert 0.90 <= covered["difference"] / 1500 <= 0.99
    assert covered["shipped"] >= covered["difference"] and covered["shipped"] / 1500 >= 0.94


def test_an_informative_judgement_narrows_the_interval():
    y = _population(1000, 0.4, 4)
    good = [0.9 if yi else 0.1 for yi in y]
    idx = random.Random(5).sample(range(1000), 50)
    labels = [y[i] for i in idx]
    informed = audit_estimate(good, [good[i] for i in idx], labels, widen=False)
    blind = audit_estimate([0.4] * 1000, [0.4] * 50, labels, method="difference", widen=False)
    width = lambda iv: iv.high - iv.low  # noqa: E731
    assert width(informed.audited) < 0.5 * width(blind.audited)
    assert informed.plain == blind.plain  # the labels alone do not use the judgement


def test_the_tuned_weight_follows_how_much_the_judgement_tells():
    y = _population(600, 0.2, 6)
    idx = random.Random(7).sample(range(600), 60)
    labels = [y[i] for i in idx]
    # a constant judgement tells nothing: weight 0, the labels alone
    flat = audit_estimate([0.7] * 600, [0.7] * 60, labels)
    assert flat.weight == 0.0 and flat.audited.estimate == pytest.approx(sum(labels) / 60)
    # a judgement equal to the truth: weight 1, and the estimate is the true rate itself
    exact = audit_estimate([float(v) for v in y], [float(v) for v in labels], labels, widen=False)
    assert exact.weight == pytest.approx(1.0) and exact.audited.estimate == pytest.approx(sum(y) / 600)
    # widening: the interval holds the labels' Wilson interval as well as its own
    wide = audit_estimate([float(v) for v in y], [float(v) for v in labels], labels)
    assert wide.audited.low <= min(exact.audited.low, wide.plain.low)
    assert wide.audited.high >= max(exact.audited.high, wide.plain.high)
    assert wide.audited.high - wide.audited.low > exact.audited.high - exact.audited.low


def test_wilson_interval_and_labels():
    iv = wilson(0, 10)
    assert iv.estimate == 0.0 and iv.low == 0.0 and iv.high == pytest.approx(0.2775, abs=1e-4)
    assert [parse_label(x) for x in ("1", " yes", "Y", "0", "no", "", "  ")] == [True, True, True, False, False,
                                                                                 None, None]
    # full-width forms (a Chinese input method's) and 是 / 否
    assert [parse_label(x) for x in ("１", "０", "ＹＥＳ", "是", "否", "\u3000")] == [True, False, True, True, False, None]
    # a label column pandas wrote back with blanks in it holds floats
    assert [parse_label(x) for x in ("1.0", "0.0")] == [True, False]
    with pytest.raises(AuditError, match="expected 1 or 0"):
        parse_label("maybe")
    with pytest.raises(AuditError, match="no labelled page"):
        audit_estimate([0.5, 0.5], [], [])
    # every page labelled: the rate is known, and no interval is drawn around it (Wilson's was)
    census = audit_estimate([0.2, 0.4, 0.1, 0.3], [0.4, 0.1, 0.2, 0.3], [False, False, False, False])
    assert census.audited == census.plain == Interval(0.0, 0.0, 0.0)
    assert census.bias.estimate == census.bias.low == census.bias.high == pytest.approx(0.25)


def test_sample_positions_are_distinct_and_cover_everything_when_asked():
    rng = random.Random(0)
    assert sorted(sample_positions(7, 50, rng)) == list(range(7))
    picks = sample_positions(1000, 50, rng)
    assert len(set(picks)) == 50 and all(0 <= p < 1000 for p in picks)


def test_a_labelled_audit_is_kept_when_a_new_one_is_written(tmp_path):
    rows = [{"url": f"http://x.test/{i}", "title": str(i), "judged": 0.5} for i in range(20)]
    first = write_audit(tmp_path, rows, 5, random.Random(0))
    text = first.read_text(encoding="utf-8").splitlines()
    text[1] += "1"  # the first row labelled by a person
    first.write_text("\n".join(text) + "\n", encoding="utf-8")
    write_audit(tmp_path, rows, 5, random.Random(1))  # the crawl resumed and closed again
    assert (tmp_path / "audit.1.csv").read_text(encoding="utf-8").splitlines()[1].endswith(",1")
    assert len((tmp_path / "audit.csv").read_text(encoding="utf-8").splitlines()) == 6
    write_audit(tmp_path, rows, 5, random.Random(2))  # an unlabelled audit is simply replaced
    assert not (tmp_path / "audit.2.csv").exists()


def _label_every_row(folder, label: str) -> None:
    """A person labels every row of ``folder/audit.csv`` ``label``."""
    lines = (folder / "audit.csv").read_text(encoding="utf-8").splitlines()
    (folder / "audit.csv").write_text("\n".join([lines[0]] + [line + label for line in lines[1:]]) + "\n",
                                      encoding="utf-8")


def _audit(out, *extra):
    return subprocess.run([bin_path("scrapy"), "audit", str(out), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_a_crawl_writes_an_audit_that_scrapy_audit_reads_back(tmp_path):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "strategy": "bestfirst", "max_pages": 120},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false",
                                    "TOPICCRAWL_AUDIT_PAGES": "40"}, feed=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scrapy audit" in proc.stderr  # the log says what to do with it
    harvest = list(csv.DictReader((out / "harvest.csv").open(encoding="utf-8")))
    beta = load_topic("台风灾害").beta
    # without the page classifier a page's judgement is what Accuracy counts: R(P) ≥ β
    assert [float(r["judged"]) for r in harvest] == [float(float(r["relevance"]) >= beta) for r in harvest]
    assert sum(float(r["judged"]) for r in harvest) / 120 == pytest.approx(float(harvest[-1]["accuracy"]))
    sample = list(csv.DictReader((out / "audit.csv").open(encoding="utf-8")))
    assert list(sample[0]) == AUDIT_FIELDS and len(sample) == 40
    assert len({r["url"] for r in sample}) == 40 and {r["url"] for r in sample} <= {r["url"] for r in harvest}
    assert all(r["label"] == "" and r["title"] for r in sample)
    assert json.loads((out / "stats.json").read_text(encoding="utf-8"))["topiccrawl/audit/pages"] == 40

    # a person has not labelled anything yet
    proc = _audit(out)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {out / 'audit.csv'}: no labelled page: label some rows first (1 on topic, 0 not)"]

    # the offline web's ground truth labels the pages: the figure is the difference estimate
    proc = _audit(out, "--truth")
    assert proc.returncode == 0, proc.stderr
    assert not (out / "audit.json").exists()  # the report of a person's labels stays theirs
    report = json.loads((out / "audit.truth.json").read_text(encoding="utf-8"))
    judged = {r["url"]: float(r["judged"]) for r in harvest}
    hit, previous = {}, 0
    for r in harvest:
        hit[r["url"]], previous = int(r["truth_relevant"]) > previous, int(r["truth_relevant"])
    # ȳ + λ(F̄ − f̄), λ = s_yf / s²_f clipped to [0, 1]
    ys, fs = [float(hit[r["url"]]) for r in sample], [judged[r["url"]] for r in sample]
    var_f = statistics.pvariance(fs)
    lam = min(1.0, max(0.0, statistics.covariance(ys, fs) * 39 / 40 / var_f)) if var_f else 0.0
    expected = statistics.fmean(ys) + lam * (statistics.fmean(judged.values()) - statistics.fmean(fs))
    assert report["audited"]["estimate"] == pytest.approx(min(1.0, max(0.0, expected)))
    assert report["weight"] == pytest.approx(lam)
    plain = report["plain"]
    assert report["audited"]["low"] <= plain["low"] and report["audited"]["high"] >= plain["high"]
    assert report["labelled"] == 40 and report["pages"] == 120
    assert report["true_harvest_rate"] == pytest.approx(int(harvest[-1]["truth_relevant"]) / 120)
    assert "audited harvest rate (95% interval)" in proc.stdout

    # a person labels the first ten rows; a typo is a one-line error naming the row
    lines = (out / "audit.csv").read_text(encoding="utf-8").splitlines()
    for i in range(1, 11):
        lines[i] += "1" if hit[sample[i - 1]["url"]] else "0"
    (out / "audit.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _audit(out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "audit.json").read_text(encoding="utf-8"))["labelled"] == 10
    assert "not a random sample" not in proc.stderr
    # the ground truth's report beside it does not replace the person's
    assert _audit(out, "--truth").returncode == 0
    assert json.loads((out / "audit.json").read_text(encoding="utf-8"))["labels"] == "audit.csv"
    assert json.loads((out / "audit.truth.json").read_text(encoding="utf-8"))["labelled"] == 40
    lines[3] = lines[3][:-1] + "maybe"
    (out / "audit.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _audit(out)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {out / 'audit.csv'}, line 4: label 'maybe': expected 1 or 0 (yes/no), or blank for a page not labelled"]


def test_scrapy_audit_of_a_folder_that_is_not_a_crawl_is_one_line(tmp_path):
    proc = _audit(tmp_path / "nowhere")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {tmp_path / 'nowhere'}: no such folder (give a crawl's "
                                                "output folder)"]
    proc = _audit(tmp_path)  # a folder, but not a crawl's
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "harvest.csv" in proc.stderr
    (tmp_path / "harvest.csv").write_text("a,b\n1,2\n", encoding="utf-8")  # some other CSV
    proc = _audit(tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {tmp_path / 'harvest.csv'}: no 'url' column: not a "
                                                "topiccrawl harvest.csv"]
    proc = _audit(tmp_path / "harvest.csv")  # a file where the folder goes
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'harvest.csv'}: not a folder (give a crawl's output folder)"]


def test_a_crawl_without_ground_truth_is_audited_from_labels_only(tmp_path):
    """A live-web crawl: harvest.csv counts 0 truly relevant pages (there are no labels) and
    stats.json has no total; the audit must not report a true rate of 0, and --truth is refused."""
    from topiccrawl.crawl.audit import audit

    with (tmp_path / "harvest.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["dp", "truth_relevant", "url", "judged"])
        for i in range(100):
            writer.writerow([i + 1, 0, f"https://example.org/{i}", 1.0 if i % 4 == 0 else 0.0])
    (tmp_path / "stats.json").write_text(json.dumps({"topiccrawl/dp": 100}), encoding="utf-8")
    rows = [{"url": f"https://example.org/{i}", "judged": 0.0} for i in range(100)]
    write_audit(tmp_path, rows, 20, random.Random(0))
    _label_every_row(tmp_path, "no")
    estimate, extra = audit(tmp_path)
    assert estimate.labelled == 20 and estimate.self_assessed == pytest.approx(0.25)
    assert estimate.audited.estimate == 0.0 and estimate.audited.high > 0.1  # no relevant page among 20: Wilson's
    assert "true_harvest_rate" not in extra
    with pytest.raises(AuditError, match="no ground truth"):
        audit(tmp_path, truth=True)


def test_scrapy_audit_names_the_figure_the_crawl_reported_when_it_was_the_auc_bound(tmp_path):
    """With TOPICCRAWL_CLASSIFIER_ESTIMATE=auc a crawl may report the held-out AUC's bound, not the
    mean of its judgements that the audit corrects: ``scrapy audit`` says so, with both figures."""
    with (tmp_path / "harvest.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["dp", "truth_relevant", "url", "judged"])
        for i in range(100):
            writer.writerow([i + 1, 0, f"https://example.org/{i}", 0.5 if i % 2 else 0.1])
    rows = [{"url": f"https://example.org/{i}", "judged": 0.0} for i in range(100)]
    write_audit(tmp_path, rows, 20, random.Random(0))
    _label_every_row(tmp_path, "1")
    stats = {"topiccrawl/dp": 100, "topiccrawl/classifier/expected_harvest": 0.61,
             "topiccrawl/classifier/mean_probability": 0.3}
    for rule, named in (("mean", False), ("auc_bound", True)):
        (tmp_path / "stats.json").write_text(json.dumps({**stats, "topiccrawl/classifier/estimate": rule}),
                                             encoding="utf-8")
        proc = _audit(tmp_path)
        assert proc.returncode == 0, proc.stderr
        report = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
        assert "self-assessed harvest rate: 0.300" in proc.stdout
        assert ("reported_harvest_rate" in report) is named and ("the crawl reported" in proc.stdout) is named
    assert report["reported_harvest_rate"] == 0.61
    line = next(x for x in proc.stdout.splitlines() if x.startswith("the crawl reported"))
    assert line == (f"the crawl reported 0.610, the held-out AUC's bound (TOPICCRAWL_CLASSIFIER_ESTIMATE=auc; "
                    f"{0.61 - report['audited']['estimate']:+.3f} from the audited rate); the lines here judge the "
                    "mean of its judgements, 0.300")


def test_scrapy_audit_says_how_many_counted_pages_it_leaves_out_for_want_of_a_judgement(tmp_path):
    """Pages counted again from a JOBDIR journal after a forced stop have no judgement in
    harvest.csv: the audit leaves them out, and says so with the numbers (it said nothing, and
    its page count and true harvest rate were of a part of the crawl)."""
    with (tmp_path / "harvest.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["dp", "truth_relevant", "url", "judged"])
        for i in range(100):
            writer.writerow([i + 1, 0, f"https://example.org/{i}", "" if i < 30 else 0.4])
    (tmp_path / "stats.json").write_text(json.dumps({"topiccrawl/dp": 100}), encoding="utf-8")
    write_audit(tmp_path, [{"url": f"https://example.org/{i}", "judged": 0.4} for i in range(30, 100)], 20,
                random.Random(0))
    _label_every_row(tmp_path, "1")
    proc = _audit(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "warning: 30 of the 100 counted pages have no judgement in harvest.csv (a page counted again from a JOBDIR "
        "journal after a forced stop keeps none, and so do the pages before a resume that started the page "
        "classifier) and are left out: every figure here is of the other 70"]
    assert "pages counted: 70, labelled: 20" in proc.stdout
    (tmp_path / "harvest.csv").write_text("dp,truth_relevant,url,judged\n1,0,https://example.org/30,0.4\n",
                                          encoding="utf-8")
    (tmp_path / "audit.csv").write_text("order,url,title,label\n1,https://example.org/30,,1\n", encoding="utf-8")
    proc = _audit(tmp_path)  # every counted page judged: no warning
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr


def _harvest(folder, n: int, judged=lambda i: 0.5 if i % 2 else 0.1, **stats):
    with (folder / "harvest.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["dp", "truth_relevant", "url", "judged"])
        for i in range(n):
            writer.writerow([i + 1, 0, f"https://example.org/{i}", judged(i)])
    (folder / "stats.json").write_text(json.dumps({"topiccrawl/dp": n, **stats}), encoding="utf-8")


def test_scrapy_audit_of_every_counted_page_says_the_rate_is_known(tmp_path):
    """A crawl of fewer pages than the audit's 50, every one labelled: the rate is the labels' share,
    with no interval (Wilson's drew one around 0 and called a self-assessment of 0.3 consistent)."""
    _harvest(tmp_path, 20)
    write_audit(tmp_path, [{"url": f"https://example.org/{i}", "judged": 0.3} for i in range(20)], 50,
                random.Random(0))
    _label_every_row(tmp_path, "0")
    proc = _audit(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "audited harvest rate: 0.000, known: every counted page is labelled" in lines
    assert not any(line.startswith("labels alone") for line in lines)
    assert "self-assessment − audited: +0.300 [+0.300, +0.300]: too high" in lines, lines


def test_an_audit_from_a_spreadsheet_reads_back_in_its_order_column_and_its_encoding(tmp_path):
    """A spreadsheet may sort the rows by another column, save in GBK (a zh-CN "CSV"), and a
    Chinese input method writes full-width digits: the labelled rows are still the first of the
    random order (no "not a random sample" warning), and ``scrapy audit`` takes the file's path."""
    from topiccrawl.crawl.audit import audit

    _harvest(tmp_path, 60)
    write_audit(tmp_path, [{"url": f"https://example.org/{i}", "judged": 0.5, "title": f"台风 {i}"}
                           for i in range(60)], 20, random.Random(0))
    rows = list(csv.DictReader((tmp_path / "audit.csv").open(encoding="utf-8")))
    for row, label in zip(rows, ["１", "0", "是", "否", "1", "0", "1", "0"]):  # the first eight of the order
        row["label"] = label
    rows.sort(key=lambda row: row["url"])  # sorted by URL in the spreadsheet: labelled rows now scattered
    assert [r["label"] != "" for r in rows] != sorted((r["label"] != "" for r in rows), reverse=True)
    with (tmp_path / "audit.csv").open("w", newline="", encoding="gbk") as fh:
        writer = csv.DictWriter(fh, fieldnames=AUDIT_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    estimate, extra = audit(tmp_path)
    assert estimate.labelled == 8 and extra["skipped"] == 0
    assert estimate.plain.estimate == pytest.approx(4 / 8)
    proc = _audit(tmp_path / "audit.csv")  # the file where the folder goes
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "labelled: 8" in proc.stdout and json.loads((tmp_path / "audit.json").read_text())["labelled"] == 8
    # a row whose order a person overwrote: one line naming it
    text = (tmp_path / "audit.csv").read_text(encoding="gbk")
    (tmp_path / "audit.csv").write_text(text.replace(f"\n{rows[2]['order']},", "\nthree,", 1), encoding="utf-8-sig")
    proc = _audit(tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'audit.csv'}, line 4: order 'three' is not a whole number (the column numbers the "
        "random order; keep it as written)"]
    # Western Europe's plain "CSV": windows-1252 and semicolons; only the title had other letters
    (tmp_path / "audit.csv").write_bytes("order;url;title;label\n1;https://example.org/1;Café;1\n".encode("cp1252"))
    proc = _audit(tmp_path)
    assert proc.returncode == 0 and "labelled: 1" in proc.stdout, proc.stderr
    (tmp_path / "audit.csv").write_bytes(b"\xff\xfeo\x00r\x00d")  # UTF-16 cut in the middle of a character
    proc = _audit(tmp_path)
    assert proc.returncode == 2 and "broken UTF-16" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_an_audit_saved_with_semicolons_tabs_or_spaced_headers_reads_back_and_is_never_written_over(tmp_path):
    """Spreadsheets in comma-decimal locales separate by semicolons, "Unicode text" is UTF-16 with
    tabs, some write ``order, url`` with spaces and rows of empty cells: all read as the audit they
    are. A later crawl into the folder keeps such a file (it wrote over the labels when it did not
    read them), and a page or order number twice is a one-line error."""
    from topiccrawl.crawl.audit import audit, keep_earlier_audit

    _harvest(tmp_path, 40)
    urls = [f"https://example.org/{i}" for i in range(0, 40, 4)]

    def save(sep: str, encoding: str, header_sep: str | None = None, extra: str = "") -> None:
        head = (header_sep or sep).join(AUDIT_FIELDS)
        body = "".join(f"{n}{sep}{u}{sep}页 {n}{sep}{n % 2}\r\n" for n, u in enumerate(urls, 1))
        (tmp_path / "audit.csv").write_bytes((head + "\r\n" + body + extra).encode(encoding))

    for sep, encoding, header_sep, extra in ((";", "utf-8-sig", None, ";;;\r\n;;note;\r\n"), ("\t", "utf-16", None, ""),
                                             (",", "utf-8", ", ", ",,,\r\n"), (";", "utf-8", None, "")):
        save(sep, encoding, header_sep, extra)
        if sep == ";" and not extra:  # Excel's "sep=;" line, blank lines and capitalised headers above it
            text = (tmp_path / "audit.csv").read_text(encoding="utf-8")
            (tmp_path / "audit.csv").write_text("\r\nsep=;\r\n" + text.replace("url;", "URL;").replace(";label", ";Label"),
                                                encoding="utf-8")
        estimate, extra_facts = audit(tmp_path)
        assert estimate.labelled == 10 and estimate.plain.estimate == pytest.approx(0.5), (sep, encoding)
        assert extra_facts["skipped"] == 0
        keep_earlier_audit(tmp_path)  # labelled: set aside, not written over
        assert not (tmp_path / "audit.csv").exists() and (tmp_path / "audit.1.csv").is_file()
        (tmp_path / "audit.1.csv").unlink()
    # a "sep=" line naming the tab (it was stripped away), or with a blank line below it
    for sep, line in (("\t", "sep=\t\r\n"), (";", "sep=;\r\n\r\n")):
        save(sep, "utf-8")
        text = (tmp_path / "audit.csv").read_text(encoding="utf-8")
        (tmp_path / "audit.csv").write_text(line + text, encoding="utf-8")
        estimate, _ = audit(tmp_path)
        assert estimate.labelled == 10, repr(line)
        (tmp_path / "audit.csv").unlink()
    # a file that is no audit at all (some other table saved over it) is kept too
    (tmp_path / "audit.csv").write_text("a|b\n1|2\n", encoding="utf-8")
    keep_earlier_audit(tmp_path)
    assert (tmp_path / "audit.1.csv").read_text(encoding="utf-8") == "a|b\n1|2\n"
    proc = _audit(tmp_path / "audit.1.csv")  # only the folder's audit.csv is read
    assert proc.returncode == 2 and "not a folder" in proc.stderr
    (tmp_path / "audit.1.csv").rename(tmp_path / "audit.csv")
    with pytest.raises(AuditError, match=r"expected the columns order, url, title, label separated by commas .*"
                                         r"the first line has a\|b$"):
        audit(tmp_path)
    save(",", "utf-8", extra=f"11,{urls[0]},again,1\r\n")  # a row pasted twice, renumbered
    with pytest.raises(AuditError, match=rf"line 12: url {urls[0]} is on line 2 too"):
        audit(tmp_path)
    save(",", "utf-8", extra="3,https://example.org/39,,1\r\n")  # an order number twice
    with pytest.raises(AuditError, match="order 3 is on line 4 too"):
        audit(tmp_path)


def test_a_new_audit_sets_the_earlier_runs_report_aside(tmp_path):
    """A crawl written into a folder that holds an earlier audit's audit.json keeps it as
    audit.N.json, beside the labelled audit.N.csv it reports on (it stayed as audit.json, the report
    of another crawl next to this one's files)."""
    rows = [{"url": f"http://x.test/{i}", "title": str(i), "judged": 0.5} for i in range(20)]
    write_audit(tmp_path, rows, 5, random.Random(0))
    (tmp_path / "audit.truth.json").write_text('{"labels": "ground truth"}', encoding="utf-8")  # audit --truth
    write_audit(tmp_path, rows, 5, random.Random(1))
    assert not (tmp_path / "audit.truth.json").exists() and not (tmp_path / "audit.1.csv").exists()
    assert json.loads((tmp_path / "audit.1.truth.json").read_text(encoding="utf-8")) == {"labels": "ground truth"}
    lines = (tmp_path / "audit.csv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "audit.csv").write_text("\n".join([lines[0], lines[1] + "1", *lines[2:]]) + "\n", encoding="utf-8")
    (tmp_path / "audit.json").write_text('{"labels": "audit.csv"}', encoding="utf-8")
    (tmp_path / "audit.truth.json").write_text('{"labels": "ground truth"}', encoding="utf-8")
    write_audit(tmp_path, rows, 5, random.Random(2))  # a labelled audit and its reports: kept together
    assert (tmp_path / "audit.2.csv").read_text(encoding="utf-8").splitlines()[1].endswith(",1")
    assert json.loads((tmp_path / "audit.2.json").read_text(encoding="utf-8")) == {"labels": "audit.csv"}
    assert json.loads((tmp_path / "audit.2.truth.json").read_text(encoding="utf-8")) == {"labels": "ground truth"}
    assert not (tmp_path / "audit.json").exists() and not (tmp_path / "audit.truth.json").exists()
    assert (tmp_path / "audit.1.truth.json").exists()
    # an earlier release's --truth report, written as audit.json beside an unlabelled audit, is set aside too
    (tmp_path / "audit.json").write_text('{"labels": "ground truth"}', encoding="utf-8")
    write_audit(tmp_path, rows, 5, random.Random(4))
    assert json.loads((tmp_path / "audit.3.json").read_text(encoding="utf-8")) == {"labels": "ground truth"}
    # a crawl that writes no audit (TOPICCRAWL_AUDIT_ENABLED=False) keeps even an unlabelled one aside
    from topiccrawl.crawl.audit import keep_earlier_audit

    (tmp_path / "audit.json").write_text("{}", encoding="utf-8")
    keep_earlier_audit(tmp_path, replace=False)
    assert not (tmp_path / "audit.csv").exists() and not (tmp_path / "audit.json").exists()
    assert (tmp_path / "audit.4.csv").is_file() and (tmp_path / "audit.4.json").is_file()
    # a report set aside on its own takes a number no kept audit has (audit.N.json reports on audit.N.csv)
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "audit.1.csv").write_text("order,url,title,label\n1,http://x.test/1,,1\n", encoding="utf-8")
    write_audit(alone, rows, 5, random.Random(3))
    (alone / "audit.json").write_text("{}", encoding="utf-8")
    keep_earlier_audit(alone)
    assert (alone / "audit.2.json").is_file() and not (alone / "audit.1.json").exists()


def test_scrapy_audit_of_a_classifier_crawl_stopped_before_its_first_fit_says_it_reported_no_rate(tmp_path):
    """The page classifier was on but never fit: the crawl reported no self-assessed rate, and the
    judgements are R(P) standing in; the audit says so instead of calling their mean self-assessed."""
    _harvest(tmp_path, 20, **{"topiccrawl/classifier/pages": 20, "topiccrawl/classifier/refits": 0})
    write_audit(tmp_path, [{"url": f"https://example.org/{i}", "judged": 0.3} for i in range(20)], 10,
                random.Random(0))
    _label_every_row(tmp_path, "0")
    proc = _audit(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("self-assessed harvest rate: none reported (the page classifier had not fit when the crawl stopped); "
            "the lines here judge the mean of the pages' R(P), which stands in for P(relevant) until a fit is kept: "
            "0.300") in proc.stdout.splitlines()
    # it fit, but discarded each refit (it could not rank the pages it held out): not "had not fit"
    stats = json.loads((tmp_path / "stats.json").read_text(encoding="utf-8"))
    (tmp_path / "stats.json").write_text(json.dumps({**stats, "topiccrawl/classifier/refits": 2,
                                                     "topiccrawl/classifier/discarded": 2}), encoding="utf-8")
    proc = _audit(tmp_path)
    assert ("self-assessed harvest rate: none reported (each of the page classifier's 2 refits was discarded, none "
            "ranking its held-out positives above the fetched pages); the lines here judge the mean of the pages' "
            "R(P), which stands in for P(relevant) until a fit is kept: 0.300") in proc.stdout.splitlines(), proc.stdout
    stats = json.loads((tmp_path / "stats.json").read_text(encoding="utf-8"))
    (tmp_path / "stats.json").write_text(json.dumps({**stats, "topiccrawl/classifier/expected_harvest": 0.3}),
                                         encoding="utf-8")
    proc = _audit(tmp_path)  # once it fit, the mean of its judgements is the rate it reported
    assert "self-assessed harvest rate: 0.300" in proc.stdout.splitlines()


def test_an_audit_that_cannot_be_written_costs_nothing_else(tmp_path):
    (tmp_path / "out" / "audit.csv").mkdir(parents=True)  # in the way: the audit cannot be written
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "max_pages": 30},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false"}, feed=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "could not write the audit" in proc.stderr and "Traceback" not in proc.stderr
    assert len((out / "harvest.csv").read_text(encoding="utf-8").splitlines()) == 31
    assert "topiccrawl/audit/pages" not in json.loads((out / "stats.json").read_text(encoding="utf-8"))


def test_a_labelled_audit_gives_the_next_crawls_examples_and_counter_examples(tmp_path):
    from topiccrawl.crawl.settings import ConfigError, parse_url_list

    path = tmp_path / "audit.csv"
    rows = [("http://a.cn/1", "1"), ("http://a.cn/2", "0"), ("http://a.cn/3", ""), ("http://a.cn/4", "yes"),
            ("http://a.cn/5", "n")]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=AUDIT_FIELDS)
        writer.writeheader()
        for order, (url, label) in enumerate(rows, 1):
            writer.writerow({"order": order, "url": url, "title": "", "label": label})
    for spec in (f"audit:{path}", f"audit:{tmp_path}"):  # the file, or the crawl folder holding it
        pages = parse_url_list("examples", spec)
        assert pages.urls == ("http://a.cn/1", "http://a.cn/4") and pages.counter == ("http://a.cn/2", "http://a.cn/5")
    with pytest.raises(ConfigError, match="audit: names examples"):
        parse_url_list("seeds", f"audit:{path}")
    edited = tmp_path / "edited.csv"
    edited.write_text("order,url,title,label\n1,not a url,,1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'not a url' is not an http"):
        parse_url_list("examples", f"audit:{edited}")
    with pytest.raises(ConfigError, match="no audit.csv here"):
        parse_url_list("examples", f"audit:{tmp_path / 'missing'}")
    path.write_text(path.read_text(encoding="utf-8").replace(",yes", ",maybe"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 5: label 'maybe'"):
        parse_url_list("examples", f"audit:{path}")
    blank = tmp_path / "blank"
    blank.mkdir()
    write_audit(blank, [{"url": "http://a.cn/1", "judged": 0.5}], 5, random.Random(0))
    with pytest.raises(ConfigError, match="no labelled page"):
        parse_url_list("examples", f"audit:{blank}")


def test_the_next_crawl_learns_from_the_labelled_audit(tmp_path):
    """``-a examples=audit:FOLDER``: the pages labelled 1 are the next crawl's examples, those labelled
    0 its counter-examples; a bad label stops the crawl before it starts, with one line."""
    settings = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false", "TOPICCRAWL_AUDIT_PAGES": "30"}
    proc, first = run_crawl(tmp_path / "first", args={"topic": "台风灾害", "strategy": "bestfirst", "max_pages": 120},
                            settings=settings, feed=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    harvest = list(csv.DictReader((first / "harvest.csv").open(encoding="utf-8")))
    hit, previous = {}, 0
    for r in harvest:
        hit[r["url"]], previous = int(r["truth_relevant"]) > previous, int(r["truth_relevant"])
    rows = list(csv.DictReader((first / "audit.csv").open(encoding="utf-8")))
    for r in rows:  # a careful person: the ground truth
        r["label"] = "1" if hit[r["url"]] else "0"
    with (first / "audit.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=AUDIT_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    positives = sum(r["label"] == "1" for r in rows)
    assert 0 < positives < 30  # both kinds, or the test proves less
    proc, out = run_crawl(tmp_path / "second", args={"topic": "台风灾害", "strategy": "learned", "max_pages": 60,
                                                     "examples": f"audit:{first}"}, settings=settings, feed=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/examples/fetched"] == 30  # every labelled page, fetched before the seeds
    assert stats["topiccrawl/classifier/examples"] == positives  # the rest are counter-examples
    assert stats["topiccrawl/learned/association_examples"] == 30
    assert stats["topiccrawl/dp"] == 60
    # the log says what the audit gave, and, the audit being of this topic and web, warns of nothing
    assert (f"examples from the audit {first / 'audit.csv'}: {positives} page(s) labelled on topic, "
            f"{30 - positives} off topic (counter-examples)") in proc.stderr
    assert "labels a crawl of topic" not in proc.stderr
    # the audit of a typhoon crawl given to a real-estate one: a warning naming both
    proc, _ = run_crawl(tmp_path / "other", args={"topic": "房产", "strategy": "learned", "max_pages": 10,
                                                  "examples": f"audit:{first}"}, settings=settings, feed=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (f"examples from the audit {first / 'audit.csv'}: it labels a crawl of topic '台风灾害' on {WEB}; this "
            f"crawl is of topic '房产' on {WEB}") in proc.stderr
    text = (first / "audit.csv").read_text(encoding="utf-8")
    assert ",0\n" in text
    (first / "audit.csv").write_text(text.replace(",0\n", ",nope\n", 1), encoding="utf-8")
    proc, _ = run_crawl(tmp_path / "third", args={"topic": "台风灾害", "strategy": "learned", "max_pages": 10,
                                                  "examples": f"audit:{first}"}, settings=settings, feed=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "label 'nope': expected 1 or 0" in proc.stderr
    # a topic without words needs a page labelled 1 to learn them from
    (first / "audit.csv").write_text(text.replace(",1\n", ",0\n"), encoding="utf-8")
    wordless = tmp_path / "wordless.toml"
    wordless.write_text('name = "wordless"\nlanguage = "zh"\n', encoding="utf-8")
    proc, _ = run_crawl(tmp_path / "fourth", args={"topic": str(wordless), "strategy": "learned", "max_pages": 10,
                                                   "examples": f"audit:{first}"}, settings=settings, feed=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no [words] table" in proc.stderr


def test_the_audits_crawl_is_read_only_beside_its_own_audit_and_webs_compare_by_their_parameters(tmp_path):
    """``examples=audit:`` warns of another topic or web by the stats.json beside the audit: an
    earlier run's audit kept as audit.N.csv has a later crawl's stats.json beside it (it warned of
    the wrong topic), and two spellings of one web are one web (it warned of another)."""
    from topiccrawl.crawl.audit import audited_crawl
    from topiccrawl.weblab.corpus import same_web

    (tmp_path / "stats.json").write_text(json.dumps({"topiccrawl/topic": "房产", "topiccrawl/web": WEB}),
                                         encoding="utf-8")
    assert audited_crawl(tmp_path / "audit.csv") == ("房产", WEB)
    assert audited_crawl(tmp_path / "audit.1.csv") == (None, None)
    assert audited_crawl(tmp_path / "elsewhere" / "audit.csv") == (None, None)
    assert same_web("generated:zh-disaster?pages=5000&seed=11", "generated:zh-disaster?seed=11&pages=5000")
    assert not same_web("generated:zh-disaster?pages=5000&seed=11", "generated:zh-disaster?pages=5000&seed=12")
    # a generated web's defaults (50,000 pages, seed 1, the preset zh-disaster) spelled out or not
    assert same_web("generated:zh-disaster?pages=50000", "generated:zh-disaster")
    assert same_web("generated:zh-disaster?seed=1&pages=50000", "generated")
    assert not same_web("generated:zh-disaster?pages=20000", "generated:zh-disaster")
    assert same_web("live", "") and not same_web("live", WEB)
    assert same_web(f"wikispeedia:{tmp_path}/w", f"wikispeedia:{tmp_path}/./w")
    # other folders, another host of one folder: other webs, whatever the pre-crawl checks of their kind say
    for kind in ("wikispeedia", "webkb", "htmltree"):
        (tmp_path / kind / "a").mkdir(parents=True)
        (tmp_path / kind / "b").mkdir()
        assert not same_web(f"{kind}:{tmp_path}/{kind}/a", f"{kind}:{tmp_path}/{kind}/b")
    assert not same_web(f"htmltree:{tmp_path}/htmltree/a?host=a.test", f"htmltree:{tmp_path}/htmltree/a?host=b.test")


def test_a_folders_audit_without_labels_gives_way_to_the_labelled_one_last_written(tmp_path):
    """``-a examples=audit:FOLDER``: a fresh (unlabelled) or missing audit.csv gives way to the labelled
    audit kept beside it that was written last (a set-aside takes the first free number, so the
    highest number is not the newest); a file that is no audit is named, not passed over."""
    import os

    from topiccrawl.crawl.audit import audit_file

    header = "order,url,title,label\n"
    (tmp_path / "audit.2.csv").write_text(header + "1,http://x.test/1,,1\n", encoding="utf-8")
    os.utime(tmp_path / "audit.2.csv", (1_000_000, 1_000_000))  # labelled long ago
    (tmp_path / "audit.1.csv").write_text(header + "1,http://x.test/2,,0\n", encoding="utf-8")
    (tmp_path / "audit.3.csv").write_text(header + "1,http://x.test/3,,\n", encoding="utf-8")  # never labelled
    (tmp_path / "audit.csv").write_text(header + "1,http://x.test/4,,\n", encoding="utf-8")
    assert audit_file(tmp_path) == tmp_path / "audit.1.csv"
    (tmp_path / "audit.csv").unlink()  # a crawl that wrote none (TOPICCRAWL_AUDIT_ENABLED=False) set it aside
    assert audit_file(tmp_path) == tmp_path / "audit.1.csv"
    (tmp_path / "audit.csv").write_text("a|b\n1|2\n", encoding="utf-8")
    assert audit_file(tmp_path) == tmp_path / "audit.csv"
    (tmp_path / "audit.csv").write_text(header + "1,http://x.test/4,,1\n", encoding="utf-8")
    assert audit_file(tmp_path) == tmp_path / "audit.csv"
    assert audit_file(tmp_path / "audit.2.csv") == tmp_path / "audit.2.csv"  # a file named is that file
