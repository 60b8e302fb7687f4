"""Text processing: tokenisation (jieba for Chinese after Traditional -> Simplified conversion, a
Latin tokenizer otherwise), stop words, and HTML decoding/extraction (title, main text, meta
keywords/description, anchors with context).

Scrapy-free. ``tokenize`` is used everywhere a text becomes terms: relevance scoring, the search
engine of the offline web lab and the rankers, so that a topic word and a page word always match.
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import filterfalse
from urllib.parse import urldefrag, urljoin, urlsplit

with warnings.catch_warnings():
    # jieba 0.42 imports pkg_resources, which setuptools >= 80.9 (torch's dependency, with the
    # semantic extra) warns about on every start: a line of noise above every one-line error
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    import jieba
from charset_normalizer import from_bytes
from lxml import etree
from lxml import html as lxml_html
from w3lib.encoding import html_body_declared_encoding, html_to_unicode, read_bom, resolve_encoding, to_unicode
from w3lib.html import strip_html5_whitespace
from w3lib.url import safe_url_string

from topiccrawl.learning.normalize import to_simplified

jieba.setLogLevel(logging.WARNING)

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: a run of CJK characters, or a Latin/digit word (apostrophes and inner hyphens kept, but not an
#: English possessive's final "'s": "volcano's" is "volcano", "O'Sullivan" and "rock's-edge" stay
#: whole); the word branch excludes CJK so that "5号台风" splits into "5" and "号台风"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:(?:['’](?![sS](?![^\W_{_CJK}]|['’\-]))|-)[^\W_{_CJK}]+)*",
                       re.UNICODE)
_CJK_RE = re.compile(rf"[{_CJK}]")
_CJK_RUNS = re.compile(rf"([{_CJK}]+)")
#: the word branch of ``_TOKEN_RE`` on text without CJK characters once "_" is a space (there,
#: [^\W_] is \w), without its one-character words: the tokens kept, found faster. Possessive
#: (Python 3.11+): a run of word characters ends at a non-word character whatever follows, so
#: giving characters back never makes another match, and not trying is faster
try:
    _WORD_RE = re.compile(r"\w\w++(?:(?:['’](?!s(?![\w'’\-]))|-)\w++)*+|\w(?:(?:['’](?!s(?![\w'’\-]))|-)\w++)++")
except re.error:  # Python 3.10: the same matches, tried the long way
    _WORD_RE = re.compile(r"\w\w+(?:(?:['’](?!s(?![\w'’\-]))|-)\w+)*|\w(?:(?:['’](?!s(?![\w'’\-]))|-)\w+)+")
_LETTER_RE = re.compile(r"[^\W\d_]")

EN_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves also may might must shall one two
    s t""".split()
)

ZH_STOPWORDS = frozenset(
    """的 了 和 是 在 有 与 及 或 等 也 都 而 就 被 把 对 从 到 为 以 于 之 其 这 那 这些 那些 一个 我们 你们
    他们 她们 它们 我 你 他 她 它 着 过 将 并 但 很 还 又 已 已经 可以 可 要 会 能 上 下 中 个 来 去 说 让
    给 向 由 因 因为 所以 如果 虽然 但是 以及 其中 进行 通过 没有 不 各 该 每 此 之后 之前 目前 相关""".split()
)

STOPWORDS = EN_STOPWORDS | ZH_STOPWORDS


def has_cjk(text: str) -> bool:
    """True when the text contains a CJK ideograph."""
    return bool(_CJK_RE.search(text))


_LANGUAGE_SAMPLE = 1500


def detect_language(text: str) -> str:
    """``zh`` when CJK ideographs make up at least 10% of the letters (of the first
    ``_LANGUAGE_SAMPLE`` characters), else ``en``."""
    sample = text[:_LANGUAGE_SAMPLE]
    if not _CJK_RE.search(sample):
        return "en"
    cjk = len(_CJK_RE.findall(sample))
    letters = len(_LETTER_RE.findall(sample))
    return "zh" if letters and cjk / letters >= 0.1 else "en"


