"""The harvest audit's files (docs/audit.md): ``audit.csv`` written at a crawl's close, read back
with a person's labels by ``scrapy audit`` (:mod:`topiccrawl.scoring.audit` has the estimator)."""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import random
import unicodedata
from pathlib import Path

from topiccrawl.scoring.audit import AuditError, AuditEstimate, audit_estimate, parse_label, sample_positions

logger = logging.getLogger(__name__)

AUDIT_FIELDS = ["order", "url", "title", "label"]


#: the encodings an ``audit.csv`` is read in, in turn: UTF-16 when it starts with its byte-order
#: mark (a spreadsheet's "Unicode text"), UTF-8 (with or without the byte-order mark a spreadsheet's
#: "CSV UTF-8" writes), GB18030 (the superset of GBK that a spreadsheet's plain "CSV" writes on a
#: Simplified-Chinese system), windows-1252 (its plain "CSV" in Western Europe), else Latin-1; what
#: the audit reads (order, URL, label) is ASCII in all of them, only a title may come out garbled
AUDIT_ENCODINGS = ("utf-8-sig", "gb18030", "cp1252", "latin-1")
#: the field separators an ``audit.csv`` may use: the comma, the semicolon of spreadsheets in
#: locales whose decimal mark is a comma, the tab of "Unicode text"
AUDIT_DELIMITERS = (",", ";", "\t")


def _labels_in(path: Path) -> bool | None:
    """Whether the audit file ``path`` holds a label: True, False (a crawl's unlabelled audit), or
    None when it cannot be read as an audit (no ``url`` and ``label`` columns, not text, gone)."""
    try:
        fields, rows = _audit_rows(path)
    except (AuditError, OSError):
        return None
    if not {"url", "label"} <= fields:
        return None
    return any((row.get("label") or "").strip() for row in rows)


def _labelled(path: Path) -> bool:
    """Whether ``path`` is more than a crawl's unlabelled audit: a label in it, or a file that
    cannot be read as an audit (kept rather than written over what a person made of it)."""
    if not path.is_file():  # e.g. a folder in the way: the audit is not written (a warning says so)
        return False
    return _labels_in(path) is not False


#: the reports ``scrapy audit`` writes of ``audit.csv``: of a person's labels, and of the offline
#: web's ground truth (``--truth``), each in its own file so that neither is written over the other
REPORTS = (".json", ".truth.json")


def _set_aside(out: Path, names: tuple[str, ...]) -> int:
    """Rename ``out/audit<ext>`` for each of ``names``' extensions that exists to ``audit.<n><ext>``,
    n the first number free for an audit and its reports (``audit.N.json`` and ``audit.N.truth.json``
    name the reports of ``audit.N.csv``); returns n."""
    n = 1
    while any((out / f"audit.{n}{ext}").exists() for ext in (".csv", *REPORTS)):
        n += 1
    for ext in names:
        if (out / f"audit{ext}").exists():
            (out / f"audit{ext}").rename(out / f"audit.{n}{ext}")
    return n


def keep_earlier_audit(out: Path, replace: bool = True) -> None:
    """Before a crawl writes its outputs into ``out``: an earlier run's ``audit.csv`` holding labels
    (or not readable as an unlabelled audit), or any when this crawl writes none (``replace``
    False), is kept as ``audit.N.csv`` with its reports ``audit.json`` and ``audit.truth.json`` as
    ``audit.N.json`` and ``audit.N.truth.json``; reports beside an unlabelled audit under the first
    free N. A report in a folder is always of the ``audit.csv`` there."""
    path = out / "audit.csv"
    if path.is_file() and (not replace or _labelled(path)):
        n = _set_aside(out, (".csv", *REPORTS))
        logger.warning("kept the %s of the earlier run as %s", "audit" if replace else "audit (this crawl writes none)",
                       out / f"audit.{n}.csv")
    elif reports := [ext for ext in REPORTS if (out / f"audit{ext}").is_file()]:  # of an earlier run's audit
        n = _set_aside(out, tuple(reports))
        logger.warning("kept the audit report of the earlier run as %s",
                       " and ".join(str(out / f"audit.{n}{ext}") for ext in reports))


