"""Site finder: meta-search for candidate sites, then minimum-cost verification of each site.

After Li, Zhou, Guo, Lin (Tsinghua), "Website crawling for specific topics". Scrapy-free: the
spider :mod:`topiccrawl.spiders.sitefinder` and ``bench/sitefinder.py`` drive these parts.

* **Page score** F(P, R) = sum of the (normalised) weights of the rules of R that page P
  satisfies; a rule is a boolean expression (``and``, ``or``, ``not``, parentheses) over named
  regular expressions (:func:`load_rules`, file format in ``docs/sitefinder.md``).
* **AbstractURL** (:func:`abstract_url`) = [Path][File][names of the Query attributes]; the pages
  of a site with one AbstractURL form an equivalence class A_k = E_k (expanded) ∪ Q_k (queued).
* **Minimum-cost verification** (:class:`SiteVerifier`): expand one queued page of the class of
  highest H(A_k) = mean F over E_k (a prior for classes with nothing expanded yet); a page is good
  when F ≥ PageThreshold; the site is relevant once NumRelPages good pages are found, and judged
  irrelevant after NumExpPages expansions or when no page is left.
* :class:`SiteFinderFrontier` runs many verifiers in one crawl (the ``sitefinder`` strategy).
"""

from __future__ import annotations

import importlib.resources
import itertools
import json
import re
import tomllib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from w3lib.url import canonicalize_url

from topiccrawl.strategies.simple import FrontierError, Link, _Base
from topiccrawl.strategies.wanglandau import option


class SiteFinderError(ValueError):
    """A broken rules or queries file (one-line message naming the file and the rule)."""


# ---------------------------------------------------------------------------------------------
# Rules: F(P, R)

_TOKEN = re.compile(r"\s*(?:(\()|(\))|([A-Za-z_][\w-]*)|(\S))")
_RULE_KEYS = {"name", "weight", "match", "regex", "description"}
_FILE_KEYS = {"name", "language", "label", "ignore_case", "description", "patterns", "rules",
              "queries", "pages"}


def parse_expression(source: str, names: Iterable[str]) -> tuple:
    """Parse a rule expression into a tree: ``("re", name)``, ``("not", x)``, ``("and", [..])``,
    ``("or", [..])``. Precedence: ``not`` > ``and`` > ``or``; operands are pattern names.
    Raises ValueError with a short message on a bad expression (never evaluates code)."""
    known = set(names)
    tokens = []
    for m in _TOKEN.finditer(source):
        if m.group(4):
            raise ValueError(f"unexpected character {m.group(4)!r}")
        tokens.append(m.group(1) or m.group(2) or m.group(3))
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("expression ends too early")
        pos += 1
        return tokens[pos - 1]

    def chain(op: str, sub: Callable[[], tuple]) -> tuple:
        items = [sub()]
        while peek() == op:
            take()
            items.append(sub())
        return items[0] if len(items) == 1 else (op, items)

    def factor() -> tuple:
        tok = take()
        if tok == "not":
            return ("not", factor())
        if tok == "(":
            node = chain("or", term)
            if peek() != ")":
                raise ValueError("missing ')'")
            take()
            return node
        if tok in (")", "and", "or"):
            raise ValueError(f"unexpected {tok!r}")
        if tok not in known:
            raise ValueError(f"unknown pattern {tok!r}")
        return ("re", tok)

    def term() -> tuple:
        return chain("and", factor)

    if not tokens:
        raise ValueError("empty expression")
    tree = chain("or", term)
    if pos != len(tokens):
        raise ValueError(f"unexpected {tokens[pos]!r}")
    return tree


def _evaluate(node: tuple, hit: Callable[[str], bool]) -> bool:
    op, arg = node
    if op == "re":
        return hit(arg)
    if op == "not":
        return not _evaluate(arg, hit)
    if op == "and":
        return all(_evaluate(x, hit) for x in arg)
    return any(_evaluate(x, hit) for x in arg)


