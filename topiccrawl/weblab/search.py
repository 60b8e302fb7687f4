"""The offline web lab's search engine: BM25 over the served corpus, SearXNG-shaped JSON answers.

Text is tokenised with :func:`topiccrawl.scoring.text.tokenize` (jieba for Chinese) and stored as
space-joined tokens in an SQLite FTS5 table, so Chinese and English queries match the same terms
the crawler's scorers see. Queries:

* keywords: every term must occur (implicit AND); ``a b OR c d`` is (a AND b) OR (c AND d);
  ranked by FTS5's BM25 (Robertson & Zaragoza 2009, eq. 3.15), the title weighted 2:1;
* ``related:URL``: the page's 10 terms of highest TF-IDF (tf * log(N/df)) as an OR query,
  the page itself excluded;
* ``link:URL``: the indexed pages whose outlinks (``Doc.links``) contain exactly URL;
* ``site:HOST`` (anywhere in the query, combinable with the above): only pages of that exact
  host (lower-case, no port; ``site:a site:b`` = either host); alone it lists the host's pages.

The index holds ``corpus.search_sample(limit)`` (at most ``limit`` pages, default 50,000) and is
cached on disk under ``$TOPICCRAWL_CACHE/search/`` (or ``~/.cache/topiccrawl/search/``), keyed by
the corpus spec, the limit and :data:`INDEX_VERSION`, and reused only while the corpus size and
``corpus.describe()`` are unchanged. Scrapy-free and Twisted-free.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path
from urllib.parse import urlsplit

from topiccrawl.scoring.text import tokenize
from topiccrawl.weblab.corpus import Corpus, parse_spec

SEARCH_HOST = "search.topiccrawl.test"
INDEX_VERSION = 2  # 2: Wikispeedia text without the "Related subjects" header
DEFAULT_LIMIT = 50_000
PAGE_SIZE = 10
RELATED_TERMS = 10
MAX_TEXT = 20_000  # characters of a page that are tokenised
SNIPPET_SOURCE = 4_000  # characters of a page kept for snippets
SNIPPET_CHARS = 200

_SCHEMA = """
CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize="unicode61 remove_diacritics 0 tokenchars '-''’'");
CREATE TABLE pages(id INTEGER PRIMARY KEY, url TEXT UNIQUE, title TEXT, text TEXT);
CREATE TABLE links(src INTEGER, dst TEXT);
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
"""
_FINISH = """
CREATE INDEX links_dst ON links(dst);
CREATE VIRTUAL TABLE vocab USING fts5vocab(docs, 'row');
"""
_OR_RE = re.compile(r"\s+OR\s+")
_SITE_RE = re.compile(r"(?:^|\s)site:(\S*)", re.I)
_HOST_RE = re.compile(r"[\w.-]+")


class SearchError(ValueError):
    """A bad search request (answered with HTTP 400 and ``{"error": message}``)."""


def cache_dir() -> Path:
    root = os.environ.get("TOPICCRAWL_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "topiccrawl") / "search"


def cache_path(spec: str, limit: int = DEFAULT_LIMIT) -> Path:
    """Where the index of corpus ``spec`` is cached (parameters order-insensitive)."""
    parsed = parse_spec(spec)
    key = f"v{INDEX_VERSION}|{parsed.kind}|{parsed.arg}|{sorted(parsed.params.items())}|{limit}"
    slug = re.sub(r"[^\w.-]+", "-", f"{parsed.kind}-{parsed.arg}")[:60].strip("-")
    return cache_dir() / f"{slug}-{sha256(key.encode()).hexdigest()[:16]}.sqlite"


def _phrase(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def url_host(url: str) -> str:
    """The host of ``url``, lower-case, without port or trailing dot ('' if none)."""
    try:
        return (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return ""


def split_site(query: str) -> tuple[str, list[str]]:
    """``query`` without its ``site:HOST`` operators, and the hosts (lower-case, in order).
    Raises :class:`SearchError` for a ``site:`` that is not a bare host name."""
    hosts = []
    for value in _SITE_RE.findall(query):
        host = value.lower().rstrip(".")
        if not _HOST_RE.fullmatch(host):
            raise SearchError(f"site: takes a host name (site:www.example.org), got {('site:' + value)!r}")
        hosts.append(host)
    return _SITE_RE.sub(" ", query).strip(), list(dict.fromkeys(hosts))


def match_expression(query: str) -> str:
    """FTS5 MATCH expression of a keyword query ('' when it has no searchable term)."""
    groups = []
    for part in _OR_RE.split(query.strip()):
        tokens = tokenize(part)
        if tokens:
            groups.append("(" + " AND ".join(_phrase(t) for t in dict.fromkeys(tokens)) + ")")
    return " OR ".join(groups)


def snippet(text: str, terms: list[str]) -> str:
    """About :data:`SNIPPET_CHARS` characters of ``text`` around the first query term in it."""
    lower = text.lower()
    hits = [i for i in (lower.find(t) for t in terms) if i >= 0]
    start = max(0, min(hits) - SNIPPET_CHARS // 4) if hits else 0
    piece = text[start:start + SNIPPET_CHARS].strip()
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


def _connect(path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.create_function("url_host", 1, url_host, deterministic=True)
    return db


def _host_filter(hosts: list[str], column: str = "p.url") -> tuple[str, tuple]:
    """SQL condition (and its parameters) keeping pages of ``hosts`` (none: every page)."""
    if not hosts:
        return "", ()
    return f" AND url_host({column}) IN ({', '.join('?' * len(hosts))})", tuple(hosts)


def _remove_orphans(path: Path) -> None:
    """Delete the half-built copies of the index at ``path`` (``NAME.PID.tmp``) whose process is
    gone (killed while building); those of a lab still building are left alone."""
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 1:-len(".tmp")]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
            tmp.with_name(tmp.name + "-journal").unlink(missing_ok=True)  # SQLite's, beside it
        except (PermissionError, OverflowError, OSError):  # another user's process, or no such number
            continue


class SearchIndex:
    """The BM25 index of one corpus, in memory (``path=None``) or cached in an SQLite file."""

    def __init__(self, corpus: Corpus, path: str | os.PathLike | None = None,
                 limit: int = DEFAULT_LIMIT):
        self.corpus, self.limit = corpus, limit
        self.path = Path(path) if path is not None else None
        self.db: sqlite3.Connection | None = None
        self.indexed = 0
        self.sampled = len(corpus) > limit
        self.state = "not built"
        if self.path is not None and self.path.exists():
            self._open_cached()

    @classmethod
    def for_spec(cls, corpus: Corpus, spec: str, limit: int = DEFAULT_LIMIT) -> SearchIndex:
        return cls(corpus, cache_path(spec, limit), limit)

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def _open_cached(self) -> None:
        try:
            db = _connect(self.path)
            meta = dict(db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError:
            return  # unreadable: rebuild
        if meta.get("version") == str(INDEX_VERSION) and meta.get("corpus") == self._fingerprint():
            self.db, self.indexed, self.state = db, int(meta["indexed"]), "ready"
        else:
            db.close()

    def _fingerprint(self) -> str:
        """What must match for a cached index to be reused: the corpus size and description."""
        return json.dumps([len(self.corpus), self.corpus.describe()], sort_keys=True, default=str)

    def info(self) -> dict:
        return {"state": self.state, "indexed": self.indexed, "limit": self.limit,
                "sampled": self.sampled, "cache": str(self.path) if self.path else None}

    def build_steps(self) -> Iterator[None]:
        """Build the index, yielding after each page (for cooperative scheduling)."""
        if self.ready:
            return
        self.state = "building"
        tmp = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _remove_orphans(self.path)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.unlink(missing_ok=True)
        db = _connect(tmp if tmp else ":memory:")
        db.executescript(_SCHEMA)
        count = 0
        try:
            for url in self.corpus.search_sample(self.limit):
                doc = self.corpus.doc(url)
                if doc is not None:
                    count += 1
                    text = doc.text[:MAX_TEXT]
                    db.execute("INSERT INTO pages VALUES (?, ?, ?, ?)",
                               (count, url, doc.title, text[:SNIPPET_SOURCE]))
                    db.execute("INSERT INTO docs(rowid, title, body) VALUES (?, ?, ?)",
                               (count, " ".join(tokenize(doc.title)), " ".join(tokenize(text))))
                    db.executemany("INSERT INTO links VALUES (?, ?)",
                                   ((count, dst) for dst in dict.fromkeys(doc.links)))
                    self.indexed = count
                yield
        except BaseException:  # stopped before the end (the lab stopped: GeneratorExit), or failed
            db.close()
            if tmp is not None:
                tmp.unlink(missing_ok=True)  # a half-built file was left behind by every lab stopped early
            self.state = "not built"
            raise
        db.executescript(_FINISH)
        db.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("version", str(INDEX_VERSION)), ("corpus", self._fingerprint()),
            ("indexed", str(count)), ("limit", str(self.limit)), ("name", self.corpus.name)])
        db.commit()
        if tmp is not None:
            db.close()
            os.replace(tmp, self.path)
            db = _connect(self.path)
        self.db, self.state = db, "ready"

    def build(self) -> SearchIndex:
        for _ in self.build_steps():
            pass
        return self

    # -- queries --------------------------------------------------------------------------------

    def search(self, q: str | None, pageno: int | str = 1) -> dict:
        """A SearXNG-shaped answer for query ``q``; raise :class:`SearchError` on bad input."""
        q = (q or "").strip()
        if not q:
            raise SearchError("empty query: pass q=...")
        try:
            page = int(pageno)
        except (TypeError, ValueError):
            raise SearchError(f"pageno must be a positive integer, got {pageno!r}") from None
        if page < 1:
            raise SearchError(f"pageno must be a positive integer, got {pageno!r}")
        if not self.ready:
            self.build()
        offset = (page - 1) * PAGE_SIZE
        rest, hosts = split_site(q)
        if rest.startswith("link:"):
            total, rows, terms = self._links(rest[5:].strip(), offset, hosts)
        elif rest.startswith("related:"):
            total, rows, terms = self._related(rest[8:].strip(), offset, hosts)
        elif not rest and hosts:
            total, rows, terms = self._site(hosts, offset)
        else:
            total, rows, terms = self._keywords(match_expression(rest), offset, hosts=hosts)
        results = [{"url": url, "title": title, "content": snippet(text, terms),
                    "engine": "weblab", "score": score}
                   for url, title, text, score in rows]
        return {"query": q, "number_of_results": total, "pageno": page, "results": results,
                "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
                "unresponsive_engines": []}

    def _keywords(self, expr: str, offset: int, exclude: int = 0,
                  hosts: list[str] = ()) -> tuple[int, list, list[str]]:
        if not expr:
            return 0, [], []
        terms = re.findall(r'"((?:[^"]|"")*)"', expr)
        cond, args = _host_filter(hosts)
        try:
            total = self.db.execute("SELECT count(*) FROM docs JOIN pages p ON p.id = docs.rowid "
                                    f"WHERE docs MATCH ? AND docs.rowid != ?{cond}",
                                    (expr, exclude, *args)).fetchone()[0]
            rows = self.db.execute(
                "SELECT p.url, p.title, p.text, -bm25(docs, 2.0, 1.0) AS s FROM docs "
                f"JOIN pages p ON p.id = docs.rowid WHERE docs MATCH ? AND docs.rowid != ?{cond} "
                "ORDER BY s DESC, p.id LIMIT ? OFFSET ?",
                (expr, exclude, *args, PAGE_SIZE, offset)).fetchall()
        except sqlite3.OperationalError as exc:
            raise SearchError(f"cannot search {expr!r}: {exc}") from None
        return total, rows, [t.replace('""', '"') for t in terms]

    def _site(self, hosts: list[str], offset: int) -> tuple[int, list, list[str]]:
        """``site:HOST`` alone: the host's indexed pages in index order."""
        cond, args = _host_filter(hosts)
        total = self.db.execute(f"SELECT count(*) FROM pages p WHERE 1{cond}", args).fetchone()[0]
        rows = self.db.execute(f"SELECT p.url, p.title, p.text, 0.0 FROM pages p WHERE 1{cond} "
                               "ORDER BY p.id LIMIT ? OFFSET ?", (*args, PAGE_SIZE, offset)).fetchall()
        return total, rows, []

    def _related(self, url: str, offset: int, hosts: list[str] = ()) -> tuple[int, list, list[str]]:
        row = self.db.execute("SELECT d.rowid, d.title, d.body FROM pages p JOIN docs d "
                              "ON d.rowid = p.id WHERE p.url = ?", (url,)).fetchone()
        if row:
            own, tf = row[0], Counter(f"{row[1]} {row[2]}".split())
        else:
            doc = self.corpus.doc(url) if url else None
            if doc is None:
                return 0, [], []
            own, tf = 0, Counter(tokenize(doc.title) + tokenize(doc.text[:MAX_TEXT]))
        n = self.indexed
        weights = {}
        for term, count in tf.items():
            got = self.db.execute("SELECT doc FROM vocab WHERE term = ?", (term,)).fetchone()
            df = got[0] - (1 if own else 0) if got else 0
            if df > 0:
                weights[term] = count * math.log(n / df)
        top = sorted(weights, key=lambda t: (-weights[t], t))[:RELATED_TERMS]
        return self._keywords(" OR ".join(_phrase(t) for t in top), offset, own, hosts)

    def _links(self, url: str, offset: int, hosts: list[str] = ()) -> tuple[int, list, list[str]]:
        cond, args = _host_filter(hosts)
        total = self.db.execute("SELECT count(*) FROM pages p WHERE p.id IN "
                                f"(SELECT src FROM links WHERE dst = ?){cond}", (url, *args)).fetchone()[0]
        rows = self.db.execute(
            "SELECT p.url, p.title, p.text, 0.0 FROM pages p WHERE p.id IN "
            f"(SELECT src FROM links WHERE dst = ?){cond} ORDER BY p.id LIMIT ? OFFSET ?",
            (url, *args, PAGE_SIZE, offset)).fetchall()
        return total, rows, []