def load_segmenter() -> None:
    """Load jieba's dictionary now (about a second, once per process; a no-op after the first
    call) instead of at the first text with a Chinese character, which may come mid-crawl."""
    jieba.initialize()


@lru_cache(maxsize=65536)
def _cut(run: str) -> tuple[str, ...]:
    return tuple(jieba.lcut(run, HMM=True))


#: texts up to this length (anchor labels, menu items, short text nodes) are memoised: they
#: repeat across the pages of a site, and tokenising them dominates extraction otherwise
_SHORT = 80


@lru_cache(maxsize=131072)
def _tokenize_short(text: str) -> tuple[str, ...]:
    return tuple(_tokenize(text, STOPWORDS))


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Terms of ``text``: Chinese runs converted to Simplified (OpenCC ``t2s``) and segmented by
    jieba, Latin words lower-cased.

    Stop words, single Latin letters and pure punctuation are dropped; digits are kept (prices,
    years, ISBNs matter to some topics).
    """
    if len(text) <= _SHORT and stopwords is STOPWORDS:
        return list(_tokenize_short(text))
    return _tokenize(text, stopwords)


def _tokenize(text: str, stopwords: frozenset[str]) -> list[str]:
    if not _CJK_RE.search(text):
        return _latin_terms(text, stopwords)
    text = to_simplified(text)  # jieba's dictionary is Simplified: Traditional runs fall apart
    out: list[str] = []
    # the runs of CJK characters (odd places) and the text between them: _TOKEN_RE's CJK runs are
    # maximal and its words hold no CJK character, so its tokens never cross a run's edge
    for i, part in enumerate(_CJK_RUNS.split(text)):
        if i % 2:
            for tok in _cut(part) if len(part) > 1 else (part,):
                if tok not in stopwords:
                    out.append(tok)
        elif part:
            out += _latin_terms(part, stopwords)
    return out


def _latin_terms(text: str, stopwords: frozenset[str]) -> list[str]:
    """:func:`_tokenize` of text without CJK characters: one C-level findall, the same terms as
    ``_TOKEN_RE``'s words lower-cased, longer than one character, not stop words."""
    # every character but İ and Σ (lower-cased by context) lower-cases to one character of the
    # same class, so lower-casing the text first gives the same tokens
    tokens = ([tok for tok in map(str.lower, _TOKEN_RE.findall(text)) if len(tok) > 1]
              if "\u0130" in text or "\u03a3" in text else _WORD_RE.findall(text.lower().replace("_", " ")))
    return list(filterfalse(stopwords.__contains__, tokens))


def add_words(words: list[str]) -> None:
    """Teach jieba words it must not split (topic words such as 风暴潮), in Simplified form: at a
    frequency of 2000, or jieba's own where higher (a common word such as 不是 at 2000 would lose to
    its neighbours' words and split, into stop words)."""
    cjk = [to_simplified(w) for w in words if has_cjk(w)]
    if cjk:
        jieba.initialize()  # its dictionary's frequencies, loaded once
    for w in cjk:
        jieba.add_word(w, freq=max(2000, jieba.get_FREQ(w) or 0))
    _cut.cache_clear()
    _tokenize_short.cache_clear()


# ---------------------------------------------------------------------------------------------
# HTML: decoding and extraction of title, main text, meta data and anchors


@dataclass
class Anchor:
    """A link of a page: absolute URL, anchor text and ``context`` (the terms around the link)."""

    url: str
    text: str
    context: str


@dataclass
class Extracted:
    """What the crawler needs from a page; all empty for non-HTML or unreadable bodies."""

    title: str = ""
    text: str = ""
    keywords: list[str] = field(default_factory=list)
    description: str = ""
    language: str = "en"
    anchors: list[Anchor] = field(default_factory=list)


