"""URL keys and link extraction shared by the real-corpus readers (lxml + w3lib)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urljoin, urlsplit, urlunsplit

from lxml import etree
from lxml import html as lxml_html
from w3lib.url import canonicalize_url, safe_url_string

#: (tag, attribute) pairs that are navigation links (not images, scripts or styles)
LINK_ATTRS = {("a", "href"), ("area", "href"), ("frame", "src"), ("iframe", "src"),
              ("meta", "content")}
_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}
_SCHEMES = {"http", "https", "ftp", "file"}


def url_key(url: str) -> str:
    """A lookup key for ``url``: w3lib canonical form (lower-case host, normalised escapes,
    sorted query, no fragment) without a default port and with ``/`` for an empty path.
    A malformed URL is its own key."""
    try:
        parts = urlsplit(canonicalize_url(url))
        port = parts.port
    except ValueError:
        return url.partition("#")[0]
    host = parts.hostname or ""
    if port and port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path or "/", parts.query, ""))


def parse_html(body: bytes, charset: str | None = None):
    """An lxml document for ``body`` (None when it is not parseable HTML)."""
    if not body.strip():
        return None
    parser = lxml_html.HTMLParser(encoding=charset) if charset else None
    try:
        return lxml_html.document_fromstring(body, parser=parser)
    except (etree.ParserError, ValueError, LookupError):
        return None


def iter_links(doc, url: str) -> Iterator[tuple[object, str, str, str]]:
    """``(element, attribute, raw value, absolute URL without fragment)`` for every navigation
    link of ``doc``, resolved against ``<base href>`` (itself resolved against ``url``)."""
    base = url
    for el in doc.iter("base"):
        if el.get("href"):
            base = urljoin(url, safe_url_string(el.get("href").strip()))
        break
    for el, attr, raw, _pos in doc.iterlinks():
        if (el.tag, attr) not in LINK_ATTRS or not raw.strip():
            continue
        if el.tag == "meta" and "url=" not in (el.get("content") or "").lower().replace(" ", ""):
            continue  # a refresh without a target
        try:
            absolute = urljoin(base, safe_url_string(raw.strip())).partition("#")[0]
        except ValueError:  # a malformed URL (bad port, bad IPv6 literal) is a dead link
            continue
        if urlsplit(absolute).scheme in _SCHEMES:
            yield el, attr, raw, absolute


def extract_links(body: bytes, url: str, charset: str | None = None) -> list[str]:
    """Absolute outlinks of an HTML body, in document order, without duplicates."""
    doc = parse_html(body, charset)
    if doc is None:
        return []
    return list(dict.fromkeys(link for *_, link in iter_links(doc, url)))

