"""Scrapy requests as JSON-serialisable dicts (``Request.to_dict``), never pickle.

``to_dict`` holds bytes in ``headers`` and ``body``; they travel as latin-1 text (a lossless
byte <-> code point mapping) and come back as the same bytes. Everything else in a request —
``meta``, ``cb_kwargs``, ``cookies`` — must be JSON already (the topiccrawl spiders' are); a
request that is not gets a one-line error naming the URL.
"""

from __future__ import annotations

import json

from scrapy.utils.request import request_from_dict


class RequestCodecError(TypeError):
    """A request whose meta/cb_kwargs cannot be stored as JSON."""


def encode(request, spider) -> dict:
    d = request.to_dict(spider=spider)
    d["headers"] = {k.decode("latin-1"): [v.decode("latin-1") for v in vs] for k, vs in d["headers"].items()}
    d["body"] = d["body"].decode("latin-1")
    try:
        json.dumps(d)
    except (TypeError, ValueError) as exc:
        raise RequestCodecError(f"request {request.url} cannot be stored in Redis as JSON: {exc}") from None
    return d


def decode(d: dict, spider):
    d = dict(d)
    d["headers"] = {k.encode("latin-1"): [v.encode("latin-1") for v in vs] for k, vs in d["headers"].items()}
    d["body"] = d["body"].encode("latin-1")
    return request_from_dict(d, spider=spider)