@dataclass(frozen=True)
class Rule:
    name: str
    weight: float  # normalised: the weights of a rule set sum to 1
    tree: tuple
    source: str


@dataclass(frozen=True)
class Query:
    text: str
    kind: str = "query"  # domain, attribute, instance, concept (the paper's query types), or query


@dataclass
class RuleSet:
    """A rule set R: ``score(text)`` gives F(P, R) and the names of the satisfied rules."""

    name: str
    rules: list[Rule]
    patterns: dict[str, re.Pattern]
    language: str = ""
    label: str = ""  # ground-truth label of a truly relevant site (evaluation only)
    queries: list[Query] = field(default_factory=list)
    search_pages: int = 0
    path: str = ""

    def score(self, text: str) -> tuple[float, list[str]]:
        """F(P, R) = Σ weight(r) over the rules r that P satisfies, in [0, 1] (paper's page score)."""
        cache: dict[str, bool] = {}

        def hit(name: str) -> bool:
            if name not in cache:
                cache[name] = self.patterns[name].search(text) is not None
            return cache[name]

        matched = [r.name for r in self.rules if _evaluate(r.tree, hit)]
        weights = {r.name: r.weight for r in self.rules}
        return round(min(1.0, sum(weights[n] for n in matched)), 6), matched


def _shipped_rules_dir():
    """``topiccrawl.data/rules`` when installed, else the repository's ``data/rules``."""
    try:
        return importlib.resources.files("topiccrawl.data") / "rules"
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "data" / "rules"


def shipped_rules() -> list[str]:
    """Names of the shipped rule sets (queries files, ``*-queries-*.toml``, left out)."""
    return sorted(p.name[:-5] for p in _shipped_rules_dir().iterdir()
                  if p.name.endswith(".toml") and "-queries-" not in p.name)


