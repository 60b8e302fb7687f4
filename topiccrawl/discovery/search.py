"""Search backends for domain discovery: request URLs and response parsing, no HTTP.

A backend turns a discovery operator's query into a search-API URL (:meth:`SearchBackend.search_url`)
and a response body into :class:`SearchResult` records (:meth:`SearchBackend.parse`); the crawler
(Scrapy) makes the requests. Two backends:

* ``local`` — the offline web lab's engine (:mod:`topiccrawl.weblab.search`): keywords,
  ``related:URL`` and ``link:URL``, so it serves keyword search (KS), related search (RS) and
  backward crawl (BC). Default base URL ``http://search.topiccrawl.test/search``, answered by the
  lab through its HTTP proxy.
* ``searxng`` — any SearXNG instance by base URL, JSON API (``format=json`` must be enabled in its
  ``settings.yml``), keyword search only.

Both speak SearXNG's JSON: ``{"results": [{"url", "title", "content", ...}], ...}``. Both pass a
query string through unchanged, so ``site:HOST words`` (:meth:`SearchBackend.site_query`) restricts
the hits to one host: the lab's engine implements it, SearXNG hands it to its engines (the web
search engines it queries take ``site:``). Scrapy-free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from topiccrawl.weblab.search import SEARCH_HOST

#: discovery operators that need a search engine (forward crawl FC only fetches pages)
SEARCH_OPERATORS = ("KS", "RS", "BC")


class SearchBackendError(ValueError):
    """A bad backend configuration, an unsupported query or a malformed response (one line)."""


@dataclass(frozen=True)
class SearchResult:
    """One search hit."""

    url: str
    title: str = ""
    content: str = ""


def _http_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


class SearchBackend:
    """Base class: SearXNG-style ``GET base?q=...&format=json&pageno=N`` and JSON answers.

    Subclasses set :attr:`name` and :attr:`capabilities` (a subset of :data:`SEARCH_OPERATORS`).
    """

    name = "base"
    capabilities: frozenset[str] = frozenset()
    default_base_url = ""
    #: appended to the "not JSON" error
    json_hint = ""

    def __init__(self, base_url: str | None = None):
        base = (base_url or self.default_base_url).strip()
        if not _http_url(base):
            raise SearchBackendError(f"{self.name} search backend: base URL {base!r} is not an "
                                     "absolute http(s) URL")
        if not urlsplit(base).path.rstrip("/").endswith("/search"):
            base = base.rstrip("/") + "/search"
        self.base_url = base

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def query(self, operator: str, arg: str) -> str:
        """The query string of ``operator``: keywords for KS, ``related:URL`` for RS,
        ``link:URL`` for BC. Raises :class:`SearchBackendError` if this backend cannot serve it."""
        if operator not in self.capabilities:
            served = ", ".join(sorted(self.capabilities)) or "none"
            raise SearchBackendError(f"the {self.name} search backend cannot serve {operator} "
                                     f"(it serves: {served})")
        return {"KS": arg, "RS": f"related:{arg}", "BC": f"link:{arg}"}[operator]

    @staticmethod
    def site_query(host: str, words: str = "") -> str:
        """The query ``site:HOST words``: pages of that host (exact host name) matching ``words``."""
        host = host.strip().lower().rstrip(".")
        if not host or any(c in host for c in "/: \t"):
            raise SearchBackendError(f"site: needs a bare host name, got {host!r}")
        return f"site:{host} {words.strip()}".strip()

    def search_url(self, query: str, pageno: int = 1) -> str:
        """The request URL of ``query`` (see :meth:`query`), result page ``pageno`` (from 1)."""
        if not query.strip():
            raise SearchBackendError(f"{self.name} search backend: empty query")
        if not isinstance(pageno, int) or pageno < 1:
            raise SearchBackendError(f"{self.name} search backend: pageno must be a positive "
                                     f"integer, got {pageno!r}")
        return f"{self.base_url}?{urlencode({'q': query, 'format': 'json', 'pageno': pageno})}"

    def parse(self, body: bytes) -> list[SearchResult]:
        """Results of a JSON answer in order, duplicates (same URL) dropped, hits whose URL is
        not http(s) (``ftp:``, ``mailto:``, ``javascript:``, relative) skipped: a crawler cannot
        fetch them, and the rest of the page is still good.

        Raises :class:`SearchBackendError` (one line) for a body that is not JSON, an engine error
        (``{"error": ...}``), a missing ``results`` list or a result without a ``url`` string.
        """
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
            head = body[:60].decode("utf-8", "replace").strip().replace("\n", " ")
            raise SearchBackendError(f"{self.name} search response is not JSON ({reason}; "
                                     f"starts {head!r}){self.json_hint}") from None
        if not isinstance(data, dict):
            raise SearchBackendError(f"{self.name} search response is a JSON "
                                     f"{type(data).__name__}, expected an object with 'results'")
        if "error" in data and "results" not in data:
            raise SearchBackendError(f"{self.name} search engine error: {data['error']}")
        results = data.get("results")
        if not isinstance(results, list):
            raise SearchBackendError(f"{self.name} search response has no 'results' list")
        out: dict[str, SearchResult] = {}
        for i, hit in enumerate(results):
            url = hit.get("url") if isinstance(hit, dict) else None
            if not isinstance(url, str):
                raise SearchBackendError(f"{self.name} search result {i} has no 'url' string "
                                         f"(got {url!r})")
            if not _http_url(url):
                continue
            if url not in out:
                out[url] = SearchResult(url, str(hit.get("title") or ""),
                                        str(hit.get("content") or ""))
        return list(out.values())


class LocalSearchBackend(SearchBackend):
    """The offline web lab's search engine (keywords, ``related:URL``, ``link:URL``)."""

    name = "local"
    capabilities = frozenset({"KS", "RS", "BC"})
    default_base_url = f"http://{SEARCH_HOST}/search"


class SearXNGBackend(SearchBackend):
    """A SearXNG instance's JSON API (keyword search only). ``base_url`` is the instance root
    (``http://localhost:8888``) or its ``/search`` endpoint; ``language`` and ``categories``
    are passed on when given."""

    name = "searxng"
    capabilities = frozenset({"KS"})
    json_hint = " — is 'json' listed under search.formats in the SearXNG settings.yml?"

    def __init__(self, base_url: str | None = None, language: str | None = None,
                 categories: str | None = None):
        if not base_url:
            raise SearchBackendError("searxng search backend needs the instance's base URL")
        super().__init__(base_url)
        self.extra = {k: v for k, v in (("language", language), ("categories", categories)) if v}

    def search_url(self, query: str, pageno: int = 1) -> str:
        url = super().search_url(query, pageno)
        return f"{url}&{urlencode(self.extra)}" if self.extra else url


BACKENDS: dict[str, type[SearchBackend]] = {"local": LocalSearchBackend, "searxng": SearXNGBackend}


#: the request meta of a call to the search backend: an API the user named (``-a search_url``) or the
#: offline web's engine, not a page crawled, so its site's robots.txt is not asked (SearXNG's
#: disallows every ``?q=`` URL to crawlers, which refused every call of an instance the user runs)
SEARCH_CALL = {"dont_obey_robotstxt": True}


def make_backend(name: str, base_url: str | None = None, **options) -> SearchBackend:
    """A backend by name (``local``, ``searxng``); ``base_url`` None means the default."""
    cls = BACKENDS.get(name)
    if cls is None:
        raise SearchBackendError(f"unknown search backend {name!r} (known: {', '.join(BACKENDS)})")
    return cls(base_url, **options)