def write_audit(out: Path, rows: list[dict], k: int, rng: random.Random) -> Path | None:
    """``out/audit.csv``: k of the counted pages that carry a judgement, uniformly at random, in
    random order, with an empty ``label`` column; an earlier run's audit there is kept first
    (:func:`keep_earlier_audit`)."""
    keep_earlier_audit(out)
    path = out / "audit.csv"
    pool = [row for row in rows if row.get("judged") is not None]
    if not pool:
        if path.is_file():  # the earlier run's unlabelled sample: not of this crawl's pages
            path.unlink()
        return None
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=AUDIT_FIELDS)
        writer.writeheader()
        for order, i in enumerate(sample_positions(len(pool), k, rng), 1):
            writer.writerow({"order": order, "url": pool[i]["url"], "title": pool[i].get("title") or "", "label": ""})
    return path


def _read_csv(path: Path, what: str) -> list[dict]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    except FileNotFoundError:
        raise AuditError(f"{path}: no {what} here (is this a crawl's output folder?)") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise AuditError(f"{path}: cannot read the {what}: {exc}") from None


def _audit_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AuditError(f"{path}: no audit.csv here (is this a crawl's output folder?)") from None
    except OSError as exc:
        raise AuditError(f"{path}: cannot read the audit.csv: {exc}") from None
    if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise AuditError(f"{path}: cannot read the audit.csv: broken UTF-16 ({exc.reason}); save it as "
                             "CSV UTF-8") from None
    for encoding in AUDIT_ENCODINGS[:-1]:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode(AUDIT_ENCODINGS[-1])  # Latin-1 decodes any byte


def _audit_rows(path: Path) -> tuple[set[str], list[dict]]:
    """An audit file's column names (lower case, spaces around them dropped) and its rows that are not blank,
    each with ``_line``, the line it ends on; separated by a comma, a semicolon or a tab, whichever
    makes a header with ``url`` and ``label``."""
    lines = _audit_text(path).splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))  # blank lines above the header
    hint = None
    first = lines[start].rstrip("\r\n") if start < len(lines) else ""
    if first.lower().startswith("sep=") and len(first) == 5:  # a spreadsheet's "sep=;" line names the separator
        hint, start = first[4], start + 1  # (a tab too: the line is not stripped of it)
        while start < len(lines) and not lines[start].strip():  # blank lines below it
            start += 1
    header = lines[start] if start < len(lines) else ""
    delimiter = hint or next((d for d in AUDIT_DELIMITERS if {"url", "label"} <= {
        f.strip().lower() for f in next(csv.reader([header], delimiter=d), [])}), ",")
    try:
        reader = csv.DictReader(io.StringIO("".join(lines[start:]), newline=""), delimiter=delimiter)
        fields = {(f or "").strip().lower() for f in reader.fieldnames or ()}
        rows = []
        for row in reader:
            row = {(k or "").strip().lower(): v for k, v in row.items() if k is not None}
            # a spreadsheet's cleared rows (",,," or a note left beside them) are not rows
            if any((row.get(k) or "").strip() for k in ("order", "url", "label")):
                row["_line"] = start + reader.line_num
                rows.append(row)
    except csv.Error as exc:
        raise AuditError(f"{path}: cannot read the audit.csv: {exc}") from None
    return fields, rows


def _read_audit(path: Path) -> list[dict]:
    """The rows of an ``audit.csv`` in its ``order`` column's order (the file's when it has none; a
    spreadsheet may have sorted the rows by another column), each with ``_line``, its line in the
    file. It must have its ``url`` and ``label`` columns; a page or an order number may appear once."""
    fields, rows = _audit_rows(path)
    if not {"url", "label"} <= fields:
        raise AuditError(f"{path}: expected the columns {', '.join(AUDIT_FIELDS)} separated by commas (or "
                         f"semicolons, or tabs); the first line has {', '.join(sorted(fields)) or 'none'}")
    if "order" in fields:
        for row in rows:
            text = unicodedata.normalize("NFKC", row.get("order") or "").strip()
            if not (text.isascii() and text.isdigit()):
                raise AuditError(f"{path}, line {row['_line']}: order {row.get('order')!r} is not a whole number "
                                 "(the column numbers the random order; keep it as written)")
            row["_order"] = int(text)
        rows.sort(key=lambda row: row["_order"])
    seen: dict[tuple[str, str], int] = {}
    for row in rows:
        row["url"] = (row.get("url") or "").strip()
        for key in (("url", row["url"]), ("order", row.get("_order"))):
            if key[1] is None:
                continue
            first = seen.setdefault((key[0], str(key[1])), row["_line"])
            if first != row["_line"]:
                raise AuditError(f"{path}, line {row['_line']}: {key[0]} {key[1]} is on line {first} too (each page "
                                 "once, each order number once: a row pasted twice?)")
    return rows


