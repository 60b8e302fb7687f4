"""Topics: weighted topic words, the relevance threshold β, seeds and evaluation labels.

A topic is a TOML file (format in ``docs/topics.md``)::

    name = "台风灾害"
    language = "zh"
    beta = 0.67
    labels = ["topic:台风灾害"]
    seeds = ["http://news.example.cn/"]      # or: seed_file = "seeds.txt"
    [words]
    台风 = 0.8
    风暴潮 = 0.5

The words and weights form the topic vector of the vector space model (WL paper §1.1, eq. 4);
β is the page relevance threshold above which a downloaded page counts as relevant (eqs. 7–11).
Scrapy-free.
"""

from __future__ import annotations

import importlib.resources
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import tomllib
from w3lib.url import canonicalize_url

from topiccrawl.scoring import text


class TopicError(ValueError):
    """A missing or broken topic file (one-line message naming the file and the problem)."""


@dataclass(frozen=True)
class Topic:
    """A crawl topic. ``labels``: a page is truly relevant (ground truth) if it has any of them."""

    name: str
    language: str
    words: dict[str, float] = field(hash=False)
    beta: float
    seeds: tuple[str, ...] = ()
    description: str = ""
    labels: frozenset[str] = frozenset()
    path: str = ""
    #: example pages of the topic (URLs fetched first), a folder of saved HTML pages, and pages
    #: that are not about the topic; a topic with examples may leave ``words`` empty (learned)
    examples: tuple[str, ...] = ()
    examples_dir: str = ""
    counter_examples: tuple[str, ...] = ()

    @property
    def has_examples(self) -> bool:
        return bool(self.examples or self.examples_dir)


#: ASCII names of the shipped Chinese topics (for shells and URLs)
ALIASES = {"rainstorm": "暴雨灾害", "typhoon": "台风灾害", "realestate": "房产"}

_KEYS = ("name", "language", "beta", "description", "words", "seeds", "seed_file", "labels", "examples",
         "examples_dir", "counter_examples")
#: β of a topic that names examples but no words (its words are derived from the examples)
EXAMPLES_BETA = 0.3
_LANGUAGES = ("zh", "en")


def _shipped_dir():
    """``topiccrawl.data/topics`` when installed (a Traversable: also inside a zipped Scrapyd
    egg), else the repository's ``data/topics``."""
    try:
        return importlib.resources.files("topiccrawl.data") / "topics"
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "data" / "topics"


def shipped_topics() -> list[str]:
    """Names of the topics shipped with topiccrawl (file stems, sorted)."""
    return sorted(p.name[:-5] for p in _shipped_dir().iterdir() if p.name.endswith(".toml"))


def load_topic(name_or_path: str) -> Topic:
    """Load a topic from a ``.toml`` path or by shipped name (``台风灾害``, ``typhoon``, ``weather-en``).

    Registers the topic words with jieba (:func:`topiccrawl.scoring.text.add_words`) so that they are
    never split. Raises :class:`TopicError` with a one-line message on any problem.
    """
    arg = str(name_or_path).strip()
    if not arg:  # Path("") is the current folder
        raise TopicError(f"the topic is empty: give a .toml path or one of: {', '.join(shipped_topics() + sorted(ALIASES))}")
    path = Path(arg)
    folder = TopicError(f"{arg}: a folder, not a topic file (give the .toml file)")
    if not (arg.endswith(".toml") or path.is_file() or "/" in arg or "\\" in arg):
        shipped = _shipped_dir() / f"{ALIASES.get(arg.lower(), arg)}.toml"
        if not shipped.is_file():
            if path.is_dir():
                raise folder
            known = ", ".join(shipped_topics() + sorted(ALIASES))
            raise TopicError(f"unknown topic {arg!r}; give a .toml path or one of: {known}")
        path = shipped
    elif path.is_dir():
        raise folder
    elif not path.is_file():
        raise TopicError(f"{path}: no such topic file")
    try:
        data = _loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TopicError(f"{path}: invalid TOML: {exc}") from None
    topic = _parse(data, path)
    text.add_words(list(topic.words))
    return topic


