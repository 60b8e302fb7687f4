"""``webkb:DIR`` -- the raw WebKB "4 Universities" crawl (CMU World Wide Knowledge Base project,
1996-97, research use): 8,282 real pages from many hosts, served under their original URLs with
their original HTTP headers.

DIR holds ``webkb/<class>/<university>/<URL with ^ for />`` (possibly under ``data/``) or the
tarball ``webkb-raw-8282pages.tar.xz`` (extracted once into the cache). Labels: ``class:<class>``
and ``univ:<university>``. Files are latin-1; most start with the response header block that the
crawler stored (no status line). Quirks handled here, measured on the real files:

* 78 files start with ``WWW Alert: Redirection response ...`` followed by the redirect's headers
  and body: served as ``301`` with their ``Location``;
* ~130 files have no headers: served as ``text/html; charset=iso-8859-1``;
* URLs with a default port (``:80``), upper-case hosts or ``%2f`` escapes are served under their
  canonical form and found under any equivalent spelling; a directory URL without its trailing
  slash answers ``301`` to the slashed URL when only that one is in the set (as the 1996 servers
  did); ``ftp:`` and ``file:`` URLs (52 files) keep their scheme;
* 7 URLs were filed under two classes: the first class in sorted order is served, both carry
  labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from topiccrawl.weblab.corpus import Corpus, CorpusError, Page, _charset
from topiccrawl.weblab.readers._cache import check_layout, find_layout
from topiccrawl.weblab.readers._links import extract_links, url_key

ARCHIVE = "webkb-raw-8282pages.tar.xz"
DEFAULT_TYPE = "text/html; charset=iso-8859-1"
#: header names that may open a stored header block
_FIRST_HEADERS = {"date", "server", "mime-version", "content-type", "content-length", "expires",
                  "last-modified"}
#: hop-by-hop and transfer headers that must not be replayed (RFC 9110 section 7.6.1)
_DROP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
         "upgrade", "content-length", "content-transfer-encoding", "content-encoding"}
_HEADER_RE = re.compile(rb"^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*)$")
_NAME_CASE = {"etag": "ETag", "mime-version": "MIME-Version", "www-authenticate": "WWW-Authenticate"}


def file_url(filename: str) -> str:
    """The original URL of a WebKB file name: ``http:^^www.cs.wisc.edu^~x^`` -> ``http://...``."""
    return filename.replace("^", "/")