#: elements whose text is never main text (links inside them are still extracted, except in
#: script/style/template/noscript which hold no real links)
_NO_TEXT = ("script", "style", "noscript", "template")
_BOILERPLATE = ("nav", "footer", "aside", "select", "button", "iframe", "svg")
#: class/id values of navigation blocks on sites that do not use <nav>/<footer>
_BOILER_ATTR = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|footer|breadcrumbs?|sidebar|copyright)(?:$|[\s_-])",
    re.I,
)
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_XML_TYPES = ("text/xml", "application/xml")
_XHTML_ROOT = re.compile(rb"<html[\s>]", re.I)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
#: libxml2's limit on one text node (``XML_MAX_TEXT_LENGTH``): a page whose text is one node longer
#: than this parsed as empty with lxml's default parser
_HUGE_TEXT = 10_000_000
#: the HTML parsers of each thread (an lxml parser is not to be shared between threads): lxml's
#: defaults, and for markup above :data:`_HUGE_TEXT` or nested too deep, one with libxml2's limits
#: lifted (``huge_tree``, the depth limit too); the download size limit (``DOWNLOAD_MAXSIZE``)
#: bounds what it reads
_PARSERS = threading.local()


#: libxml2's message when markup nests deeper than its default limit (256): what lies deeper is lost
_TOO_DEEP = "Excessive depth in document"


def _parser(huge: bool) -> lxml_html.HTMLParser:
    """This thread's HTML parser: lxml's defaults, or with libxml2's limits lifted (``huge``)."""
    name = "huge" if huge else "plain"
    parser = getattr(_PARSERS, name, None)
    if parser is None:
        parser = lxml_html.HTMLParser(huge_tree=huge)
        setattr(_PARSERS, name, parser)
    return parser


_KEYWORD_SEP = re.compile(r"[,，;；、|/]")


def _garbled(text: str) -> bool:
    """Many U+FFFD replacement characters: the body was decoded with the wrong charset."""
    return text.count("\ufffd") > max(2, len(text) // 500)


#: the charsets a body that is not UTF-8 is told apart among (:func:`_sniff`): Simplified Chinese
#: (GB18030, a superset of GBK/GB2312), Traditional Chinese (Big5-HKSCS, a superset of Big5) and
#: the web's default for Western pages (windows-1252, as browsers assume)
_SNIFFED = ("gb18030", "big5hkscs", "cp1252")


def _sniff(body: bytes) -> str:
    """Charset of a body without BOM, header or meta: UTF-8 if valid, else the most plausible of
    :data:`_SNIFFED` by charset-normalizer's detection (GB18030 decodes almost any byte string,
    Big5 and windows-1252 text included, so validity alone cannot choose), else GB18030 if
    valid, else cp1252."""
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    best = from_bytes(body, cp_isolation=list(_SNIFFED)).best()
    if best is not None:
        return best.encoding
    try:
        body.decode("gb18030")
        return "gb18030"
    except UnicodeDecodeError:
        return "cp1252"


def decode_html(body: bytes, content_type: str | None) -> str:
    """Decode an HTML body like a browser: BOM > Content-Type charset > <meta> charset > sniffing.

    GBK/GB2312 are decoded as GB18030 (their superset). A wrong header (``charset=utf-8`` on a
    GBK page) shows as many U+FFFD characters; the body is then decoded again with its <meta>
    charset or the sniffed one, keeping the decoding with the fewest replacement characters.
    """
    _, text = html_to_unicode(content_type, body, auto_detect_fun=_sniff)
    if _garbled(text):
        for enc in (html_body_declared_encoding(body), _sniff(body)):
            if enc:
                retry = to_unicode(body, resolve_encoding(enc) or enc)
                if retry.count("\ufffd") < text.count("\ufffd"):
                    text = retry
    return text


def is_html(body: bytes, content_type: str | bytes | None) -> bool:
    """Whether a response is an HTML page the crawl reads: Content-Type ``text/html`` or
    ``application/xhtml+xml``; an XML type (``text/xml``, ``application/xml``, ``…+xml``) only when
    the document is XHTML (an ``<html`` element in its first 1,024 bytes: RSS and Atom feeds and
    sitemaps are not); no Content-Type, a body that is neither a PDF, nor binary, nor an XML
    document other than XHTML. Plain text, JSON, PDF, images and the rest are not pages
    (docs/scoring.md, "Which responses are pages")."""
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    head = body[:1024]
    if content_type:
        mime = content_type.split(";", 1)[0].strip().lower()
        if mime in _HTML_TYPES or not mime:
            return True
        if mime in _XML_TYPES or mime.endswith("+xml"):
            return _XHTML_ROOT.search(head) is not None
        return False
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:5].lower() == b"<?xml":  # an XML document: HTML only as XHTML
        return _XHTML_ROOT.search(head) is not None
    return not (head.startswith(b"%PDF") or (b"\x00" in head and read_bom(head)[0] is None))


