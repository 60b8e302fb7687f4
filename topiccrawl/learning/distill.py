"""A static model distilled from a BERT sentence encoder with numpy alone (no torch).

model2vec's recipe (Tulkens & van Dongen 2024): every token of the encoder's vocabulary goes
through the encoder once as ``[CLS] token [SEP]``; its vector is the mean of the three outputs;
the vectors are reduced by PCA and weighted by SIF, the token's frequency estimated from its rank
(Zipf). A text is then the mean of its tokens' vectors (model2vec's ``StaticModel``). Here the
encoder's forward pass (Devlin et al. 2019, BERT: embeddings, then layers of self-attention and a
feed-forward block, each followed by a residual sum and layer normalisation) is written in numpy
over the model's ``model.safetensors``, so distilling needs neither torch nor transformers
(docs/learned.md, "Distilling without torch").

Pure: :func:`bert_token_vectors` and :func:`static_vectors` work on arrays; :func:`distill_static`
reads a sentence-transformers folder and writes a model2vec folder.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
from scipy.special import erf

#: tokens left out of the static model (BERT's placeholders; model2vec's default pattern)
REMOVE = re.compile(r"\[unused\d+\]")
#: model2vec's defaults
SIF_COEFFICIENT = 1e-4
BATCH = 1024


class DistillError(Exception):
    """The model cannot be distilled here (one line)."""


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))  # the exact GELU (``hidden_act = "gelu"``)


def bert_token_vectors(weights: dict[str, np.ndarray], config: dict, ids: np.ndarray, cls: int, sep: int,
                       batch: int = BATCH) -> np.ndarray:
    """The mean of the encoder's last hidden states over ``[CLS] id [SEP]`` for each id: (n, hidden)."""
    w = {k.removeprefix("bert."): v for k, v in weights.items()}
    if config.get("hidden_act", "gelu") != "gelu":
        raise DistillError(f"hidden_act={config.get('hidden_act')!r}: only BERT's exact gelu is supported")
    heads, eps = int(config["num_attention_heads"]), float(config.get("layer_norm_eps", 1e-12))
    embed = w["embeddings.word_embeddings.weight"].astype(np.float32)
    hidden = embed.shape[1]
    size = hidden // heads
    positions = w["embeddings.position_embeddings.weight"][:3] + w["embeddings.token_type_embeddings.weight"][0]
    layers = []
    for layer in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{layer}."

        def linear(name: str, p: str = p) -> tuple[np.ndarray, np.ndarray]:  # (in, out) contiguous, for BLAS
            return (np.ascontiguousarray(w[p + name + ".weight"].T, dtype=np.float32),
                    w[p + name + ".bias"].astype(np.float32))

        qkv = [linear(f"attention.self.{n}") for n in ("query", "key", "value")]
        layers.append((np.concatenate([m for m, _ in qkv], axis=1), np.concatenate([b for _, b in qkv]),
                       linear("attention.output.dense"), (w[p + "attention.output.LayerNorm.weight"],
                                                          w[p + "attention.output.LayerNorm.bias"]),
                       linear("intermediate.dense"), linear("output.dense"),
                       (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])))
    out = np.empty((len(ids), hidden), dtype=np.float32)
    for start in range(0, len(ids), batch):
        chunk = ids[start:start + batch]
        b = len(chunk)
        tokens = np.stack([np.full_like(chunk, cls), chunk, np.full_like(chunk, sep)], axis=1)  # (b, 3)
        x = (embed[tokens] + positions).reshape(b * 3, hidden)
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        for wqkv, bqkv, (wo, bo), ln1, (wi, bi), (wf, bf), ln2 in layers:
            q, k, v = np.split((x @ wqkv + bqkv).reshape(b, 3, 3, heads, size).transpose(2, 0, 3, 1, 4), 3)
            scores = q[0] @ k[0].transpose(0, 1, 3, 2) / math.sqrt(size)  # (b, heads, 3, 3); no padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = ((scores / scores.sum(-1, keepdims=True)) @ v[0]).transpose(0, 2, 1, 3).reshape(b * 3, hidden)
            x = _layer_norm(context @ wo + bo + x, *ln1, eps)
            x = _layer_norm(_gelu(x @ wi + bi) @ wf + bf + x, *ln2, eps)
        out[start:start + b] = x.reshape(b, 3, hidden).mean(axis=1)
    return out