def _read_toml(name_or_path: str, what: str):
    """(parsed TOML, display path) of a path or a shipped ``data/rules`` file name."""
    arg = str(name_or_path).strip()
    path = Path(arg)
    if not path.is_file() and "/" not in arg and "\\" not in arg:
        shipped = _shipped_rules_dir() / (arg if arg.endswith(".toml") else f"{arg}.toml")
        if not shipped.is_file():
            raise SiteFinderError(f"{what} {arg!r}: no such file and no shipped rule set of that "
                                  f"name (shipped: {', '.join(shipped_rules())})")
        source, shown = shipped.read_text(encoding="utf-8"), f"data/rules/{shipped.name}"
    else:
        try:
            source, shown = path.read_text(encoding="utf-8"), str(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise SiteFinderError(f"{path}: cannot read {what} ({getattr(exc, 'strerror', None) or exc})") from None
    if not shown.endswith(".toml"):
        return source, shown
    try:
        return tomllib.loads(source), shown
    except tomllib.TOMLDecodeError as exc:
        raise SiteFinderError(f"{shown}: not valid TOML ({exc})") from None


def _queries(value, fail) -> list[Query]:
    """``queries = ["q", ...]`` or ``[queries] domain = [...]`` (kind -> list of queries)."""
    groups = {"query": value} if isinstance(value, list) else value
    if not isinstance(groups, dict):
        raise fail("'queries' must be a list of strings or a table of kind = [strings]")
    out = []
    for kind, items in groups.items():
        if not isinstance(items, list) or not all(isinstance(q, str) and q.strip() for q in items):
            raise fail(f"queries {kind!r} must be a list of non-empty strings")
        out += [Query(q.strip(), kind) for q in items]
    return out


def _pages(data: dict, fail) -> int:
    pages = data.get("pages", 0)
    if not isinstance(pages, int) or isinstance(pages, bool) or pages < 0:
        raise fail("'pages' (search result pages per query) must be an integer >= 0")
    return pages


def load_rules(name_or_path: str) -> RuleSet:
    """Load a rule set from a ``.toml`` path or a shipped name (``bookstore-zh``).

    Raises :class:`SiteFinderError` naming the file and the rule on any problem: unknown keys, a
    bad regular expression, a bad expression, a missing or non-positive weight.
    """
    data, shown = _read_toml(name_or_path, "rules file")
    if isinstance(data, str):
        raise SiteFinderError(f"{shown}: a rules file must be TOML (.toml)")

    def fail(problem: str) -> SiteFinderError:
        return SiteFinderError(f"{shown}: {problem}")

    unknown = sorted(set(data) - _FILE_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (expected: {', '.join(sorted(_FILE_KEYS))})")
    flags = re.IGNORECASE if data.get("ignore_case", True) else 0
    sources = data.get("patterns", {})
    if not isinstance(sources, dict):
        raise fail("[patterns] must be a table of name = 'regex'")
    patterns: dict[str, re.Pattern] = {}

    def compile_(name: str, regex, where: str) -> None:
        if not isinstance(regex, str) or not regex:
            raise fail(f"{where}: the regular expression must be a non-empty string")
        try:
            patterns[name] = re.compile(regex, flags)
        except re.error as exc:
            raise fail(f"{where}: bad regular expression ({exc})") from None

    for name, regex in sources.items():
        if not re.fullmatch(r"[A-Za-z_][\w-]*", name) or name in ("and", "or", "not"):
            raise fail(f"pattern name {name!r} must be an identifier other than and/or/not")
        compile_(name, regex, f"pattern {name!r}")
    raw = data.get("rules")
    if not isinstance(raw, list) or not raw:
        raise fail("no rules: add [[rules]] tables with name, weight and match (or regex)")
    parsed = []
    for i, rule in enumerate(raw, 1):
        if not isinstance(rule, dict):
            raise fail(f"rule {i} must be a table")
        name = rule.get("name")
        where = f"rule {name!r}" if isinstance(name, str) and name else f"rule {i}"
        if not isinstance(name, str) or not name:
            raise fail(f"{where}: missing 'name'")
        if any(name == r[0] for r in parsed):
            raise fail(f"{where}: duplicate rule name")
        bad = sorted(set(rule) - _RULE_KEYS)
        if bad:
            raise fail(f"{where}: unknown key {bad[0]!r} (expected: {', '.join(sorted(_RULE_KEYS))})")
        weight = rule.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise fail(f"{where}: 'weight' must be a number > 0, got {weight!r}")
        if ("match" in rule) == ("regex" in rule):
            raise fail(f"{where}: give exactly one of 'match' (an expression) or 'regex'")
        if "regex" in rule:
            key = f"rule:{name}"
            compile_(key, rule["regex"], where)
            tree, source = ("re", key), rule["regex"]
        else:
            source = rule["match"]
            if not isinstance(source, str):
                raise fail(f"{where}: 'match' must be a string expression")
            try:
                tree = parse_expression(source, patterns)
            except ValueError as exc:
                raise fail(f"{where}: bad expression {source!r}: {exc}") from None
        parsed.append((name, float(weight), tree, source))
    total = sum(w for _, w, _, _ in parsed)
    rules = [Rule(n, w / total, t, s) for n, w, t, s in parsed]
    for key in ("name", "language", "label"):
        if key in data and not isinstance(data[key], str):
            raise fail(f"{key!r} must be a string")
    return RuleSet(
        name=data.get("name") or Path(shown).stem, rules=rules, patterns=patterns,
        language=data.get("language", ""), label=data.get("label", ""),
        queries=_queries(data["queries"], fail) if "queries" in data else [],
        search_pages=_pages(data, fail), path=shown)


def load_queries(path: str) -> tuple[list[Query], int]:
    """Queries of a ``.toml`` file (``queries`` list or ``[queries]`` table of kinds, optional
    ``pages``) or of a text file (one query per line, ``#`` comments). Returns (queries, pages);
    pages = 0 when the file does not say."""
    data, shown = _read_toml(path, "queries file")

    def fail(problem: str) -> SiteFinderError:
        return SiteFinderError(f"{shown}: {problem}")

    if isinstance(data, str):
        queries = [Query(line.strip()) for line in data.splitlines()
                   if line.strip() and not line.lstrip().startswith("#")]
        pages = 0
    else:
        unknown = sorted(set(data) - {"queries", "pages", "description"})
        if unknown:
            raise fail(f"unknown key {unknown[0]!r} (expected: queries, pages, description)")
        queries, pages = _queries(data.get("queries", []), fail), _pages(data, fail)
    if not queries:
        raise fail("no queries")
    return queries, pages


# ---------------------------------------------------------------------------------------------
# Sites and AbstractURL

_DIGITS = re.compile(r"\d+")


def site_of(url: str) -> str:
    """The site of a URL: its host name, lower-case, without port or trailing dot ('' if none)."""
    try:
        return (urlsplit(url.strip()).hostname or "").rstrip(".")
    except ValueError:
        return ""


def entry_url(url: str) -> str:
    """The entry page of the site of ``url``: ``scheme://host[:port]/``."""
    parts = urlsplit(url.strip())
    port = f":{parts.port}" if parts.port and parts.port != {"http": 80, "https": 443}.get(parts.scheme) else ""
    return f"{parts.scheme or 'http'}://{site_of(url)}{port}/"


def abstract_url(url: str, digits: bool = False) -> str:
    """AbstractURL(p) = [Path][File][names of the Query attributes] (Li et al.).

    ``http://x.com/computers/result.asp?typeid=3`` -> ``/computers/result.asp?typeid``. Choices:
    scheme, host, port, values and the fragment are dropped; an empty path is ``/``; the path is
    percent-decoded (``/%E4%B8%AD`` = ``/中``), case kept; attribute names are decoded, de-duplicated
    and sorted (``?b=1&a=&a=2`` -> ``?a&b``); attributes with an empty name are ignored. With
    ``digits`` (an extension, off by default) every digit run of the path becomes ``*``, so
    ``/12345.html`` and ``/678.html`` share the class ``/*.html``.
    """
    parts = urlsplit(url.strip())
    path = unquote(parts.path) or "/"
    if digits:
        path = _DIGITS.sub("*", path)
    names = sorted({name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if name})
    return path + ("?" + "&".join(names) if names else "")


def _canonical(url: str) -> str:
    return canonicalize_url(url, keep_fragments=False)


# ---------------------------------------------------------------------------------------------
# Minimum-cost verification of one site


@dataclass
class _Class:
    """An equivalence class A_k: the F of its expanded pages E_k and its queue Q_k."""

    key: str
    scores: list[float] = field(default_factory=list)
    queue: deque = field(default_factory=deque)  # (order, url, item)


class SiteVerifier:
    """Minimum-cost verification of one site (Li et al.): a pure state machine.

    ``add(url, item)`` files a page of the site into its class; ``next()`` picks the page to expand
    (the oldest queued page of the class with the highest H(A_k), ties: the class whose oldest
    queued page is oldest); ``record(url, F)`` reports its score and decides the verdict:

    * ``relevant`` as soon as ``num_rel_pages`` expanded pages have F ≥ ``page_threshold``;
    * ``irrelevant`` (reason ``budget``) after ``num_exp_pages`` expansions, or (reason
      ``exhausted``) when nothing is queued or in flight.

    H(A_k) = (1/|E_k|) Σ_{p ∈ E_k} F(p, R); a class with E_k empty has H = ``prior``. A failed
    fetch (HTTP error, non-HTML) is an expansion with F = 0. At most ``max_inflight`` pages are
    handed out before their scores come back (1 = the paper's strictly sequential algorithm).
    """

    def __init__(self, site: str, *, page_threshold: float = 0.7, num_rel_pages: int = 3,
                 num_exp_pages: int = 50, prior: float = 0.5, digits: bool = False,
                 max_inflight: int = 1) -> None:
        self.site = site
        self.entry = f"http://{site}/"  # the entry page (ground truth is read there)
        self.page_threshold, self.num_rel_pages, self.num_exp_pages = page_threshold, num_rel_pages, num_exp_pages
        self.prior, self.digits, self.max_inflight = prior, digits, max_inflight
        self.classes: dict[str, _Class] = {}
        self.seen: set[str] = set()
        self.inflight: dict[str, str] = {}  # url -> class key
        self.announced: set[str] = set()  # links of expanded pages not pushed yet
        self.expansions: list[dict] = []  # {"url", "score", "rules", "class"} in expansion order
        self.good: list[dict] = []
        self.queued = 0
        self.verdict: str | None = None
        self.reason = ""
        self.found_by: list[str] = []
        self._order = itertools.count()

    # -- queue ------------------------------------------------------------------------------------
    def add(self, url: str, item=None) -> bool:
        """File a page of this site into its class; False if decided or the page is known."""
        key = _canonical(url)
        if self.verdict is not None or key in self.seen:
            return False
        self.seen.add(key)
        self.announced.discard(key)
        cls = abstract_url(url, self.digits)
        self.classes.setdefault(cls, _Class(cls)).queue.append((next(self._order), url, item))
        self.queued += 1
        return True

    def wants(self, url: str) -> bool:
        return self.verdict is None and _canonical(url) not in self.seen

    def h(self, cls: _Class) -> float:
        """H(A_k): mean F of the expanded pages of the class, or the prior if none."""
        return sum(cls.scores) / len(cls.scores) if cls.scores else self.prior

    def ready(self) -> bool:
        return (self.verdict is None and len(self.inflight) < self.max_inflight
                and len(self.expansions) + len(self.inflight) < self.num_exp_pages)

    def next(self) -> tuple[str, object] | None:
        """The next page to expand as (url, item), or None (decided, busy or nothing queued)."""
        if not self.ready():
            return None
        best = max((c for c in self.classes.values() if c.queue),
                   key=lambda c: (self.h(c), -c.queue[0][0]), default=None)
        if best is None:
            return None
        _, url, item = best.queue.popleft()
        self.queued -= 1
        self.inflight[url] = best.key
        return url, item

    # -- results ----------------------------------------------------------------------------------
    def record(self, url: str, score: float, rules: Iterable[str] = (), note: str = "",
               links: Iterable[str] = ()) -> bool:
        """Report F of an expanded page; True when this report decided the verdict.

        ``links`` announces same-site links that will be ``add``-ed later (a crawler queues them
        after the report): the site is not "exhausted" while announced links are on their way.
        Reports for pages that were not handed out (a resumed crawl) are accepted too."""
        cls = self.inflight.pop(url, None) or abstract_url(url, self.digits)
        self.seen.add(_canonical(url))
        self.announced.update(k for k in map(_canonical, links) if k not in self.seen)
        row = {"url": url, "score": round(score, 6), "rules": list(rules), "class": cls}
        if note:
            row["note"] = note
        self.expansions.append(row)
        if self.verdict is not None:  # in flight when the site was decided: counted, not judged
            return False
        self.classes.setdefault(cls, _Class(cls)).scores.append(score)
        if score >= self.page_threshold:
            self.good.append(row)
        if len(self.good) >= self.num_rel_pages:
            return self._decide("relevant", f"{len(self.good)} pages with F >= {self.page_threshold}")
        if len(self.expansions) >= self.num_exp_pages:
            return self._decide("irrelevant", "budget")
        if not self.inflight and not self.queued and not self.announced:
            return self._decide("irrelevant", "exhausted")
        return False

    def _decide(self, verdict: str, reason: str) -> bool:
        self.verdict, self.reason = verdict, reason
        for cls in self.classes.values():
            cls.queue.clear()
        self.queued = 0
        self.announced.clear()
        return True

    def result(self) -> dict:
        """The site verdict: verdict, reason, good pages, pages fetched, evidence, queries."""
        top = sorted(self.expansions, key=lambda r: -r["score"])[:3]
        return {
            "site": self.site, "entry": self.entry, "verdict": self.verdict or "undecided", "reason": self.reason,
            "good_pages": len(self.good), "pages_fetched": len(self.expansions),
            "classes": len(self.classes), "evidence": self.good or top,
            "queries": list(self.found_by),
        }

    # -- persistence --------------------------------------------------------------------------
    def state(self) -> dict:
        """Everything but the queued pages (re-added by the frontier on load)."""
        queued = {_canonical(u) for c in self.classes.values() for _, u, _ in c.queue}
        return {"site": self.site, "entry": self.entry, "seen": sorted(self.seen - queued),
                "scores": {k: c.scores for k, c in self.classes.items() if c.scores},
                "expansions": self.expansions, "good": self.good, "verdict": self.verdict,
                "reason": self.reason, "found_by": self.found_by}

    def load_state(self, state: dict) -> None:
        self.entry, self.seen = state["entry"], set(state["seen"])
        for key, scores in state["scores"].items():
            self.classes.setdefault(key, _Class(key)).scores = list(scores)
        self.expansions, self.good = state["expansions"], state["good"]
        self.verdict, self.reason, self.found_by = state["verdict"], state["reason"], state["found_by"]


Fetch = Callable[[str], "tuple[str, float, list[str], list[str]] | None"]


def verify_site(url: str, fetch: Fetch, **params) -> SiteVerifier:
    """Run the verification of the site of ``url`` sequentially (benchmarks, tests).

    ``fetch(url)`` returns (final URL, F, matched rules, outlinks) or None for a failed fetch;
    outlinks of other sites are ignored. ``params`` go to :class:`SiteVerifier`."""
    site = site_of(url)
    v = SiteVerifier(site, **params)
    v.entry = entry_url(url)
    v.add(v.entry)
    while (picked := v.next()) is not None:
        page_url, _ = picked
        got = fetch(page_url)
        if got is None:
            v.record(page_url, 0.0, note="failed")
            continue
        final, score, rules, links = got
        hosts = {site, site_of(final)}
        for link in links:
            if site_of(link) in hosts:
                v.add(link)
        v.record(page_url, score, rules)
    return v


# ---------------------------------------------------------------------------------------------
# The crawl frontier: many sites interleaved


class SiteFinderFrontier(_Base):
    """The ``sitefinder`` strategy: candidate sites verified side by side in one crawl.

    * ``expect(url)`` announces a non-site request (a search query); it is served first, FIFO.
    * ``add_site(url, query)`` registers the site of a search hit; returns its entry URL the
      first time (the spider then requests it), None afterwards ("each site checked once").
    * ``push`` files a link into its site's :class:`SiteVerifier`; links to unknown sites and to
      decided sites are ignored. A pushed link that carries the ``seq`` of a handed-out link is
      the redirect of that page: it is served next, bypassing the verifier.
    * ``pop`` goes round robin over the sites in order of discovery, each site choosing its page
      by H(A_k) (:meth:`SiteVerifier.next`); a site with a page in flight waits for its score.
    * ``landed(url, final_url)`` maps the host a page redirected to onto its site;
      ``report(url, F, rules)`` records the score and returns the site verdict once decided.
    """

    name = "sitefinder"

    def __init__(self, *, page_threshold: float = 0.7, num_rel_pages: int = 3,
                 num_exp_pages: int = 50, prior: float = 0.5, digits: bool = False,
                 max_inflight: int = 1) -> None:
        super().__init__()
        self.params = dict(page_threshold=page_threshold, num_rel_pages=num_rel_pages,
                           num_exp_pages=num_exp_pages, prior=prior, digits=digits,
                           max_inflight=max_inflight)
        self.sites: dict[str, SiteVerifier] = {}
        self.aliases: dict[str, str] = {}
        self.expected: set[str] = set()
        self.control: deque[Link] = deque()
        self.handed: dict[int, str] = {}  # seq -> URL of the links handed out, not yet reported
        self._handed_seq: dict[str, int] = {}
        self.ignored = 0
        self._rr = 0
        self.is_true_site: Callable[[str], bool] | None = None
        self.count_true_sites: Callable[[], int] | None = None
        self._true_total: int | None = None
        self.search_counts: dict[str, int] = {}  # query -> search results

    def set_truth(self, is_true_site: Callable[[str], bool], count_true_sites: Callable[[], int] | None = None) -> None:
        """Ground truth for the statistics: is the site of this entry URL truly relevant, and
        how many true sites the corpus has (for recall). Never used to choose pages."""
        self.is_true_site, self.count_true_sites = is_true_site, count_true_sites

    # -- sites ------------------------------------------------------------------------------------
    def site(self, url: str) -> str | None:
        host = site_of(url)
        host = self.aliases.get(host, host)
        return host if host in self.sites else None

    def add_site(self, url: str, query: str = "") -> str | None:
        host = site_of(url)
        known = self.site(url)
        if known is not None:
            v = self.sites[known]
            if query and query not in v.found_by:
                v.found_by.append(query)
            return None
        if not host:
            return None
        v = self.sites[host] = SiteVerifier(host, **self.params)
        v.entry = entry_url(url)
        if query:
            v.found_by.append(query)
        return entry_url(url)

    def expect(self, url: str) -> None:
        self.expected.add(url)

    def wants(self, url: str) -> bool:
        site = self.site(url)
        return site is not None and self.sites[site].wants(url)

    def landed(self, url: str, final_url: str) -> str | None:
        """The site of a page requested as ``url`` that arrived from ``final_url``."""
        site = self.site(url)
        final = site_of(final_url)
        if site is not None and final and final not in self.sites:
            self.aliases.setdefault(final, site)
        return site

    def report(self, url: str, score: float, rules: Iterable[str] = (), note: str = "",
               links: Iterable[str] = ()) -> dict | None:
        """Record F of the page requested as ``url`` and announce the same-site ``links`` the
        spider queues next (:meth:`SiteVerifier.record`); the site's result if this decided it."""
        site = self.site(url)
        if site is None:
            return None
        self.handed.pop(self._handed_seq.pop(url, -1), None)
        v = self.sites[site]
        return self._result(v) if v.record(url, score, rules, note, links) else None

    def _result(self, v: SiteVerifier) -> dict:
        out = v.result()
        if self.is_true_site is not None:
            out["truly_relevant"] = bool(self.is_true_site(v.entry))
        return out

    def results(self) -> list[dict]:
        return [self._result(v) for v in self.sites.values()]

    # -- Frontier protocol ------------------------------------------------------------------------
    def push(self, link: Link) -> None:
        if link.seq in self.handed:  # a redirect of a page in flight: continue it at once
            self.control.appendleft(link)
            return
        self._stamp(link)
        if link.url in self.expected:
            self.expected.discard(link.url)
            self.control.append(link)
            return
        site = self.site(link.url)
        if site is None or not self.sites[site].add(link.url, link):
            self.ignored += 1

    def pop(self) -> Link | None:
        if self.control:
            return self.control.popleft()
        order = list(self.sites.values())
        for i in range(len(order)):
            v = order[(self._rr + i) % len(order)]
            picked = v.next()
            if picked is not None:
                self._rr = (self._rr + i + 1) % len(order)
                link = picked[1]
                self.handed[link.seq] = link.url
                self._handed_seq[link.url] = link.seq
                return link
        return None

    def __len__(self) -> int:
        return len(self.control) + sum(v.queued for v in self.sites.values())

    def _links(self) -> list[Link]:
        queued = [item for v in self.sites.values() if v.verdict is None
                  for c in v.classes.values() for _, _, item in c.queue]
        return [*self.control, *queued]

    def state(self) -> dict:
        return {**super().state(), "sites": {k: v.state() for k, v in self.sites.items()},
                "aliases": self.aliases, "expected": sorted(self.expected),
                "search_counts": self.search_counts}

    def load_state(self, state: dict) -> None:
        for host, vs in state.get("sites", {}).items():
            self.sites[host] = SiteVerifier(host, **self.params)
            self.sites[host].load_state(vs)
        self.aliases.update(state.get("aliases", {}))
        self.expected.update(state.get("expected", ()))
        self.search_counts.update(state.get("search_counts", {}))
        super().load_state(state)

    # -- statistics -------------------------------------------------------------------------------
    def summary(self) -> dict:
        """Site statistics; precision, recall and per-query relevance need ground truth."""
        rows = [v.result() for v in self.sites.values()]
        return {**self.summarize(rows), "sites/ignored_links": self.ignored}

    def summarize(self, rows: list[dict]) -> dict:
        """The site statistics of ``rows``, one :meth:`SiteVerifier.result` per candidate site
        (also the rows of every worker of a Redis crawl, :mod:`topiccrawl.redis.sitefinder`)."""
        decided = [r for r in rows if r["verdict"] != "undecided"]
        judged = [r for r in decided if r["verdict"] == "relevant"]
        out = {
            "sites/candidates": len(rows), "sites/checked": len(decided),
            "sites/judged_relevant": len(judged),
            "sites/pages_fetched": sum(r["pages_fetched"] for r in rows),
            "sites/pages_per_site": round(sum(r["pages_fetched"] for r in decided) / len(decided), 3) if decided else 0.0,
        }
        if self.is_true_site is None:
            return out
        truth = {r["site"]: bool(self.is_true_site(r["entry"])) for r in rows}
        hits = sum(truth[r["site"]] for r in judged)
        out["sites/truly_relevant_candidates"] = sum(truth.values())
        out["sites/precision"] = round(hits / len(judged), 4) if judged else None
        if self.count_true_sites is not None:
            if self._true_total is None:
                self._true_total = self.count_true_sites()
            out["sites/true_sites"] = self._true_total
            out["sites/recall"] = round(hits / self._true_total, 4) if self._true_total else None
        rates = {}
        for r in rows:
            for q in r["queries"]:
                n, t = rates.get(q, (0, 0))
                rates[q] = (n + 1, t + truth[r["site"]])
        out["sites/query_relevance"] = {q: round(t / n, 4) for q, (n, t) in rates.items()}
        return out

    def count_search(self, query: str, n: int) -> None:
        """``n`` results of ``query`` (one result page)."""
        self.search_counts[query] = self.search_counts.get(query, 0) + n

    def stats(self) -> dict:
        return self.summary()

    def write_report(self, out_dir: Path) -> Path:
        """``sites.jsonl`` (one verdict per candidate site) and ``sites-summary.json``."""
        out_dir = Path(out_dir)
        with (out_dir / "sites.jsonl").open("w", encoding="utf-8") as fh:
            for row in self.results():
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        path = out_dir / "sites-summary.json"
        summary = {**self.summary(), "params": self.params, "search_results": self.search_counts}
        path.write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
        return path


def _flag(options: dict, key: str) -> bool:
    raw = str(options.get(key) or "false").strip().lower()
    if raw not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise FrontierError(f"setting TOPICCRAWL_{key.upper()}={options.get(key)!r} is not a boolean")
    return raw in ("1", "true", "yes", "on")


def make_sitefinder(options: dict, is_relevant: Callable[[str], bool] | None = None,
                    cls: type[SiteFinderFrontier] | None = None) -> SiteFinderFrontier:
    """Factory for ``STRATEGIES["sitefinder"]`` from ``TOPICCRAWL_SITES_*`` (docs/sitefinder.md);
    ``cls``: a subclass to build instead (the Redis store's)."""
    return (cls or SiteFinderFrontier)(
        page_threshold=option(options, "sites_page_threshold", float, 0.7, low=0.0, high=1.0),
        num_rel_pages=option(options, "sites_num_rel_pages", int, 3, low=1),
        num_exp_pages=option(options, "sites_num_exp_pages", int, 50, low=1),
        prior=option(options, "sites_prior", float, 0.5, low=0.0, high=1.0),
        digits=_flag(options, "sites_abstract_digits"),
        max_inflight=option(options, "sites_inflight", int, 1, low=1),
    )