def parse_stored(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of a stored WebKB file (see the module docstring)."""
    status, rest = 200, raw
    first, _, after = raw.partition(b"\n")
    if first.startswith(b"WWW Alert:") and b"Redirect" in first:
        status, rest = 301, after
    elif re.match(rb"HTTP/\d\.\d \d{3}", first):
        status, rest = int(first.split()[1]), after
    headers, body = _header_block(rest)
    headers.setdefault("Content-Type", DEFAULT_TYPE)
    if status // 100 == 3 and not headers.get("Location", "").startswith(("http:", "/")):
        status = 200
    return status, headers, body


def _header_block(raw: bytes) -> tuple[dict[str, str], bytes]:
    """Split a stored header block (``Name: value`` lines up to a blank line) from the body."""
    lines = raw.split(b"\n")
    m = _HEADER_RE.match(lines[0].rstrip(b"\r"))
    if not m or m.group(1).lower().decode() not in _FIRST_HEADERS:
        return {}, raw
    headers: dict[str, str] = {}
    last = None
    for i, line in enumerate(lines):
        line = line.rstrip(b"\r")
        if not line:
            return headers, b"\n".join(lines[i + 1:])
        if line[:1] in b" \t" and last:  # folded continuation line
            headers[last] += " " + line.strip().decode("latin-1")
            continue
        m = _HEADER_RE.match(line)
        if not m:  # a body without the blank separator line
            return headers, b"\n".join(lines[i:])
        name = m.group(1).decode("latin-1").lower()
        last = None if name in _DROP else _NAME_CASE.get(name, name.title())
        if last:
            headers.setdefault(last, m.group(2).strip().decode("latin-1"))
    return headers, b""


class WebKBCorpus(Corpus):
    default_charset = "iso-8859-1"  # the crawl is latin-1; most files name no charset
    name = "webkb"

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[str, Path] = {}  # url_key -> file
        self._urls: dict[str, str] = {}  # url_key -> canonical URL served
        self._labels: dict[str, set[str]] = {}
        for cls_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for univ_dir in sorted(p for p in cls_dir.iterdir() if p.is_dir()):
                for path in sorted(univ_dir.iterdir()):
                    key = url_key(file_url(path.name))
                    self._files.setdefault(key, path)
                    self._urls.setdefault(key, key)
                    self._labels.setdefault(key, set()).update(
                        (f"class:{cls_dir.name}", f"univ:{univ_dir.name}"))
        if not self._files:
            raise CorpusError(f"webkb: {root} holds no <class>/<university>/<file> pages")
        self._hosts = {urlsplit(k).hostname for k in self._files}

    def has_host(self, host: str) -> bool:
        return host in self._hosts

    @lru_cache(maxsize=4096)  # noqa: B019 (one reader per process, kept for its life)
    def _page(self, key: str) -> Page:
        status, headers, body = parse_stored(self._files[key].read_bytes())
        links = extract_links(body, key, _charset(headers["Content-Type"]) or "iso-8859-1") \
            if status == 200 and "html" in headers["Content-Type"].lower() else []
        if status // 100 == 3:
            links = [urljoin(key, headers["Location"])]
        return Page(key, status, headers, body, links)

    def resolve(self, url: str) -> str | None:
        """The page ``url`` leads to: itself, or the page a 1996 server would have answered for
        it (``/dir`` -> ``/dir/``, ``/dir/index.html`` <-> ``/dir/``); None when it is dead."""
        key = url_key(url)
        if key in self._files:
            return key
        if key.endswith("/index.html"):
            alias = key[: -len("index.html")]
        elif key.endswith("/"):
            alias = key + "index.html"
        else:
            alias = key + "/"
        return alias if alias in self._files else None

    def get(self, url: str) -> Page | None:
        key = self.resolve(url)
        if key is None:
            return None
        if key != url_key(url):
            return Page(url, 301, {"Location": key, "Content-Type": DEFAULT_TYPE})
        return self._page(key)


    def iter_urls(self) -> Iterator[str]:
        return iter(self._files)

    def labels(self, url: str) -> frozenset[str]:
        return frozenset(self._labels.get(url_key(url), ()))

    def __len__(self) -> int:
        return len(self._files)

    def hosts(self) -> list[str]:
        return sorted(self._hosts)

    def seeds(self) -> list[str]:
        """The department pages of the four universities."""
        return [k for k, labs in self._labels.items()
                if "class:department" in labs and "univ:misc" not in labs]

    def internal_links(self) -> tuple[int, int, int]:
        """(links served, links to a page of the set, links to it without the aliases of
        :meth:`resolve`); parses every page."""
        total = inside = exact = 0
        for key in self._files:
            links = self._page(key).links
            total += len(links)
            inside += sum(self.resolve(link) is not None for link in links)
            exact += sum(url_key(link) in self._files for link in links)
        return total, inside, exact

    def describe(self) -> dict:
        return {"name": self.name, "pages": len(self), "hosts": len(self._hosts)}


def open_webkb(arg: str, params: dict[str, str]) -> WebKBCorpus:
    (root,) = find_layout(arg, ["webkb"], [ARCHIVE], "webkb")
    return WebKBCorpus(root)


def check_webkb(arg: str, params: dict[str, str]) -> None:
    """The layout check of :func:`open_webkb`, without reading or extracting anything."""
    check_layout(arg, ["webkb"], [ARCHIVE], "webkb")