def static_vectors(vectors: np.ndarray, dims: int, sif: float = SIF_COEFFICIENT) -> np.ndarray:
    """PCA to ``dims`` (components signed by their largest score) and SIF weights from the rank."""
    n = len(vectors)
    centred = vectors.astype(np.float64) - vectors.mean(axis=0)
    _, vecs = np.linalg.eigh(centred.T @ centred / (n - 1))
    components = vecs[:, ::-1][:, :dims].T
    scores = centred @ components.T
    signs = np.sign(scores[np.argmax(np.abs(scores), axis=0), np.arange(scores.shape[1])])
    scores *= signs
    inv_rank = 1.0 / np.arange(2, n + 2)
    weight = sif / (sif + inv_rank / inv_rank.sum())
    return scores * weight[:, None]


def _load_weights(folder: Path) -> dict[str, np.ndarray]:
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise DistillError("reading the model needs the safetensors package (installed with model2vec)") from None
    path = folder / "model.safetensors"
    if not path.is_file():
        raise DistillError(f"{str(folder)!r} has no model.safetensors")
    return load_file(str(path))


def _read_model(folder: Path) -> tuple[dict, dict]:
    """The folder's ``config.json`` and ``tokenizer.json`` (OSError, ValueError when unreadable)."""
    return (json.loads((folder / "config.json").read_text(encoding="utf-8")),
            json.loads((folder / "tokenizer.json").read_text(encoding="utf-8")))


def _is_bert(config: dict, tokenizer_json: dict) -> bool:
    return config.get("model_type") == "bert" and (tokenizer_json.get("model") or {}).get("type") == "WordPiece"


def is_bert_folder(folder: str | Path) -> bool:
    """A folder holding a BERT encoder with a WordPiece tokenizer and safetensors weights."""
    folder = Path(folder)
    try:
        config, tokenizer_json = _read_model(folder)
    except (OSError, ValueError):
        return False
    return _is_bert(config, tokenizer_json) and (folder / "model.safetensors").is_file()


def distill_static(model_dir: str | Path, out_dir: str | Path, dims: int = 256) -> None:
    """Write a model2vec static model distilled from the BERT encoder in ``model_dir`` to ``out_dir``."""
    try:
        from model2vec import StaticModel
        from tokenizers import Tokenizer
    except ImportError:
        raise DistillError("a static model needs model2vec: pip install 'topiccrawl[static]'") from None
    folder = Path(model_dir)
    try:
        config, tokenizer_json = _read_model(folder)
    except (OSError, ValueError) as exc:
        raise DistillError(f"{str(folder)!r} is not a sentence-transformers model folder: {exc}") from None
    if not _is_bert(config, tokenizer_json):
        raise DistillError(f"model_type={config.get('model_type')!r}: distilling without torch supports BERT "
                           "encoders only (install model2vec[distill] for others)")
    vocab: dict[str, int] = tokenizer_json["model"]["vocab"]
    # as model2vec: no placeholders, and of the special tokens only the unknown and the padding token
    unk, pad = tokenizer_json["model"].get("unk_token", "[UNK]"), int(config.get("pad_token_id") or 0)
    special = {t["content"] for t in tokenizer_json.get("added_tokens") or [] if t.get("special")} - {unk}
    kept = np.array(sorted(i for t, i in vocab.items() if not REMOVE.match(t) and (t not in special or i == pad)),
                    dtype=np.int64)
    raw = bert_token_vectors(_load_weights(folder), config, kept, vocab["[CLS]"], vocab["[SEP]"])
    vectors = np.zeros((len(vocab), min(dims, raw.shape[1])), dtype=np.float16)
    vectors[kept] = static_vectors(np.nan_to_num(raw), dims=vectors.shape[1]).astype(np.float16)
    # a text is encoded without special tokens, padding or truncation (model2vec's tokenizer does the same)
    tokenizer_json.update(post_processor=None, padding=None, truncation=None)
    static = StaticModel(vectors=vectors, tokenizer=Tokenizer.from_str(json.dumps(tokenizer_json)),
                         config={"model_type": "model2vec", "architectures": ["StaticModel"],
                                 "tokenizer_name": folder.name, "apply_pca": dims, "sif_coefficient": SIF_COEFFICIENT,
                                 "hidden_dim": vectors.shape[1], "seq_length": 1_000_000, "normalize": True,
                                 "pooling": "mean"},
                         base_model_name=folder.name, normalize=True)
    static.save_pretrained(str(out_dir))