def _text(el) -> str:
    """Whitespace-normalised text of an element; text nodes are joined with spaces (<p>a</p><p>b)."""
    return _squeeze(" ".join(el.itertext()))


def _squeeze(s: str) -> str:
    """``s`` with runs of whitespace as one space, stripped, as ``re.sub(r"\\s+", " ", s).strip()``
    (``str.split`` splits at exactly the characters ``\\s`` matches) without a regular expression."""
    return " ".join(s.split())


def document_terms(ex: Extracted) -> list[str]:
    """The terms a page is scored and classified by: its title, meta description and keywords, text."""
    return tokenize(" ".join((ex.title, ex.description, " ".join(ex.keywords), ex.text)))


def extract(body: bytes, url: str, content_type: str | None = None,
            context_words: int = 10, squeeze: bool = True) -> Extracted:
    """Title, main text, meta keywords/description, language and anchors of an HTML page.

    Anchors are absolute (resolved against ``<base href>`` and ``url``, percent-encoded like
    Scrapy requests), http(s) only, without fragment, one per ``<a href>`` in document order.
    ``context`` holds up to ``context_words`` terms (:func:`tokenize`) on each side of the link.
    Main text leaves out scripts, styles and navigation boilerplate (nav, footer, aside, forms,
    elements whose class/id says nav/menu/footer/sidebar...). Empty, non-HTML or unparsable
    bodies give an empty :class:`Extracted`.

    With ``squeeze=False`` the main text of a page without boilerplate keeps the page's runs of
    whitespace, which saves squeezing a long text: for callers that only tokenise it, as
    :func:`document_terms` does (no term spans whitespace, so the terms are the same). Everything
    else is the same, the language included (read from the squeezed text's start).
    """
    if not body or not body.strip() or not is_html(body, content_type):
        return Extracted()
    markup = _CONTROL.sub("", _XML_DECL.sub("", decode_html(body, content_type)))
    # a text node may pass libxml2's limit, which counts UTF-8 bytes: parse with the limits lifted
    if len(markup) > _HUGE_TEXT // 4 and len(markup.encode("utf-8", "replace")) > _HUGE_TEXT:
        try:
            return _extract(markup, url, context_words, squeeze, huge=True)
        except RecursionError:  # also nested deeper than the walk follows: libxml2's limits after all
            return _extract(markup, url, context_words, squeeze, deeper=False)
    return _extract(markup, url, context_words, squeeze)