def _number(text: str, path: Path, line: int, column: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise AuditError(f"{path}, line {line}: {column} {text!r} is not a number") from None


def audit_file(path: Path) -> Path:
    """The audit a user named: a file, or the ``audit.csv`` of a crawl's folder — unless that is
    missing or a crawl's unlabelled audit while a labelled audit is kept beside it (``audit.N.csv``,
    the one last written): a later crawl into the folder, or a JOBDIR resume of this one, set the
    labelled audit aside when it wrote its own (or wrote none), so the labels a person made are
    there (docs/audit.md). An ``audit.csv`` that cannot be read as an audit is named, not passed over."""
    if not path.is_dir():
        return path
    current = path / "audit.csv"
    if not current.exists() or (current.is_file() and _labels_in(current) is False):
        # the newest labels: by the time the file was last written (a set-aside keeps it), not by N
        kept = [f for f in path.glob("audit.*.csv") if f.name[6:-4].isdigit() and _labels_in(f)]
        if kept:
            return max(kept, key=lambda f: (f.stat().st_mtime, int(f.name[6:-4])))
    return current


def audit_labels(path: Path) -> tuple[list[str], list[str]]:
    """The pages a person labelled in an ``audit.csv`` (``path``, or ``path/audit.csv`` for a crawl's
    folder): those labelled on topic and those labelled off topic, in ``order``; unlabelled rows
    are left out. :class:`AuditError` (one line) for an unreadable file, a bad label or no label."""
    rows = _read_audit(audit_file(path))
    yes: list[str] = []
    no: list[str] = []
    for row in rows:
        try:
            label = parse_label(row.get("label", ""))
        except AuditError as exc:
            raise AuditError(f"{path}, line {row['_line']}: {exc}") from None
        if label is not None:
            (yes if label else no).append((row.get("url") or "").strip())
    if not yes and not no:
        raise AuditError(f"{path}: no labelled page (write 1 or 0 in the label column first: docs/audit.md)")
    return yes, no


def _stats(out: Path) -> dict:
    """The crawl's stats.json ({} when it cannot be read)."""
    try:
        stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stats if isinstance(stats, dict) else {}


def audited_crawl(path: Path) -> tuple[str | None, str | None]:
    """The topic and offline web (``TOPICCRAWL_WEB``, "" on the live web) of the crawl an audit file
    labels, from the stats.json beside it; (None, None) when it has none, or for an earlier run's
    audit kept as ``audit.N.csv`` (the stats.json there is a later crawl's)."""
    if path.name != "audit.csv":
        return None, None
    stats = _stats(path.parent)
    topic = stats.get("topiccrawl/topic")
    return (topic, stats.get("topiccrawl/web")) if isinstance(topic, str) else (None, None)


def read_harvest(out: Path, stats: dict | None = None, counted: set | None = None) -> tuple[dict[str, float], dict[str, bool]]:
    """The crawl in folder ``out``: URL -> judgement of its counted pages that have one, and URL ->
    whether the ground truth calls the page relevant (empty without ground truth: its stats.json,
    or ``stats`` when given, holds no total of relevant pages), in count order. ``counted``, when
    given, receives the URL of every counted page, with a judgement or not."""
    if not out.is_dir():
        raise AuditError(f"{out}: {'not a folder' if out.exists() else 'no such folder'} (give a crawl's output folder)")
    harvest_path = out / "harvest.csv"
    harvest = _read_csv(harvest_path, "harvest.csv")
    if harvest and "url" not in harvest[0]:
        raise AuditError(f"{harvest_path}: no 'url' column: not a topiccrawl harvest.csv")
    if harvest and "judged" not in harvest[0]:
        raise AuditError(f"{harvest_path}: no 'judged' column (a crawl of an older topiccrawl): no audit possible")
    judged: dict[str, float] = {}
    hits: dict[str, bool] = {}
    previous = 0
    for line, row in enumerate(harvest, 2):
        if counted is not None:
            counted.add(row["url"])
        if row.get("judged") not in (None, ""):
            judged[row["url"]] = _number(row["judged"], harvest_path, line, "judged")
        if row.get("truth_relevant") not in (None, ""):
            count = int(_number(row["truth_relevant"], harvest_path, line, "truth_relevant"))
            hits[row["url"]] = count > previous
            previous = count
    if not judged:
        raise AuditError(f"{harvest_path}: no counted page with a judgement")
    if "topiccrawl/truth/total_relevant" not in (_stats(out) if stats is None else stats):
        hits = {}  # harvest.csv counts 0 relevant pages when the crawl had no labels (the live web)
    return judged, hits


def crawl_folder(path: Path) -> Path:
    """The crawl's output folder a user named: the folder, or its ``audit.csv``."""
    return path.parent if path.name == "audit.csv" and path.is_file() else path


def audit(out: Path, *, truth: bool = False, confidence: float = 0.95) -> tuple[AuditEstimate, dict]:
    """The audit of the crawl in folder ``out``: labels from ``audit.csv``'s ``label`` column (the
    labelled rows must be the first ones: a prefix of a random order is a random sample), or with
    ``truth`` from the offline web's ground truth in ``harvest.csv``. Returns the estimate and
    extra facts (``true_harvest_rate`` when known, ``skipped`` rows)."""
    audit_path = out / "audit.csv"
    stats = _stats(out)
    counted: set[str] = set()
    judged, hits = read_harvest(out, stats, counted)
    sample = _read_audit(audit_path)
    if truth and not hits:
        raise AuditError(f"{out / 'harvest.csv'}: no ground truth (--truth needs a crawl of an offline web with labels)")
    f_sample, labels, skipped, blank = [], [], 0, 0
    for row in sample:
        line = row["_line"]
        url = row["url"]
        if url not in judged:
            raise AuditError(f"{audit_path}, line {line}: {url} is not a counted page of this crawl's harvest.csv")
        try:
            label = hits.get(url, False) if truth else parse_label(row.get("label", ""))
        except AuditError as exc:
            raise AuditError(f"{audit_path}, line {line}: {exc}") from None
        if label is None:
            blank += 1
            continue
        skipped, blank = skipped + blank, 0  # blank rows above a labelled one: not a prefix
        f_sample.append(judged[url])
        labels.append(label)
    if not labels:
        raise AuditError(f"{audit_path}: no labelled page: label some rows first (1 on topic, 0 not)")
    estimate = audit_estimate(list(judged.values()), f_sample, labels, confidence)
    extra = {"skipped": skipped, "labels": "ground truth" if truth else "audit.csv",
             "unjudged": len(counted) - len(judged), "counted": len(counted)}
    if hits:
        extra["true_harvest_rate"] = sum(hits.get(u, False) for u in judged) / len(judged)
    reported = _reported_bound(stats)
    if reported is not None:
        extra["reported_harvest_rate"] = reported
    if "topiccrawl/classifier/pages" in stats and "topiccrawl/classifier/expected_harvest" not in stats:
        # the page classifier was on but had not fit when the crawl stopped, or discarded every refit
        # (TOPICCRAWL_CLASSIFIER_UNRANKED=discard): it reported no rate, and each page's judgement is
        # its R(P), standing in for P(relevant) until a fit is kept
        extra["no_estimate"] = True
        extra["discarded_refits"] = int(stats.get("topiccrawl/classifier/discarded") or 0)
    return estimate, extra


def _reported_bound(stats: dict) -> float | None:
    """The self-assessed harvest rate the crawl reported when it was not the mean of its judgements
    (the held-out AUC's bound, ``TOPICCRAWL_CLASSIFIER_ESTIMATE=auc``), from its stats."""
    if stats.get("topiccrawl/classifier/estimate") != "auc_bound":
        return None
    value = stats.get("topiccrawl/classifier/expected_harvest")
    return float(value) if isinstance(value, (int, float)) else None


def write_report(out: Path, estimate: AuditEstimate, extra: dict, truth: bool = False) -> Path:
    """``audit.json``, or with ``truth`` (the offline web's labels) ``audit.truth.json``: a report
    of the ground truth never replaces the report of a person's labels."""
    path = out / ("audit.truth.json" if truth else "audit.json")
    path.write_text(json.dumps({**estimate.as_dict(), **extra}, indent=2), encoding="utf-8")
    return path