#: a line starting with an unquoted key that has non-ASCII characters, such as ``台风 = 0.8``
_UNICODE_BARE_KEY = re.compile(r"^(\s*)([^\s=\"'#\[\].]*[^\x00-\x7f][^\s=\"'#\[\].]*)(\s*=)", re.M)


def _loads(source: str) -> dict:
    """Parse TOML, also accepting unquoted non-ASCII keys (``台风 = 0.8``, allowed by TOML 1.1
    but not by the TOML 1.0 parser :mod:`tomllib`): if the file does not parse, such keys are
    quoted and parsed again; the first error is reported if that fails too."""
    try:
        return tomllib.loads(source)
    except tomllib.TOMLDecodeError as first:
        quoted = _UNICODE_BARE_KEY.sub(r'\1"\2"\3', source)
        if quoted == source:
            raise
        try:
            return tomllib.loads(quoted)
        except tomllib.TOMLDecodeError:
            raise first from None


def distinct_pages(urls) -> list[str]:
    """``urls`` without the repeats of a page (the same URL but for its fragment or the order of
    its query), each page under the first spelling given."""
    pages: dict[str, str] = {}
    for url in urls:
        pages.setdefault(canonicalize_url(url), url)
    return list(pages.values())


def _parse(data: dict, path: Path) -> Topic:
    def fail(problem: str) -> TopicError:
        return TopicError(f"{path}: {problem}")

    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (expected: {', '.join(_KEYS)})")
    for key in ("name", "description", "language", "seed_file", "examples_dir"):
        if key in data and not isinstance(data[key], str):
            raise fail(f"{key!r} must be a string")

    examples = _url_list(data, "examples", fail)
    counter = _url_list(data, "counter_examples", fail)
    # one page under two spellings (a fragment, the query's order) is one page
    examples, counter = distinct_pages(examples), distinct_pages(counter)
    counter_pages = {canonicalize_url(url) for url in counter}
    both = [url for url in examples if canonicalize_url(url) in counter_pages]
    if both:
        raise fail(f"{both[0]!r} is in both 'examples' and 'counter_examples': a page is one or the other")
    examples_dir = ""
    if "examples_dir" in data and not data["examples_dir"].strip():
        raise fail("'examples_dir' is empty: name a folder of saved pages, or leave the key out")
    if data.get("examples_dir"):
        folder = path.parent / data["examples_dir"]
        if not folder.is_dir():
            raise fail(f"examples_dir {data['examples_dir']!r} is not a folder ({folder})")
        examples_dir = str(folder)
    words = _parse_words(data["words"], fail) if "words" in data else {}
    language = data.get("language") or ("zh" if any(map(text.has_cjk, words)) else "en")
    if language not in _LANGUAGES:
        raise fail(f"language {language!r} must be one of: {', '.join(_LANGUAGES)}")

    if "beta" not in data and words:
        raise fail("missing 'beta' (the relevance threshold, a number in [0, 1])")
    beta = data.get("beta", EXAMPLES_BETA)
    if not _is_number(beta) or not 0.0 <= beta <= 1.0:
        raise fail(f"'beta' must be a number in [0, 1], got {beta!r}")

    seeds = _str_list(data, "seeds", fail)
    for i, url in enumerate(seeds):
        if not _is_http_url(url):
            raise fail(f"seeds[{i}] {url!r} is not an absolute http(s) URL a crawl can fetch")
    if "seed_file" in data:
        seeds += _read_seed_file(path.parent / data["seed_file"], data["seed_file"], fail)

    return Topic(
        name=data.get("name") or path.stem,
        language=language,
        words=words,
        beta=float(beta),
        seeds=tuple(distinct_pages(seeds)),  # one page under two spellings (a fragment) is one seed
        description=data.get("description", "").strip(),
        labels=frozenset(_str_list(data, "labels", fail)),
        path=str(path),
        examples=tuple(examples),
        examples_dir=examples_dir,
        counter_examples=tuple(counter),
    )


