"""Site finder rules and queries: the page score F(P, R) and the rules / queries file loaders.

After Li, Zhou, Guo, Lin (Tsinghua), "Website crawling for specific topics". F(P, R) = sum of the
(normalised) weights of the rules of R that page P satisfies; a rule is a boolean expression
(``and``, ``or``, ``not``, parentheses) over named regular expressions (:func:`load_rules`, file
format in ``docs/sitefinder.md``).
"""

from __future__ import annotations

import importlib.resources
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import tomllib


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
    ignore_case = data.get("ignore_case", True)
    if not isinstance(ignore_case, bool):  # "false", a string, was true
        raise fail(f"'ignore_case' must be true or false (TOML booleans, no quotes), got {ignore_case!r}")
    flags = re.IGNORECASE if ignore_case else 0
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
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
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