def _extract(markup: str, url: str, context_words: int, squeeze: bool, huge: bool = False,
             deeper: bool = True) -> Extracted:
    """:func:`extract` of the decoded ``markup``; ``huge``: with libxml2's limits lifted. Markup
    nested deeper than libxml2's default limit (unclosed ``<font>`` tags, say), whose deeper text
    that limit drops, is parsed again with the limits lifted when ``deeper`` (kept as first parsed
    when also nested deeper than the walk below follows)."""
    parser = _parser(huge)
    try:
        root = lxml_html.document_fromstring(markup, parser=parser)
    except (etree.ParserError, ValueError):
        return Extracted()
    if deeper and not huge and any(_TOO_DEEP in error.message for error in parser.error_log):
        try:
            return _extract(markup, url, context_words, squeeze, huge=True)
        except RecursionError:
            pass
    for el in root.xpath("//script|//style|//noscript|//template"):
        el.drop_tree()
    etree.strip_elements(root, etree.Comment, etree.ProcessingInstruction, with_tail=False)

    title = " ".join(_text(t) for t in root.xpath("//title")).strip()
    metas = {}
    for meta in root.iter("meta"):
        key = (meta.get("name") or meta.get("property") or "").strip().lower()
        if key and key not in metas:
            metas[key] = _squeeze(meta.get("content") or "")
    keywords = [k.strip() for k in _KEYWORD_SEP.split(metas.get("keywords", "")) if k.strip()]
    description = metas.get("description") or metas.get("og:description", "")

    base = url
    for href in root.xpath("//base/@href"):
        base = urljoin(url, strip_html5_whitespace(href))
        break
    anchors, pieces = _anchors(root, base, context_words)

    page = root.find("body")
    page = root if page is None else page
    full = " ".join(pieces)  # as _text(page) once squeezed: the walk read the same text nodes in order
    boiler = [el for el in page.iter(*_BOILERPLATE)] + [
        el for el in page.xpath(".//*[@class or @id]")
        if _BOILER_ATTR.search(f"{el.get('class', '')} {el.get('id', '')}")]
    for el in dict.fromkeys(boiler):  # an element can match twice (tag and class)
        if el.getparent() is not None:
            el.drop_tree()
    if boiler:
        main = _text(page)
        if 20 * len(main) < len(full):  # squeezing never lengthens a text: else it cannot be 20× main
            full = _squeeze(full)
            if len(main) < len(full) // 20:  # the "boilerplate" held the page (e.g. class="menu-page")
                main = full
    else:
        main = _squeeze(full) if squeeze else full
    if not title:
        title = " ".join(_text(h) for h in root.xpath("//h1")[:1])
    # main is left unsqueezed only without boilerplate and with squeeze=False
    sample = main if boiler or squeeze else _squeezed_head(main, _LANGUAGE_SAMPLE)
    return Extracted(title, main, keywords, description, detect_language(f"{title} {sample} {description}"),
                     anchors)


def _squeezed_head(text: str, n: int) -> str:
    """:func:`_squeeze` of ``text``, or of a prefix of it, at least ``n`` characters long: the
    squeezed prefix of a text is a prefix of the squeezed text."""
    head = _squeeze(text[: 2 * n])
    return head if len(head) >= n or len(text) <= 2 * n else _squeeze(text)


def _anchors(root, base: str, context_words: int) -> tuple[list[Anchor], list[str]]:
    """Anchors with ±``context_words`` terms of surrounding text, from one walk over the tree,
    and the text pieces of the page's body in document order (joined with spaces and squeezed,
    the body's :func:`_text`, which need not walk the tree again).

    The walk collects text pieces in document order (an anchor's label is one piece); only the
    pieces next to an anchor are tokenised, until enough context terms are found: each end of a
    piece at most once, and of a long piece only as much as the context needs (:func:`_edge_terms`).
    """
    chunks: list[str] = []
    pieces: list[str] = []  # chunks, with an anchor's own text where its label falls back to title/alt
    found: list[tuple[str, str, int]] = []  # url, label, index of the label's piece

    def walk(el) -> None:
        href = el.get("href") if el.tag in ("a", "area") else None
        if href is not None:
            link = _link(base, href, origin)
            text = _text(el)
            label = text or _squeeze(el.get("title") or el.get("alt") or " ".join(el.xpath(".//img/@alt")))
            chunks.append(label)
            pieces.append(text)
            if link:
                found.append((link, label, len(chunks) - 1))
            return
        if el.text:
            chunks.append(el.text)
            pieces.append(el.text)
        for child in el:
            if isinstance(child.tag, str):
                walk(child)
            if child.tail:
                chunks.append(child.tail)
                pieces.append(child.tail)

    body = root.find("body")
    try:  # the scheme and host that links with an absolute path ("/a/b") are joined to
        parts = urlsplit(base)
        origin = (parts.scheme, parts.netloc) if parts.scheme in ("http", "https") and parts.netloc else None
    except ValueError:
        origin = None
    walk(root if body is None else body)
    n = context_words
    heads: dict[int, list[str]] = {}
    tails: dict[int, list[str]] = {}

    def head(i: int) -> list[str]:
        if i not in heads:
            heads[i] = _edge_terms(chunks[i], n, last=False)
        return heads[i]

    def tail(i: int) -> list[str]:
        if i not in tails:
            tails[i] = _edge_terms(chunks[i], n, last=True)
        return tails[i]

    anchors = []
    for link, label, i in found:
        before: list[str] = []
        after: list[str] = []
        j = i - 1
        while n and j >= 0 and len(before) < n:
            before = tail(j) + before
            j -= 1
        j = i + 1
        while n and j < len(chunks) and len(after) < n:
            after += head(j)
            j += 1
        anchors.append(Anchor(link, label, " ".join((before[-n:] if n else []) + after[:n])))
    return anchors, pieces


