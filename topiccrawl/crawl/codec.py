"""Queued requests in two compact forms, one module: memory packing and Redis JSON.

Both store exactly the request-meta layout of :mod:`topiccrawl.crawl.meta`, and both leave out
what the request's frontier :class:`~topiccrawl.strategies.base.Link` already carries (URL,
score, depth, potential).

**Memory** (:class:`RequestPacker`, the memory scheduler's queue): a request of the shape the
project's spiders yield becomes a ``(shape, parent, anchor)`` tuple; the shape tuple is shared by
every queued request of that shape (a packer holds its own cache of shapes). Anything else stays
a Request.

**Redis JSON** (:func:`encode` / :func:`decode`, the shared store): ``Request.to_dict``, never
pickle. :func:`encode` keeps only the keys of ``to_dict`` whose value differs from a new ``Request``'s
(method GET, empty body/headers/cookies/meta/cb_kwargs/flags, priority 0, dont_filter False,
encoding utf-8, no callback/errback): ``request_from_dict`` fills the absent ones in (it needs
``url`` only). ``headers`` and ``body`` hold bytes; they travel as latin-1 text (a lossless byte <->
code point mapping) and come back as the same bytes. Everything else in a request — ``meta``,
``cb_kwargs``, ``cookies`` — must be JSON already (the topiccrawl spiders' are); a request that is
not gets a one-line :class:`RequestCodecError` naming the URL.

Given the request's frontier :class:`~topiccrawl.strategies.simple.Link`, which the queue entry stores
next to the request, what the link already carries is not stored twice: the URL, and in ``meta``
the values equal to the link's — ``meta["topiccrawl"]`` ``score`` (``s``), ``depth`` (``d``),
``potential`` (``p``), Scrapy's ``meta["depth"]`` (``D``) — and a ``Referer`` header equal to
``meta["topiccrawl"]["parent"]`` (``r``, what RefererMiddleware sets on the focused spider's
links). The letters of the dropped values are in the key ``~``; :func:`decode` with the same link
restores them, so ``decode(encode(request, spider, link), spider, link)`` equals ``request``.
"""

from __future__ import annotations

import json

from scrapy import Request
from scrapy.utils.request import request_from_dict

from topiccrawl.crawl.engine import raw_header, set_raw_header
from topiccrawl.crawl.meta import LINK_KEYS, META_KEY, TRAP_META

#: ``to_dict`` of a request with every default: keys with these values are not stored
DEFAULTS = {k: v for k, v in Request("data:,").to_dict().items() if k != "url"}
_ABSENT = object()


#: keys of ``meta[META_KEY]`` a packed request keeps; score, depth and potential live in its Link
_PACKED_KEYS = LINK_KEYS
#: other meta keys a packed request may carry: Scrapy's depth and the trap guard's chain length
_PACKED_META = ("depth", TRAP_META)
_META_OK = frozenset({META_KEY, *_PACKED_META})
_PLAIN_META = frozenset({META_KEY, "depth"})
_TOPIC_OK = frozenset({*_PACKED_KEYS, "seq"})
_BITS = {key: 1 << i for i, key in enumerate(_PACKED_KEYS)}


_MAX_SHAPES = 4096


class RequestPacker:
    """Packs and unpacks the memory scheduler's queued requests for one spider.

    The shape of a packed request — (callback name, meta extras, keys present, Referer flag) —
    is interned in :attr:`shapes`: a crawl has few, so one tuple per shape is shared by every
    queued request of that shape."""

    def __init__(self, spider=None) -> None:
        self.spider = spider
        self.shapes: dict[tuple, tuple] = {}

    def pack(self, request: Request) -> tuple | Request:
        return pack(request, self.spider, self.shapes)

    def unpack(self, link) -> Request:
        return unpack(link, self.spider)


def pack(request: Request, spider, shapes: dict | None = None) -> tuple | Request:
    """A queued request in a fraction of its memory: a Scrapy Request with its meta dicts and
    Headers costs ~1.2–1.6 kB, this ``(shape, parent, anchor)`` tuple 64 bytes (+ the anchor as
    UTF-8 bytes; a whole queued URL, strings and fingerprint included, is measured in
    docs/benchmarks.md, "Scale"). Only the shape the project's spiders yield is packed — a GET to a
    spider method, meta holding only ``topiccrawl`` (the keys above, a text anchor) and the keys of
    ``_PACKED_META``, at most a Referer header; anything else stays a Request. :func:`unpack`
    rebuilds an equal request."""
    if (type(request) is not Request or request.method != "GET" or request.body or request.cookies
            or request.cb_kwargs or request.flags or request.priority or request.dont_filter
            or request.errback is not None or request.encoding != "utf-8"):
        return request
    callback = request.callback
    name = getattr(callback, "__name__", None)
    if callback is not None and (name is None or getattr(spider, name, None) != callback):
        return request
    headers = request.headers
    referer = raw_header(headers, b"Referer")  # normalised key: skip Headers' normalisation
    if len(headers) > (referer is not None) or (referer is not None and len(referer) != 1):
        return request
    meta = request.meta
    topic = meta.get(META_KEY)
    if not meta.keys() <= _META_OK or not isinstance(topic, dict) or not topic.keys() <= _TOPIC_OK:
        return request
    anchor = topic.get("anchor", _ABSENT)
    if type(anchor) is str:
        anchor = anchor.encode()
    elif anchor is not _ABSENT:
        return request
    parent = topic.get("parent", _ABSENT)
    if referer is not None:
        referer = referer[0]
        if isinstance(parent, str) and referer == parent.encode():
            referer = True  # the usual case: the Referer is the parent page (shared string)
    present = 0
    for key in topic:
        present |= _BITS.get(key, 0)
    plain = meta.keys() <= _PLAIN_META  # the common case: one value, no tuple
    extra = meta.get("depth", _ABSENT) if plain else tuple(meta.get(k, _ABSENT) for k in _PACKED_META)
    shape = (name, extra, present, referer)
    if shapes is not None and (referer is True or referer is None):  # hashable, and the shapes are few
        shape = shapes.get(shape) or (shapes.setdefault(shape, shape) if len(shapes) < _MAX_SHAPES else shape)
    return (shape, parent, anchor)


