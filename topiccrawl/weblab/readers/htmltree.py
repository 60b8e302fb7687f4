"""``htmltree:DIR[?host=H&opaque=1&labeldepth=N]`` -- any directory of HTML files served as one
site on host ``H`` (default ``htmltree.test``).

Every ``*.html``/``*.htm`` file under DIR is a page. Its URL mirrors its path, mounted so that the
files' own relative links (including ``<base href>``) resolve exactly as on disk: when links climb
above DIR before coming back down into it (Debian's LibreOffice help: ``<base href="../../../">``
then ``zh-CN/text/shared/...``), the site root is the highest directory they reach, so a page at
``DIR/scalc/main0106.html`` is served at ``/zh-CN/text/scalc/main0106.html``. Bodies are served as
they are, so a crawler following real links finds real pages.

* ``opaque=1`` serves each page at ``/p/<16 hex>.html`` (a hash of its path under DIR) so that
  the URL cannot leak a label (:meth:`HtmlTreeCorpus.url_of` and ``scrapy serveweb SPEC --url-of
  PATH`` name a page's URL by its path); the served bodies get every navigation link rewritten to absolute
  opaque URLs (links to missing same-site files become ``/x/<hash>``, still 404) and ``<base>``
  removed.
* Labels: an optional ``DIR/labels.tsv`` (``relative/path<TAB>label,label``), and with
  ``labeldepth=N`` the label ``dir:<name>`` where ``<name>`` is the N-th directory of the page's
  path under DIR (``labeldepth=1`` on ``.../help/zh-CN/text`` gives ``dir:scalc``, ``dir:swriter``,
  ...) -- so read-only trees such as ``/usr/share`` get labels without writing into them.
"""

from __future__ import annotations

import hashlib
import html
import posixpath
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from w3lib.encoding import html_body_declared_encoding

from topiccrawl.weblab.corpus import Corpus, CorpusError, Page, int_param
from topiccrawl.weblab.readers._links import iter_links, parse_html