def _url_list(data: dict, key: str, fail) -> list[str]:
    urls = _str_list(data, key, fail)
    for i, url in enumerate(urls):
        if not _is_http_url(url):
            raise fail(f"{key}[{i}] {url!r} is not an absolute http(s) URL a crawl can fetch")
    return urls


def _parse_words(table: object, fail) -> dict[str, float]:
    if table is None:
        raise fail("missing [words] table (topic word = weight)")
    if not isinstance(table, dict) or not table:
        raise fail("[words] must be a non-empty table of word = weight")
    words: dict[str, float] = {}
    given: dict[str, str] = {}  # term -> the key it was written as
    text.add_words(list(table))
    for word, weight in table.items():
        if not _is_number(weight) or not math.isfinite(weight):
            raise fail(f"[words] weight for {word!r} must be a number")
        if weight <= 0:
            raise fail(f"[words] weight for {word!r} must be positive, got {weight!r}")
        terms = text.tokenize(word)
        if not terms:  # a stop word, punctuation, a blank key: no term at all to split
            raise fail(f"[words] {word!r} has no term to score by (a stop word, or no letter or digit); "
                       "leave it out")
        if len(terms) != 1:
            raise fail(f"[words] {word!r} is not a single term (it tokenizes to {terms}); "
                       "split it into separate words")
        if terms[0] in words:  # the key written, and how it reads (its case, its script)
            raise fail(f"[words] {word!r} repeats the word {given[terms[0]]!r} (both read as {terms[0]!r})")
        words[terms[0]] = float(weight)
        given[terms[0]] = word
    return words


def _read_seed_file(file: Path, given: str, fail) -> list[str]:
    if not file.is_file():
        raise fail(f"seed_file {given!r} not found ({file})")
    seeds = []
    for lineno, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        url = re.sub(r"\s+#.*", "", line).strip()
        if not url or url.startswith("#"):
            continue
        if not _is_http_url(url):
            raise fail(f"seed_file {given!r} line {lineno}: {url!r} is not an absolute http(s) URL a crawl can fetch")
        seeds.append(url)
    return seeds


def _str_list(data: dict, key: str, fail) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(f"{key!r} must be a list of strings")
    return [v.strip() for v in value]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_http_url(url: str) -> bool:
    return text.followable(url)


def judged_by(topic: Topic) -> dict:
    """What judges a page of ``topic``, as a resumed crawl (JOBDIR) or a crawl's Redis workers must
    agree on: its name, language, β and words (the topic as loaded; words derived from example
    pages are not compared)."""
    return {"name": topic.name, "language": topic.language, "beta": float(topic.beta),
            "words": {w: float(v) for w, v in sorted(topic.words.items())}}


def judged_difference(theirs: dict, mine: dict, who: str) -> str:
    """``was started with topic '台风灾害', not '暴雨灾害'``, or which of its words or β differ from
    ``mine`` (``who``: "this worker", "this crawl")."""
    if theirs.get("name") != mine["name"]:
        return f"was started with topic {theirs.get('name')!r}, not {mine['name']!r}"
    parts = [f"{key} {theirs.get(key)} ({who}: {mine[key]})" for key in ("language", "beta")
             if theirs.get(key) != mine[key]]
    a, b = theirs.get("words") or {}, mine["words"]
    changed = sorted(w for w in a.keys() | b.keys() if a.get(w) != b.get(w))
    if changed:
        shown = ", ".join(f"{w} {a.get(w, '–')} ({who}: {b.get(w, '–')})" for w in changed[:5])
        parts.append(f"words {shown}{f' and {len(changed) - 5} more' if len(changed) > 5 else ''}")
    return f"was started with topic {mine['name']!r} judged otherwise: {'; '.join(parts)}"