def _edge_terms(text: str, n: int, last: bool) -> list[str]:
    """The first ``n`` terms of ``text`` (with ``last``, the last ``n``; all when it has fewer),
    tokenising only as much of a long text as needed: cut at a space, it splits no term."""
    size = 16 * n
    while len(text) > size:
        cut = text.find(" ", len(text) - size) if last else text.rfind(" ", 0, size)
        if cut > 0:
            terms = tokenize(text[cut:] if last else text[:cut])
            if len(terms) >= n:
                return terms[-n:] if last else terms[:n]
        size *= 4
    terms = tokenize(text)
    return terms[-n:] if last else terms[:n]


def _link(base: str, href: str, origin: tuple[str, str] | None = None) -> str | None:
    """Absolute, percent-encoded http(s) URL of ``href`` without fragment, or None. ``origin`` is
    the scheme and host of ``base`` when they are http(s) and a host."""
    href = strip_html5_whitespace(href)
    if not href or href.startswith("#"):
        return None
    if not href.startswith(("http://", "https://")):
        href = (_join_rooted(*origin, href) if origin and href[:1] == "/" and href[1:2] != "/"
                else urljoin(base, href))
    return _absolute(href)


@lru_cache(maxsize=131072)
def _join_rooted(scheme: str, netloc: str, href: str) -> str:
    """``urljoin(base, href)`` for an ``href`` with an absolute path ("/a/b", not "//host"): it
    depends on the base's scheme and host only (RFC 3986, 5.2.2), so navigation links that recur on
    every page of a site are joined once."""
    return urljoin(f"{scheme}://{netloc}/", href)


#: a host a link may name (``urlsplit``'s lower-cased ``hostname``, IDNs already in punycode): a
#: DNS name or IPv4 address, or an IPv6 address (its brackets removed)
_HOST = re.compile(r"[a-z0-9_.-]+|[0-9a-f:.]+")


def followable(url: str) -> bool:
    """Whether ``url`` is an absolute http(s) URL a download can follow (the rule of a page's links,
    :func:`_absolute`): what seeds and example pages must be."""
    return _absolute(url) is not None


@lru_cache(maxsize=131072)
def _absolute(url: str) -> str | None:
    """Memoised: the same absolute links (navigation, hubs) recur on many pages. None for a link no
    download can follow: not http(s), a host with a space or a stray ``%``, a port that is not a
    number, or credentials (``user:pass@``) in it."""
    try:
        absolute = urldefrag(safe_url_string(url))[0]
        parts = urlsplit(absolute)
        _ = parts.port  # a port that is not a number in range raises ValueError
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host or "@" in parts.netloc or not _HOST.fullmatch(host):
        return None
    return absolute