DEFAULT_HOST = "htmltree.test"
_ATTR_RE = re.compile(r"""((?:href|src|content)\s*=\s*)(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)
_BASE_RE = re.compile(r"<base\b[^>]*>", re.I)
SUFFIXES = {".html", ".htm"}


@dataclass
class _File:
    rel: str  # path under DIR, '/'-separated
    url: str  # served URL
    mirror: str  # URL in the mirrored URL space (equal to url unless opaque)
    charset: str | None
    links: list[str]  # absolute links in the mirrored URL space (not opaque)


def _opaque_id(rel: str) -> str:
    return hashlib.sha1(rel.encode("utf-8")).hexdigest()[:16]


class HtmlTreeCorpus(Corpus):
    def __init__(self, root: Path, host: str = DEFAULT_HOST, opaque: bool = False,
                 labeldepth: int = 0):
        self.root, self.host, self.opaque = root, host, opaque
        self.name = f"htmltree:{root.name}"
        rels = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                      if p.suffix.lower() in SUFFIXES and p.is_file())
        if not rels:
            raise CorpusError(f"htmltree: {root} holds no .html/.htm files")
        parsed = {rel: self._read(rel) for rel in rels}
        mount = self._mount(parsed)  # path of DIR below the site root, e.g. "zh-CN/text/"
        self._mirror = {mount + rel: rel for rel in rels}
        self._opaque = {f"/p/{_opaque_id(rel)}.html": rel for rel in rels}
        self.files: dict[str, _File] = {}
        for rel, (doc, charset) in parsed.items():
            mirror = f"http://{host}/{quote(mount + rel)}"
            links = list(dict.fromkeys(a for *_, a in iter_links(doc, mirror))) if doc is not None else []
            self.files[rel] = _File(rel, self._served(mirror), mirror, charset, links)
        self._by_url = {f.url: f for f in self.files.values()}
        self._labels = {rel: set() for rel in rels}
        self._read_labels_tsv()
        if labeldepth > 0:
            for rel, labels in self._labels.items():
                parts = rel.split("/")
                if len(parts) > labeldepth:
                    labels.add(f"dir:{parts[labeldepth - 1]}")

    # -- loading -------------------------------------------------------------------------------
    def _read(self, rel: str):
        body = (self.root / rel).read_bytes()
        charset = html_body_declared_encoding(body)
        return parse_html(body, charset), charset

    def _mount(self, parsed: dict) -> str:
        """How many directories above DIR relative links climb on their way to a file inside
        DIR; the mount is those directories' names (``""`` when links stay inside DIR)."""
        top = str(self.root.resolve())
        highest = top
        for rel, (doc, _) in parsed.items():
            if doc is None:
                continue
            here = posixpath.dirname(posixpath.join(top, rel))
            base = urlsplit(next((b.get("href") for b in doc.iter("base") if b.get("href")), ""))
            base_dir = here
            if base.path and not base.scheme and not base.netloc:
                base_dir = posixpath.normpath(posixpath.join(here, unquote(base.path)))
                base_dir = base_dir if base.path.endswith("/") else posixpath.dirname(base_dir)
            for _el, _attr, raw, _pos in doc.iterlinks():
                link = urlsplit(raw.strip())
                if link.scheme or link.netloc or not link.path or link.path.startswith("/"):
                    continue
                target = posixpath.normpath(posixpath.join(base_dir, unquote(link.path)))
                if target.startswith(top + "/") and Path(target).is_file():
                    highest = posixpath.commonpath([highest, here, base_dir, target])
        return posixpath.relpath(top, highest) + "/" if highest != top else ""

    def _read_labels_tsv(self) -> None:
        path = self.root / "labels.tsv"
        if not path.is_file():
            return
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            rel, sep, labels = line.partition("\t")
            if not sep or rel not in self._labels:
                raise CorpusError(f"htmltree: {path}:{n}: expected 'relative/path<TAB>label,...' "
                                  f"naming an HTML file under {self.root}")
            self._labels[rel].update(lab.strip() for lab in labels.split(",") if lab.strip())

    # -- URL mapping ---------------------------------------------------------------------------
    def _rel(self, url: str) -> str | None:
        """The file under DIR served at ``url`` (mirrored or opaque URL space)."""
        parts = urlsplit(url)
        if parts.hostname != self.host:
            return None
        if self.opaque:
            return self._opaque.get(parts.path)
        return self._mirror_rel(url)

    def _served(self, link: str) -> str:
        """The served form of a link given in the mirrored URL space."""
        if not self.opaque or urlsplit(link).hostname != self.host:
            return link
        rel = self._mirror_rel(link)
        if rel is not None:
            return f"http://{self.host}/p/{_opaque_id(rel)}.html"
        return f"http://{self.host}/x/{_opaque_id(link)}"

    def _mirror_rel(self, link: str) -> str | None:
        path = unquote(urlsplit(link).path).lstrip("/")
        return self._mirror.get(path) or self._mirror.get(posixpath.join(path, "index.html"))

    def url_of(self, path: str) -> str:
        """The served URL of the file at ``path``: relative to DIR (``scalc/main0106.html``), an
        absolute path under DIR, or the page's mirrored URL path (``/zh-CN/text/scalc/...``).
        Raises :class:`CorpusError` (one line) when no page of the tree is there."""
        raw = path.strip()
        rel = None
        if raw and Path(raw).is_absolute():
            try:
                rel = Path(raw).resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                rel = None
        if rel not in self.files:
            rel = raw.removeprefix("./")
        if rel not in self.files:
            rel = self._mirror_rel(f"http://{self.host}/{quote(raw.lstrip('/'))}")
        if rel is None or rel not in self.files:
            raise CorpusError(f"htmltree: no page at {path!r} under {self.root} (give a path relative to it)")
        return self.files[rel].url

    # -- Corpus interface ----------------------------------------------------------------------
    def has_host(self, host: str) -> bool:
        return host == self.host

    def get(self, url: str) -> Page | None:
        rel = self._rel(url)
        if rel is None:
            return None
        f = self.files[rel]
        body = (self.root / rel).read_bytes()
        if self.opaque:
            body = self._rewrite(body, f)
        ctype = f"text/html; charset={f.charset}" if f.charset else "text/html"
        return Page(f.url, 200, {"Content-Type": ctype}, body, [self._served(a) for a in f.links])

    def _rewrite(self, body: bytes, f: _File) -> bytes:
        """``body`` with its navigation links replaced by their opaque URLs and ``<base>``
        removed; everything else is left byte for byte."""
        doc = parse_html(body, f.charset)
        if doc is None:
            return body
        mapping = {raw: self._served(absolute) for _el, _a, raw, absolute in iter_links(doc, f.mirror)}

        def swap(m: re.Match) -> str:
            value = html.unescape(next(v for v in m.groups()[1:] if v is not None))
            if value in mapping:
                value = mapping[value]
            elif m.group(1).lower().startswith("content"):  # <meta http-equiv=refresh>
                value = next((value.replace(k, v) for k, v in mapping.items() if k and k in value),
                             value)
            else:
                return m.group(0)
            return f'{m.group(1)}"{html.escape(value)}"'

        encoding = f.charset or "latin-1"
        text = body.decode(encoding, "surrogateescape")
        text = _BASE_RE.sub("", _ATTR_RE.sub(swap, text))
        return text.encode(encoding, "surrogateescape")


    def iter_urls(self) -> Iterator[str]:
        return (f.url for f in self.files.values())

    def labels(self, url: str) -> frozenset[str]:
        rel = self._rel(url)
        return frozenset(self._labels[rel]) if rel else frozenset()

    def __len__(self) -> int:
        return len(self.files)

    def hosts(self) -> list[str]:
        return [self.host]

    def seeds(self) -> list[str]:
        """The five pages with the most inlinks (the site's hubs)."""
        inlinks = Counter(a for f in self.files.values() for a in set(map(self._served, f.links)))
        return [u for u, _ in inlinks.most_common() if u in self._by_url][:5]

    def internal_links(self) -> int:
        """Links (distinct per page) whose target is a page of the tree."""
        return sum(self._mirror_rel(a) is not None and urlsplit(a).hostname == self.host
                   for f in self.files.values() for a in f.links)

    def describe(self) -> dict:
        return {"name": self.name, "pages": len(self), "host": self.host, "opaque": self.opaque,
                "links": sum(len(f.links) for f in self.files.values()),
                "internal_links": self.internal_links()}


def check_htmltree(arg: str, params: dict[str, str]) -> Path:
    """The checks of :func:`open_htmltree` (before a crawl starts its lab); returns the folder."""
    root = Path(arg).expanduser() if arg else None
    if root is None or not root.is_dir():
        raise CorpusError(f"htmltree: {arg or '(no directory given)'} is not a directory")
    unknown = set(params) - {"host", "opaque", "labeldepth"}
    if unknown:
        raise CorpusError(f"htmltree: unknown parameter(s) {', '.join(sorted(unknown))}; "
                          "expected host, opaque, labeldepth")
    int_param(params, "labeldepth", 0, "(htmltree)")
    return root


def open_htmltree(arg: str, params: dict[str, str]) -> HtmlTreeCorpus:
    root = check_htmltree(arg, params)
    host = (params.get("host") or DEFAULT_HOST).lower()
    opaque = params.get("opaque", "0") not in ("", "0", "false", "no")
    return HtmlTreeCorpus(root, host, opaque, int_param(params, "labeldepth", 0, "(htmltree)"))