def unpack(link, spider) -> Request:
    """The Request of a link whose payload :func:`pack` packed (a Request is returned as is)."""
    payload = link.payload
    if not isinstance(payload, tuple):
        return payload
    (name, extra, present, referer), parent, anchor = payload
    if anchor is not _ABSENT:
        anchor = anchor.decode()
    values = (link.score, link.depth, link.potential, parent, anchor)
    meta = {META_KEY: {key: values[i] for i, key in enumerate(_PACKED_KEYS) if present >> i & 1}}
    for key, value in zip(_PACKED_META, extra if isinstance(extra, tuple) else (extra,)):
        if value is not _ABSENT:
            meta[key] = value
    request = Request(link.url, callback=getattr(spider, name) if name else None, meta=meta)
    if referer is not None:  # Headers is a dict of normalised keys -> value lists: what pack() read
        set_raw_header(request.headers, b"Referer", [parent.encode() if referer is True else referer])
    return request


class RequestCodecError(TypeError):
    """A request whose meta/cb_kwargs cannot be stored as JSON."""


def encode(request, spider, link=None) -> dict:
    """The compact dict of ``request`` (module docstring); with ``link``, without what it carries."""
    d = {k: v for k, v in _to_dict(request, spider).items() if DEFAULTS.get(k, _ABSENT) != v}
    if link is not None:
        _drop_linked(d, link)
    if "headers" in d:
        d["headers"] = {k.decode("latin-1"): [v.decode("latin-1") for v in vs] for k, vs in d["headers"].items()}
    if "body" in d:
        d["body"] = d["body"].decode("latin-1")
    try:
        json.dumps(d)
    except (TypeError, ValueError) as exc:
        raise RequestCodecError(f"request {request.url} cannot be stored in Redis as JSON: {exc}") from None
    return d


def decode(d: dict, spider, link=None):
    """The request of an :func:`encode` dict (``link``: the one it was encoded with, if any)."""
    d = dict(d)
    linked = d.pop("~", "")
    if link is not None:
        d.setdefault("url", link.url)
    if "headers" in d:
        d["headers"] = {k.encode("latin-1"): [v.encode("latin-1") for v in vs] for k, vs in d["headers"].items()}
    if "body" in d:
        d["body"] = d["body"].encode("latin-1")
    if linked:
        meta = d["meta"] = dict(d.get("meta", {}))
        topic = meta[META_KEY] = dict(meta.get(META_KEY, {}))
        for letter, key, value in (("s", "score", link.score), ("d", "depth", link.depth),
                                   ("p", "potential", link.potential)):
            if letter in linked:
                topic[key] = value
        if "D" in linked:
            meta["depth"] = link.depth
        if "r" in linked:
            d["headers"] = {**d.get("headers", {}), b"Referer": [topic["parent"].encode()]}
    return request_from_dict(d, spider=spider)


def _to_dict(request, spider) -> dict:
    """``request.to_dict(spider=spider)``; when the callback and errback are None or spider methods
    found under their own name, without to_dict's ``inspect.getmembers`` scan of the spider (~80 µs
    a request): the dict of ``Request.attributes``, as to_dict builds it."""
    methods = (request.callback, request.errback)
    if not all(f is None or getattr(spider, getattr(f, "__name__", ""), None) == f for f in methods):
        return request.to_dict(spider=spider)
    d = {attr: getattr(request, attr) for attr in request.attributes}
    d["callback"], d["errback"] = (None if f is None else f.__name__ for f in methods)
    d["headers"] = dict(request.headers)
    if type(request) is not Request:
        d["_class"] = f"{type(request).__module__}.{type(request).__name__}"
    return d


def _drop_linked(d: dict, link) -> None:
    """Remove from ``d`` (in place, copying the dicts it changes) what ``link`` carries."""
    if d["url"] == link.url:
        del d["url"]
    meta = d.get("meta")
    topic = meta.get(META_KEY) if meta else None
    if not isinstance(topic, dict):
        return
    meta, topic, linked = dict(meta), dict(topic), ""
    for letter, key, value in (("s", "score", link.score), ("d", "depth", link.depth),
                               ("p", "potential", link.potential)):
        if key in topic and type(topic[key]) is type(value) and topic[key] == value:
            del topic[key]
            linked += letter
    if type(meta.get("depth")) is int and meta["depth"] == link.depth:
        del meta["depth"]
        linked += "D"
    parent, headers = topic.get("parent"), d.get("headers", {})
    if isinstance(parent, str) and headers.get(b"Referer") == [parent.encode()]:
        headers = {k: v for k, v in headers.items() if k != b"Referer"}
        if headers:
            d["headers"] = headers
        else:
            del d["headers"]
        linked += "r"
    if not linked:
        return
    meta[META_KEY] = topic
    d["meta"], d["~"] = meta, linked
