"""The corpus model of the offline web lab.

A corpus is a set of web pages (URL, status, headers, body bytes) with their outlinks, plus
ground-truth labels (URL -> set of labels) that the server never serves. Readers (generated,
wikispeedia, webkb, htmltree, warc) implement :class:`Corpus`; :func:`open_corpus` turns a corpus
spec string such as ``generated:zh-disaster?pages=20000&seed=7`` into a corpus.

Everything here is Scrapy-free and Twisted-free: the server and the search engine only use this
interface.
"""

from __future__ import annotations

import abc
import importlib
import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from lxml import etree
from lxml import html as lxml_html

#: ``truth:N`` picks from the first this many pages of a web (a generated web may hold far more)
TRUTH_SAMPLE = 20000


class CorpusError(ValueError):
    """A bad corpus spec, a missing directory or an unreadable corpus (one-line message)."""


@dataclass
class Page:
    """One served resource.

    ``links`` are the absolute URLs the page links to (used by ``link:`` search and statistics;
    the crawler never sees them except through the body). ``headers`` are sent as they are
    (``Content-Type``, ``Location``, ``Last-Modified`` ...); the server adds ``Content-Length``.
    """

    url: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    links: list[str] = field(default_factory=list)


@dataclass
class Doc:
    """The searchable view of a page: title, plain text and outlinks."""

    url: str
    title: str
    text: str
    links: list[str] = field(default_factory=list)


class Corpus(abc.ABC):
    """A served web. Subclasses implement the abstract methods; the rest have defaults."""

    #: short name used in logs, cache keys and docs, e.g. ``generated:zh-disaster``
    name: str = "corpus"
    #: charset of HTML pages whose Content-Type names none (WebKB: latin-1)
    default_charset: str | None = None

    @abc.abstractmethod
    def has_host(self, host: str) -> bool:
        """True when ``host`` (lower case, no port) belongs to this corpus."""

    @abc.abstractmethod
    def get(self, url: str) -> Page | None:
        """The page at ``url`` (absolute, as requested), or None for a 404 on a known host."""

    @abc.abstractmethod
    def iter_urls(self) -> Iterator[str]:
        """Every canonical page URL (the ones that carry labels), in a deterministic order."""

    @abc.abstractmethod
    def labels(self, url: str) -> frozenset[str]:
        """Ground-truth labels of ``url`` (empty when none). Never served."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of canonical pages."""

    def canonical(self, url: str) -> str:
        """The identity of the page served at ``url`` (aliases of one page share it); used to
        count distinct relevant pages for recall. The default is the URL itself."""
        return url

    def hosts(self) -> list[str]:
        """Every host of the corpus (for robots.txt and the docs); may be long."""
        seen: dict[str, None] = {}
        for url in self.iter_urls():
            seen.setdefault(urlsplit(url).hostname or "", None)
        return list(seen)

    def robots_txt(self, host: str) -> str | None:
        """robots.txt body for ``host``; None means 404 (everything allowed)."""
        return None

    def seeds(self) -> list[str]:
        """A few entry URLs (home pages, portals) for demos; not topic-specific."""
        return []

    def doc(self, url: str) -> Doc | None:
        """Searchable text of a page. The default parses the served HTML (header names are
        matched case-insensitively: replayed corpora keep their original spelling)."""
        page = self.get(url)
        if page is None or page.status != 200:
            return None
        ctype = next((v for k, v in page.headers.items() if k.lower() == "content-type"), "text/html")
        if "html" not in ctype.lower():
            return None
        return html_to_doc(page.url, page.body, page.links, _charset(ctype) or self.default_charset)

    def search_sample(self, limit: int) -> Iterator[str]:
        """URLs to put into the search index: all of them, or a bounded sample if larger."""
        for i, url in enumerate(self.iter_urls()):
            if i >= limit:
                return
            yield url

    def truth_sample(self, labels, n: int, seed: int, accept: Callable[[str], bool] | None = None) -> list[str]:
        """``truth:N``: a seeded pick of ``n`` pages whose labels meet ``labels`` (and that ``accept``
        takes, e.g. a topic tree's held-out pages), from the :meth:`search_sample` of
        :data:`TRUTH_SAMPLE` pages (seed 0 for ``seeds=truth:N``, 1 for ``examples=truth:N``)."""
        relevant = [u for u in self.search_sample(TRUTH_SAMPLE)
                    if self.labels(u) & labels and (accept is None or accept(u))]
        return random.Random(seed).sample(relevant, min(n, len(relevant)))

    def describe(self) -> dict:
        """Facts printed by ``scrapy serveweb`` and recorded in benchmark results."""
        return {"name": self.name, "pages": len(self)}


def _charset(content_type: str) -> str | None:
    m = re.search(r"charset=([\w-]+)", content_type, re.I)
    return m.group(1) if m else None


def html_to_doc(url: str, body: bytes, links: list[str], charset: str | None = None) -> Doc:
    """Title and visible text of an HTML body (scripts and styles dropped)."""
    if not body.strip():
        return Doc(url, "", "", list(links))
    parser = lxml_html.HTMLParser(encoding=charset) if charset else None
    try:
        tree = lxml_html.document_fromstring(body, parser=parser)
    except (ValueError, LookupError):
        try:
            tree = lxml_html.document_fromstring(body.decode("utf-8", "replace"))
        except etree.ParserError:
            return Doc(url, "", "", list(links))
    except etree.ParserError:  # e.g. a comment-only body: "Document is empty"
        return Doc(url, "", "", list(links))
    for bad in tree.xpath("//script|//style"):
        bad.drop_tree()
    title = " ".join(t.strip() for t in tree.xpath("//title//text()")).strip()
    text = " ".join(s.strip() for s in tree.xpath("//body//text()") if s.strip())
    return Doc(url, title, text, list(links))


