"""Scrapy requests as compact JSON-serialisable dicts (``Request.to_dict``), never pickle.

:func:`encode` keeps only the keys of ``to_dict`` whose value differs from a new ``Request``'s
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

META_KEY = "topiccrawl"  # = topiccrawl.crawl.scheduler.META_KEY (the spiders' meta key)

#: ``to_dict`` of a request with every default: keys with these values are not stored
DEFAULTS = {k: v for k, v in Request("data:,").to_dict().items() if k != "url"}
_ABSENT = object()


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