class MemoryCorpus(Corpus):
    """A small corpus held in memory; for tests and as the simplest example of a reader."""

    def __init__(self, pages: list[Page], labels: dict[str, set[str]] | None = None,
                 robots: dict[str, str] | None = None, name: str = "memory"):
        self.name = name
        self._pages = {p.url: p for p in pages}
        self._labels = {u: frozenset(v) for u, v in (labels or {}).items()}
        self._robots = robots or {}
        self._hosts = {urlsplit(u).hostname for u in self._pages} | set(self._robots)

    def has_host(self, host: str) -> bool:
        return host in self._hosts

    def get(self, url: str) -> Page | None:
        return self._pages.get(url)

    def iter_urls(self) -> Iterator[str]:
        return iter(sorted(self._pages))

    def labels(self, url: str) -> frozenset[str]:
        return self._labels.get(url, frozenset())

    def __len__(self) -> int:
        return len(self._pages)

    def robots_txt(self, host: str) -> str | None:
        return self._robots.get(host)


# ---------------------------------------------------------------------------------------------
# corpus specs: KIND[:ARG][?key=value&...]

#: reader kind -> "module:function"; the function takes (arg, params) and returns a Corpus
READERS: dict[str, str] = {
    "generated": "topiccrawl.weblab.generated:open_generated",
    "wikispeedia": "topiccrawl.weblab.readers.wikispeedia:open_wikispeedia",
    "webkb": "topiccrawl.weblab.readers.webkb:open_webkb",
    "htmltree": "topiccrawl.weblab.readers.htmltree:open_htmltree",
    "warc": "topiccrawl.weblab.readers.warc:open_warc",
}

DEFAULT_SPEC = "generated:zh-disaster"


@dataclass(frozen=True)
class CorpusSpec:
    kind: str
    arg: str
    params: dict[str, str]
    text: str


def parse_spec(spec: str) -> CorpusSpec:
    """Split ``KIND[:ARG][?k=v&...]``; raise :class:`CorpusError` with a one-line message."""
    text = (spec or "").strip()
    if not text:
        raise CorpusError("empty corpus spec; expected e.g. 'generated:zh-disaster'")
    head, _, query = text.partition("?")
    kind, _, arg = head.partition(":")
    kind = kind.strip().lower()
    if kind not in READERS:
        raise CorpusError(
            f"unknown corpus kind {kind!r} in {text!r}; expected one of: {', '.join(READERS)}"
        )
    try:
        params = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise CorpusError(f"malformed parameters {query!r} in corpus spec {text!r}") from None
    return CorpusSpec(kind, arg.strip(), params, text)


def same_web(a: str, b: str) -> bool:
    """Whether two ``TOPICCRAWL_WEB`` values name the same web: the same kind, argument (a corpus
    path as the same file) and parameters in any order (a generated web's defaults given or not);
    "" and ``live`` both the live web."""
    a, b = (a or "").strip(), (b or "").strip()
    if (a or "live") == "live" or (b or "live") == "live":
        return (a or "live") == (b or "live")
    try:
        x, y = parse_spec(a), parse_spec(b)
    except CorpusError:
        return a == b
    if x.kind == y.kind and x.kind in OPTIONS:  # a generated web's preset, pages and seed, defaults spelled out or not
        options = _function(OPTIONS[x.kind])
        try:
            return options(x.arg, x.params) == options(y.arg, y.params)
        except (CorpusError, ValueError):
            return a == b
    if x.kind != y.kind or x.params != y.params:
        return False
    return x.arg == y.arg or (x.kind != "generated" and os.path.realpath(x.arg) == os.path.realpath(y.arg))


#: reader kind -> "module:function" giving (arg, params)'s options with the defaults filled in, which
#: tell two spellings of one web apart from two webs (:func:`same_web`)
OPTIONS: dict[str, str] = {"generated": "topiccrawl.weblab.generated:generated_options"}
#: reader kind -> "module:function" checking (arg, params) without reading the corpus
CHECKS: dict[str, str] = {
    **OPTIONS,
    "wikispeedia": "topiccrawl.weblab.readers.wikispeedia:check_wikispeedia",
    "webkb": "topiccrawl.weblab.readers.webkb:check_webkb",
    "htmltree": "topiccrawl.weblab.readers.htmltree:check_htmltree",
    "warc": "topiccrawl.weblab.readers.warc:check_warc",
}


def check_spec(spec: str) -> CorpusSpec:
    """:func:`parse_spec`, plus the reader's parameter check where it needs no reading (a generated
    web's ``pages``, ``seed``, preset): a bad value is a one-line :class:`CorpusError` before a
    crawl starts its lab, not a traceback from the lab's process."""
    parsed = parse_spec(spec)
    if parsed.kind in CHECKS:
        _function(CHECKS[parsed.kind])(parsed.arg, parsed.params)
    return parsed


def open_corpus(spec: str) -> Corpus:
    """Open the corpus named by a spec string (see ``docs/offline-web.md``)."""
    parsed = parse_spec(spec)
    opener: Callable[[str, dict[str, str]], Corpus] = _function(READERS[parsed.kind])
    return opener(parsed.arg, parsed.params)


def _function(target: str) -> Callable:
    """The function a table entry names (``"module:function"``), its module imported when first used."""
    module_name, _, func_name = target.partition(":")
    return getattr(importlib.import_module(module_name), func_name)


def int_param(params: dict[str, str], key: str, default: int, spec: str = "") -> int:
    """An integer spec parameter, with a one-line error when it is not one."""
    value = params.get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise CorpusError(f"parameter {key}={value!r} must be an integer {spec}".strip()) from None
