"""Online link-value model: how likely a link leads to relevant pages, learned from the crawl itself.

Features of a link (:class:`LinkFeatures`) are hashed (``FeatureHasher``, no vocabulary to grow):
tokens ``a:word`` (anchor), ``u:tok`` (URL), ``c:word`` (words around the anchor) and buckets of
the holder page's distance since the last relevant page on its crawl path, of the depth and of the
numeric features (and, where the crawl computed it, of the anchor's closeness in meaning to the
topic under the semantic prior, ``n:bin``), plus a few dense columns: the holder page's
P(relevant), its host's yield so far, the holder's own value (the model's value of the link the
holder was reached by, as in Shark-search's inherited score) and the link's R(l) (WL paper eq. 5).

Labels come from the crawl's own link graph (context-graph style, as ACHE's link classifier with
distance levels). The value of a link is

    v(l) = γ^h   if the nearest relevant page is h ≤ k hops below the link's target
                 (h = 0: the target itself is relevant, P(relevant) ≥ ``threshold``),
    v(l) = 0     otherwise,

with k = 3 and γ = 0.5 by default. Values are recomputed at every retrain, so a link labelled 0
when its target was fetched gains value when a relevant page is later found below it. A soft
label v is trained with log loss as two weighted rows (class 1 with weight v, class 0 with
weight 1 − v), so the predicted probability estimates v. The graph is what the crawl saw: an
edge holder → target is known when the target was fetched through that link, or when a fetched
page links to a page fetched before.

Training: a bounded replay buffer of labelled links (links whose target was fetched); every
``retrain_every`` pages :meth:`LinkValueModel.retrain` runs ``SGDClassifier(loss="log_loss")``
``partial_fit`` over the whole buffer (``epochs`` passes, shuffled). Until the buffer holds at
least ``min_positive`` links of value > 0 and as many of value < 1, the model stays unfitted and
the frontier keeps ordering by R(l). With ``words="auto"`` a second model, without the word columns
(:meth:`LinkValueModel.structural_mask`), trains on the same links, and the progressive validation
picks which of the two predicts (:meth:`LinkValueModel._update_blend`).

Encoded links are compact ``bytes`` rows (uint32 hashed token indices, then the float32 dense
columns): queued links keep one, and any number of rows becomes one CSR matrix in a few
vectorised steps (:meth:`LinkValueModel.matrix`).
"""

from __future__ import annotations

import math
import re
import struct
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from struct import unpack_from

import numpy as np
from scipy import sparse
from scipy.special import expit
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import average_precision_score

from topiccrawl.learning.choices import check_choice
from topiccrawl.learning.ranking import roc_auc
from topiccrawl.learning.vocabulary import hashed_column

#: which fetched pages the link labels call relevant (:meth:`LinkValueModel.relabel`)
LABEL_RULES = ("fixed", "threshold", "count")

#: how the first fit sets the blend weight w (:meth:`LinkValueModel.retrain`)
FIRST_BLENDS = ("none", "holdout")
#: what the blend weight w is chosen by (:meth:`LinkValueModel._update_blend`): the ROC AUC, or the
#: average precision (which weighs the top of the ranking, the links a crawl fetches first)
BLEND_SCORES = ("auc", "ap")
#: what the blend weight w is validated against (:meth:`LinkValueModel._validation_labels`): the link
#: leads to a relevant page within k hops (v > 0), or its target is relevant (v = 1)
BLEND_LABELS = ("reach", "target")

#: which link features the model uses (:class:`LinkValueModel`, ``words``): all; without the words
#: (anchor, URL and context tokens); or both models side by side, validated like the blend
WORD_RULES = ("on", "off", "auto")

#: dense columns after the hashed ones, in this order
NUMERIC = ("holder_probability", "host_yield", "holder_value", "score")
_F = len(NUMERIC)
_DENSE_FMT = f"<{_F}f"
_INF = 255  # "no relevant page within k hops" in the distance arrays
_MAX_PARENTS = 64  # in-links kept per page for the distance labels
_URL_TOKEN_RE = re.compile(r"[^\W_]+")
_URL_DROP = frozenset({"http", "https", "www"})
_DEPTH_BUCKETS = (0, 1, 2, 3, 4, 5, 5, 5, 8)  # depth -> bucket label (8 = 8 and deeper)


@dataclass(slots=True)
class LinkFeatures:
    """What is known about a link when its holder page is processed.

    ``anchor``, ``url`` and ``context`` are term sequences (``url`` e.g. from :func:`url_tokens`);
    ``holder_probability`` is P(relevant | holder page), ``host_yield`` the holder host's smoothed
    share of relevant pages so far, ``distance`` the hops from the last relevant page on the
    holder's crawl path (0: the holder is relevant), ``holder_value`` the value of the link the
    holder was reached by, ``score`` the link's R(l), ``depth`` the target's depth, ``closeness``
    the anchor's closeness in meaning to the topic (the semantic prior's max(0, cos); NaN: not
    computed, no feature); ``terms``, the anchor's terms for the anchor association, and
    ``shift``, the page classifier's judgement of the anchor and its context
    (:mod:`topiccrawl.learning.anchorjudge`), with ``judge_doc`` the terms it judged (kept by a
    frontier that judges again; none of the three is encoded in the row).
    """

    anchor: Sequence[str] = ()
    url: Sequence[str] = ()
    context: Sequence[str] = ()
    holder_probability: float = 0.0
    host_yield: float = 0.0
    distance: int = 0
    depth: int = 0
    holder_value: float = 0.0
    score: float = 0.0
    closeness: float = math.nan
    terms: Sequence[str] = ()
    shift: float = 0.0
    judge_doc: tuple = ()


def url_tokens(url: str, limit: int = 24) -> list[str]:
    """Lower-cased word tokens of a URL without the scheme and ``www``. Tokens with digits become
    their shape (``#3`` for ``123``, ``#mixed`` for ``a1b2``), so that ids make no features of
    their own (a model would learn the labels of fetched pages by their ids)."""
    out = []
    for tok in _URL_TOKEN_RE.findall(url.lower()):
        if tok in _URL_DROP:
            continue
        if not tok.isalpha():  # ids: their shape only
            tok = f"#{min(len(tok), 9)}" if tok.isdigit() else "#mixed"
        elif len(tok) < 2:
            continue
        out.append(tok)
        if len(out) >= limit:
            break
    return out


#: memoised token columns of a model, cleared past this many tokens
_INDEX_MAX = 1 << 20


def _probability(classifier: SGDClassifier, X) -> np.ndarray:
    """The logistic model's P(class 1) of the rows of ``X``."""
    return expit(X @ classifier.coef_.ravel() + float(classifier.intercept_[0]))


def _pack_row(cols: list[int], *dense: float) -> bytes:
    return struct.pack(f"<{len(cols)}I{_F}f", *cols, *dense)


def refreshed_row(row: bytes, probability: float, weight: float) -> bytes:
    """``row`` with holder P ``probability`` and R(l) moved by ``weight``·(new − old P), clipped to
    [0, 1]; the same object when the stored P (float32) already equals it."""
    at = len(row) - 4 * _F
    old, host, value, score = unpack_from(_DENSE_FMT, row, at)
    new = unpack_from("<f", struct.pack("<f", probability))[0]
    if new == old:
        return row
    return row[:at] + struct.pack(_DENSE_FMT, new, host, value, min(1.0, max(0.0, score + weight * (new - old))))


def shifted_score_row(row: bytes, delta: float) -> bytes:
    """``row`` with R(l) moved by ``delta``, clipped to [0, 1] (the holder's P unchanged)."""
    if not delta:
        return row
    at = len(row) - 4 * _F
    holder, host, value, score = unpack_from(_DENSE_FMT, row, at)
    return row[:at] + struct.pack(_DENSE_FMT, holder, host, value, min(1.0, max(0.0, score + delta)))


def row_score(row: bytes) -> float:
    """R(l) of an encoded row (its last dense column)."""
    return unpack_from("<f", row, len(row) - 4)[0]


#: Latin words and runs of CJK characters (CJK Unified Ideographs and Extension A)
_QUICK_RE = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]+")


def quick_terms(text: str, limit: int = 64) -> list[str]:
    """Cheap features of a short text (an anchor, the words around it): lower-cased Latin words and
    overlapping character bigrams of Chinese runs (a single character stays itself). Bigrams are
    the usual features of Chinese text classification and cost no segmentation (jieba takes ~40x
    longer on an anchor)."""
    out: list[str] = []
    for run in _QUICK_RE.findall(text[:400].lower()):
        if run[0] <= "z":
            out.append(run)
        elif len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i:i + 2] for i in range(len(run) - 1))
        if len(out) >= limit:
            return out[:limit]
    return out


_EDGES = (0.02, 0.05, 0.1, 0.2, 0.4, 0.7)  # bins of a value in [0, 1]: finer near 0, where most are


def _bucket(x: float) -> int:
    """Bin of a value in [0, 1] (``_EDGES``; NaN in bin 0)."""
    return 0 if math.isnan(x) else bisect_right(_EDGES, x)


_CLOSENESS_EDGES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # bins of a cosine: evenly spaced, the last open


def _closeness_bin(x: float) -> int:
    """Bin of the anchor's closeness (``_CLOSENESS_EDGES``; −1 for NaN: no feature)."""
    return -1 if math.isnan(x) else bisect_right(_CLOSENESS_EDGES, x)


class LinkValueModel:
    """Hashed link features, the crawl's link graph and labels, and an online logistic model.

    Parameters: ``n_features`` hashed columns; ``k`` and ``gamma`` of the label v(l) = γ^h, h ≤ k;
    ``threshold`` on P(relevant) for a relevant page; ``retrain_every`` pages between retrains;
    ``buffer_size`` labelled links kept (oldest dropped first); ``min_positive`` links of value > 0
    (and < 1) needed before the first fit; ``alpha`` (L2) and ``epochs`` of the SGD; ``random_state``.

    Fitted attributes: ``classifier_`` (the ``SGDClassifier``), ``coef_`` (dense weights over
    ``n_features + len(NUMERIC)`` columns), ``intercept_``, ``version_`` (retrains that fitted).
    """

    def __init__(self, *, n_features: int = 2**18, k: int = 3, gamma: float = 0.5, threshold: float = 0.5,
                 retrain_every: int = 100, buffer_size: int = 50_000, min_positive: int = 3,
                 alpha: float = 1e-3, epochs: int = 3, random_state: int = 0, label_rule: str = "fixed",
                 first_blend: str = "none", blend_score: str = "auc", blend_label: str = "reach",
                 words: str = "on", blend_max: float = 1.0) -> None:
        check_choice("first_blend", first_blend, FIRST_BLENDS)
        if not 0.0 <= blend_max <= 1.0:
            raise ValueError(f"blend_max={blend_max!r}: expected a weight in [0, 1]")
        #: the largest weight the model may take in the blend: the candidate weights above it are left out
        self.blend_max = blend_max
        check_choice("words", words, WORD_RULES)
        self.words = words
        check_choice("blend_score", blend_score, BLEND_SCORES)
        check_choice("blend_label", blend_label, BLEND_LABELS)
        self.blend_score = blend_score
        self.blend_label = blend_label
        self.label_rule = label_rule
        self.first_blend = first_blend
        self.n_features = n_features
        self.k = k
        self.gamma = gamma
        self.threshold = threshold
        self.retrain_every = retrain_every
        self.buffer_size = buffer_size
        self.min_positive = min_positive
        self.alpha = alpha
        self.epochs = epochs
        self.random_state = random_state
        self.classifier_: SGDClassifier | None = None
        self.plain_: SGDClassifier | None = None  # words="auto": the model without word features
        self.words_ = words != "off"  # the predictions use word features
        self.coef_: np.ndarray | None = None
        self.intercept_ = 0.0
        self.version_ = 0
        self.retrains_ = 0
        self._memo: dict[str, dict] = {"a:": {}, "u:": {}, "c:": {}, "": {}}
        self._dense_weights: list[float] | None = None
        self._rng = np.random.default_rng(random_state)
        # the crawl's pages: url -> id, and per id: relevant, distance to the nearest relevant page
        # below (≤ k, else _INF), hops since the last relevant page on its crawl path, in-links
        self._ids: dict[str, int] = {}
        self._prob: list[float] = []  # P(relevant) per page: as added, or as last re-scored
        self._dirty = False  # pages or probabilities changed since the last relabel
        self._relevant = bytearray()
        self._dist = bytearray()
        self._since = bytearray()
        self._parents: list[list[int] | None] = []
        self._buffer: deque[tuple[bytes, int]] = deque(maxlen=buffer_size)
        self._pending_pages = 0  # pages since the last retrain
        self._fresh = 0  # examples added since the last retrain: the model has not trained on them
        #: weight w of the model in a link's value (1 − w)·R(l) + w·model, and the running AUC of
        #: each candidate w on fresh links (progressive validation, see :meth:`retrain`)
        self.blend_ = 0.0
        self.blend_auc_: dict[float, float] = {}
        self.plain_auc_: dict[float, float] = {}  # words="auto": the same for the model without words
        self._structural: np.ndarray | None = None

    # -- features ---------------------------------------------------------------------------------
    def _tokens(self, f: LinkFeatures) -> list[str]:
        toks = list(map("a:".__add__, f.anchor))
        toks += map("u:".__add__, f.url)
        toks += map("c:".__add__, f.context)
        toks += self._binned_tokens(self._bins(f))
        return toks

    def _bins(self, f: LinkFeatures) -> tuple:
        """The binned features' values: distance (k + 1: far), depth bucket, the bins of P, host
        yield, holder value and R(l), and the anchor closeness's bin (−1: none)."""
        d = f.distance
        return (d if 0 <= d <= self.k else self.k + 1, _DEPTH_BUCKETS[min(max(f.depth, 0), 8)],
                _bucket(f.holder_probability), _bucket(f.host_yield), _bucket(f.holder_value), _bucket(f.score),
                _closeness_bin(f.closeness))

    def _binned_tokens(self, bins: tuple) -> tuple[str, ...]:
        d, depth, p, y, v, s, n = bins
        toks = (f"d:{d}" if d <= self.k else "d:far", f"depth:{depth}", f"p:{p}", f"y:{y}", f"v:{v}", f"s:{s}")
        return toks if n < 0 else (*toks, f"n:{n}")

    def _column(self, token: str) -> int:
        """The hashed column of a token, as scikit-learn's ``FeatureHasher`` (murmurhash3, seed 0,
        ``alternate_sign=False``) computes it (:meth:`encode` remembers them, since tokens recur on
        every page)."""
        return hashed_column(token, self.n_features)

    def encode(self, features: Sequence[LinkFeatures]) -> list[bytes]:
        """Compact rows of links: hashed token indices (uint32, sorted; binary features: a repeated
        token, or a collision within the row, counts once), then the dense columns (float32)."""
        memo = self._memo  # columns: of a word by its prefix; of the binned features by their bins
        if len(memo[""]) + len(memo["a:"]) + len(memo["u:"]) + len(memo["c:"]) >= _INDEX_MAX:
            for m in memo.values():
                m.clear()
        anchor, url, context, binned = memo["a:"], memo["u:"], memo["c:"], memo[""]
        rows = []
        for f in features:
            cols = set(map(anchor.get, f.anchor))
            cols.update(map(url.get, f.url))
            cols.update(map(context.get, f.context))
            if None in cols:  # a word seen for the first time with this prefix
                cols = set(self._words(anchor, "a:", f.anchor))
                cols.update(self._words(url, "u:", f.url))
                cols.update(self._words(context, "c:", f.context))
            bins = self._bins(f)
            fixed = binned.get(bins)
            if fixed is None:
                fixed = binned[bins] = tuple(map(self._column, self._binned_tokens(bins)))
            cols.update(fixed)
            rows.append(_pack_row(sorted(cols), f.holder_probability, f.host_yield, f.holder_value, f.score))
        return rows

    def _words(self, memo: dict, prefix: str, words: Sequence[str]) -> list[int]:
        """The columns of ``prefix`` + each word, remembered in ``memo`` by word."""
        cols = []
        for w in words:
            col = memo.get(w)
            if col is None:
                col = memo[w] = self._column(prefix + w)
            cols.append(col)
        return cols

    def structural_mask(self) -> np.ndarray:
        """The columns that are not words: the dense ones and the hashed columns of every value the
        binned features can take (a word hashed onto one of these stays, as it does in every row)."""
        if self._structural is None:
            mask = np.zeros(self.n_features + _F, dtype=bool)
            mask[self.n_features:] = True
            # every value of each bin (:meth:`_bins`), each position cycling through its own
            values = (range(self.k + 2), sorted(set(_DEPTH_BUCKETS)), *[range(len(_EDGES) + 1)] * 4,
                      range(len(_CLOSENESS_EDGES) + 1))
            tokens = set()
            for i in range(max(map(len, values))):
                tokens.update(self._binned_tokens(tuple(v[i % len(v)] for v in values)))
            mask[[self._column(t) for t in sorted(tokens)]] = True
            self._structural = mask
        return self._structural

    def matrix(self, rows: Sequence[bytes], words: bool = True) -> sparse.csr_matrix:
        """The CSR matrix (``n_features + len(NUMERIC)`` columns) of encoded rows; without the word
        columns (:meth:`structural_mask`) if not ``words``."""
        n, width = len(rows), self.n_features + _F
        if not n:
            return sparse.csr_matrix((0, width), dtype=np.float64)
        lens = np.fromiter(map(len, rows), dtype=np.int64, count=n) // 4
        buf = b"".join(rows)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        dense = (indptr[1:, None] - np.arange(_F, 0, -1)[None, :]).ravel()  # the dense slots
        indices = np.frombuffer(buf, dtype=np.uint32).astype(np.int64)
        indices[dense] = np.tile(np.arange(self.n_features, width), n)
        data = np.ones(len(indices))
        data[dense] = np.frombuffer(buf, dtype=np.float32)[dense]
        X = sparse.csr_matrix((data, indices, indptr), shape=(n, width))
        if not words:
            X.data[~self.structural_mask()[indices]] = 0.0
            X.eliminate_zeros()
        return X

    def transform(self, features: Sequence[LinkFeatures]) -> sparse.csr_matrix:
        return self.matrix(self.encode(features))

    # -- the crawl's pages and links ----------------------------------------------------------------
    def page(self, url: str) -> int | None:
        """Id of a fetched page, None if it was not added."""
        return self._ids.get(url)

    def probability(self, node: int) -> float:
        """The stored P(relevant) of fetched page ``node`` (1/0 for a page added with ``relevant``)."""
        return self._prob[node]

    def probability_sum(self) -> float:
        """Σ of the stored P(relevant) of the fetched pages."""
        return math.fsum(self._prob)

    def add_page(self, url: str, probability: float | None = None, *, relevant: bool | None = None,
                 parent: str | None = None) -> int:
        """Record a fetched page (once; a second call returns its id and changes nothing).

        ``relevant`` if given, else ``probability ≥ threshold``. ``parent``: the page whose link
        it was fetched through (an edge of the graph, and its crawl path). Counts towards the next
        retrain (:attr:`retrain_due`)."""
        node = self._ids.get(url)
        if node is not None:
            return node
        node = self._ids[url] = len(self._relevant)
        rel = bool(relevant) if relevant is not None else (probability is not None and probability >= self.threshold)
        self._prob.append(float(rel) if relevant is not None else float(probability or 0.0))
        self._relevant.append(rel)
        self._dist.append(_INF)
        self._parents.append(None)
        up = self._ids.get(parent) if parent is not None else None
        if rel:
            since = 0
        elif up is not None:
            since = min(self._since[up] + 1, self.k + 1)
        else:
            since = self.k + 1
        self._since.append(since)
        if rel:
            self._lower(node, 0)
        if up is not None:
            self._edge(up, node)
        self._pending_pages += 1
        self._dirty = True
        return node

    def set_probabilities(self, probabilities: dict[str, float]) -> None:
        """New P(relevant) of fetched pages (a page classifier's refit); unknown URLs are ignored.
        They take effect at the next :meth:`relabel` (:meth:`labels` and :meth:`retrain` make it)."""
        ids, prob = self._ids, self._prob
        for url, p in probabilities.items():
            node = ids.get(url)
            if node is not None:
                prob[node] = p
                self._dirty = True

    def relabel(self, rule: str = "threshold") -> int:
        """Relevant pages from the stored probabilities, and the distances from them again:
        ``"threshold"``: P ≥ ``threshold``; ``"count"``: the n pages of highest P, n = round(Σ P)
        (with calibrated P, Σ P estimates the number of relevant pages). Returns the count."""
        p = np.asarray(self._prob, dtype=np.float64)
        if rule == "count":
            n = int(round(float(p.sum())))
            rel = np.zeros(len(p), dtype=bool)
            if n > 0:
                rel[np.argsort(-p, kind="stable")[:n]] = True
        else:
            rel = p >= self.threshold
        self._dirty = False
        self._relevant = bytearray(rel.astype(np.uint8).tobytes())
        self._dist = bytearray([_INF]) * len(p)
        for node in np.flatnonzero(rel).tolist():
            self._lower(node, 0)
        return int(rel.sum())

    def add_edge(self, holder: str, target: str) -> None:
        """A link between two fetched pages (unknown pages are ignored)."""
        h, t = self._ids.get(holder), self._ids.get(target)
        if h is not None and t is not None:
            self._edge(h, t)

    def _edge(self, h: int, t: int) -> None:
        parents = self._parents[t]
        if parents is None:
            parents = self._parents[t] = []
        if h in parents or len(parents) >= _MAX_PARENTS:
            return
        parents.append(h)
        if self._dist[t] < self.k:
            self._lower(h, self._dist[t] + 1)

    def _lower(self, node: int, d: int) -> None:
        """dist[node] ← min(dist[node], d), and up the in-links while within k hops."""
        dist, parents, k = self._dist, self._parents, self.k
        if d > k or d >= dist[node]:
            return
        dist[node] = d
        stack = [node]
        while stack:
            n = stack.pop()
            dn = dist[n] + 1
            if dn > k:
                continue
            for p in parents[n] or ():
                if dn < dist[p]:
                    dist[p] = dn
                    stack.append(p)

    def is_relevant(self, url: str) -> bool:
        node = self._ids.get(url)
        return node is not None and bool(self._relevant[node])

    def distance(self, url: str) -> int | None:
        """Hops from ``url`` down to the nearest relevant page known, None if none within k."""
        node = self._ids.get(url)
        return None if node is None or self._dist[node] == _INF else self._dist[node]

    def since(self, url: str) -> int:
        """Hops since the last relevant page on the crawl path to ``url`` (k + 1: none within k)."""
        node = self._ids.get(url)
        return self.k + 1 if node is None else self._since[node]

    def value(self, url: str) -> float:
        """The label v of a link to ``url``: γ^h, or 0."""
        d = self.distance(url)
        return 0.0 if d is None else self.gamma ** d

    def add_example(self, row: bytes, target: str) -> bool:
        """Keep a link whose target was fetched as a training example (False if it was not)."""
        node = self._ids.get(target)
        if node is None:
            return False
        self._buffer.append((row, node))
        self._fresh += 1
        return True

    @property
    def n_pages(self) -> int:
        return len(self._relevant)

    @property
    def n_relevant(self) -> int:
        return self._relevant.count(1)

    @property
    def n_examples(self) -> int:
        return len(self._buffer)

    # -- training -----------------------------------------------------------------------------------
    @property
    def retrain_due(self) -> bool:
        return self._pending_pages >= self.retrain_every

    def trained_pages_ago(self, pages: int) -> None:
        """The page count of :attr:`retrain_due` for a model trained elsewhere ``pages`` pages ago
        (a version another Redis worker published)."""
        self._pending_pages = max(0, int(pages))

    @property
    def fitted(self) -> bool:
        return self.coef_ is not None

    def labels(self) -> np.ndarray:
        """v(l) of the links in the replay buffer, from the current graph (relabelled first by
        ``label_rule`` when pages or probabilities changed since the last relabel)."""
        self.refresh_labels()
        if not self._buffer:
            return np.zeros(0)
        targets = np.fromiter((t for _, t in self._buffer), dtype=np.int64, count=len(self._buffer))
        d = np.frombuffer(bytes(self._dist), dtype=np.uint8)[targets].astype(np.float64)
        return np.where(d <= self.k, self.gamma ** np.minimum(d, self.k), 0.0)

    def refresh_labels(self) -> None:
        """Relabel the pages by ``label_rule`` when pages or probabilities changed since the last
        relabel (:meth:`labels` does it first; a Redis worker that does not train, before its stats)."""
        if self.label_rule != "fixed" and self._dirty:
            self.relabel(self.label_rule)

    def retrain(self) -> bool:
        """One online update over the replay buffer; True when the model is (now) fitted. Resets
        the page count of :attr:`retrain_due` either way."""
        self._pending_pages = 0
        self.retrains_ += 1
        v = self.labels()
        pos, neg = v > 0.0, v < 1.0
        if (self.classifier_ is None and
                (int(pos.sum()) < self.min_positive or int(neg.sum()) < self.min_positive)):
            return False
        rows = [row for row, _ in self._buffer]
        if self.classifier_ is None and self.first_blend == "holdout":
            self._holdout_blend(rows, v)
        else:
            self._validate(rows, v)
        if self.classifier_ is None:
            self.classifier_ = self._estimator()
        self._train(self.classifier_, rows, v, words=self.words != "off")
        if self.words == "auto":
            if self.plain_ is None:
                self.plain_ = self._estimator()
            self._train(self.plain_, rows, v, words=False)
        self.activate()
        self.version_ += 1
        return True

    def _estimator(self) -> SGDClassifier:
        return SGDClassifier(loss="log_loss", alpha=self.alpha, random_state=self.random_state)

    def activate(self) -> None:
        """``coef_`` and ``intercept_`` from the model the predictions use: ``classifier_``, or
        ``plain_`` when :attr:`words_` is False (its word columns zero)."""
        plain = self.plain_ is not None and not self.words_
        clf = self.plain_ if plain else self.classifier_
        if clf is None:
            return
        self.coef_ = clf.coef_.ravel().astype(np.float64, copy=True)
        if plain:
            self.coef_[~self.structural_mask()] = 0.0
        self.intercept_ = float(clf.intercept_[0])
        self._set_weights()

    def _train(self, classifier: SGDClassifier, rows: list[bytes], v: np.ndarray, words: bool = True) -> None:
        """``epochs`` shuffled passes of ``partial_fit`` over ``rows`` with soft labels ``v``
        (without the word columns if not ``words``)."""
        pos, neg = v > 0.0, v < 1.0
        which = np.concatenate([np.flatnonzero(pos), np.flatnonzero(neg)])  # a row per class it has
        y = np.concatenate([np.ones(int(pos.sum())), np.zeros(int(neg.sum()))])
        w = np.concatenate([v[pos], 1.0 - v[neg]])
        X = self.matrix([rows[i] for i in which.tolist()], words=words)  # built once, rows shuffled per epoch
        for _ in range(self.epochs):
            order = self._rng.permutation(len(y))
            classifier.partial_fit(X[order], y[order], classes=np.array([0.0, 1.0]), sample_weight=w[order])

    #: candidate weights of the model in the blend with R(l)
    BLENDS = (0.0, 0.25, 0.5, 0.75, 1.0)

    @property
    def blends(self) -> tuple[float, ...]:
        """The candidate weights up to :attr:`blend_max` (TOPICCRAWL_LEARNED_BLEND_MAX)."""
        return tuple(w for w in self.BLENDS if w <= self.blend_max)

    #: share of the labelled links held out at the first fit (``first_blend="holdout"``)
    HOLDOUT = 0.25

    def _holdout_blend(self, rows: list[bytes], v: np.ndarray) -> None:
        """``first_blend="holdout"``: before the first fit, a model trained on the older links
        ranks the newest ``HOLDOUT`` share of them (at least 20), which it has not seen, and the
        AUCs of the blends start :meth:`_validate`'s running means; w = the best (the smallest of
        ties). No change (w stays 0, R(l) alone) when either part lacks a class."""
        self._fresh = 0  # every labelled link is in the first fit
        n = len(rows)
        cut = n - max(20, int(n * self.HOLDOUT))
        if cut < 1:
            return
        y = self._validation_labels(v[cut:])
        train = v[:cut]
        if y.all() or not y.any() or int((train > 0).sum()) < self.min_positive or int((train < 1).sum()) < 1:
            return
        trial = self._estimator()
        self._train(trial, rows[:cut], train, words=self.words != "off")
        X = self.matrix(rows[cut:])
        plain = None
        if self.words == "auto":
            plain = self._estimator()
            self._train(plain, rows[:cut], train, words=False)
            plain = plain.predict_proba(self.matrix(rows[cut:], words=False))[:, 1]
        self._update_blend(X, trial.predict_proba(X)[:, 1], y, plain)

    def _validate(self, rows: list[bytes], v: np.ndarray) -> None:
        """Progressive validation: before the model trains on the links labelled since the last
        retrain, score them with each blend (1 − w)·R(l) + w·model and keep a running ROC AUC per
        w against :meth:`_validation_labels` (by default "leads to a relevant page", v > 0);
        :attr:`blend_` becomes the best w. The model takes over from R(l) only as far as it ranks
        unseen links better than R(l) does."""
        fresh, self._fresh = min(self._fresh, len(rows)), 0
        if self.classifier_ is None or fresh < 20:
            return
        y = self._validation_labels(v[-fresh:])
        if y.all() or not y.any():
            return
        X = self.matrix(rows[-fresh:])
        plain = None
        if self.plain_ is not None:
            plain = _probability(self.plain_, self.matrix(rows[-fresh:], words=False))
        self._update_blend(X, _probability(self.classifier_, X), y, plain)

    def _validation_labels(self, v: np.ndarray) -> np.ndarray:
        """What a blend is validated against (``blend_label``): ``reach``, the link leads to a relevant
        page within k hops (v > 0); ``target``, its target is relevant (v = 1; with γ = 1 every
        reaching link has v = 1 and the two agree)."""
        return v >= 1.0 if self.blend_label == "target" else v > 0.0

    def _update_blend(self, X, model: np.ndarray, y: np.ndarray, plain: np.ndarray | None = None) -> None:
        """The running ROC AUC (``blend_score="ap"``: average precision) of each blend
        (1 − w)·R(l) + w·``model`` on links ``X`` the model has not trained on (labels ``y``: leads
        to a relevant page), and with ``words="auto"`` of each blend with ``plain``, the model
        without word features; :attr:`blend_` becomes the best w and :attr:`words_` whether its
        model has the words (of ties: the smallest w, then the model with words)."""
        score = np.asarray(X[:, self.n_features + _F - 1].todense()).ravel()
        measure = average_precision_score if self.blend_score == "ap" else roc_auc
        for table, values in ((self.blend_auc_, model), (self.plain_auc_, plain)):
            if values is None:
                continue
            for w in self.blends:
                value = float(measure(y, (1.0 - w) * score + w * values))
                old = table.get(w)  # (blend_auc_ is named for the AUC, which it held before blend_score)
                table[w] = value if old is None else 0.5 * old + 0.5 * value
        runs = [(w, 0, auc) for w, auc in self.blend_auc_.items()]
        runs += [(w, 1, auc) for w, auc in self.plain_auc_.items()]
        best = max(auc for _, _, auc in runs)
        self.blend_, plain_won, _ = min(run for run in runs if run[2] >= best - 1e-9)
        if self.words == "auto":
            self.words_ = not plain_won

    # -- prediction ---------------------------------------------------------------------------------
    def predict_rows(self, rows: Sequence[bytes]) -> np.ndarray:
        """Values in [0, 1] of encoded rows: (1 − w)·R(l) + w·model, w = :attr:`blend_` (R(l) while
        unfitted). Read straight from the packed rows (the model's X·coef without a sparse matrix)."""
        n = len(rows)
        if not n:
            return np.zeros(0)
        words = np.fromiter(map(len, rows), dtype=np.int64, count=n) // 4
        buf = np.frombuffer(b"".join(rows), dtype=np.uint32)
        ends = np.cumsum(words)
        slots = ends[:, None] - np.arange(_F, 0, -1)[None, :]  # the dense columns of each row
        dense = buf.view(np.float32)[slots].astype(np.float64)
        score = dense[:, _F - 1]
        coef = self.coef_
        if coef is None:
            return score
        hashed = np.ones(len(buf), dtype=bool)
        hashed[slots.ravel()] = False
        owner = np.repeat(np.arange(n), words - _F)
        z = np.bincount(owner, weights=coef.take(buf[hashed]), minlength=n)
        z += dense @ coef[self.n_features:] + self.intercept_
        w = self.blend_
        return (1.0 - w) * score + w * expit(z)

    def predict_row(self, row: bytes) -> float:
        """Value of one encoded row, without building a matrix."""
        coef = self.coef_
        n = len(row) // 4 - _F
        dense = unpack_from(_DENSE_FMT, row, 4 * n)
        score = dense[_F - 1]
        if coef is None:
            return score
        w = self.blend_
        if w == 0.0:
            return score
        z = float(coef.take(np.frombuffer(row, dtype=np.uint32, count=n)).sum()) + self.intercept_
        for weight, x in zip(self._dense_weights, dense):
            z += weight * x
        return (1.0 - w) * score + w * (1.0 / (1.0 + math.exp(-z)) if z > -700.0 else 0.0)

    def predict_many(self, features: Sequence[LinkFeatures]) -> np.ndarray:
        return self.predict_rows(self.encode(features))

    def predict(self, features: LinkFeatures) -> float:
        """Value of one link in [0, 1]."""
        return self.predict_row(self.encode([features])[0])

    def _set_weights(self) -> None:
        """The dense columns' weights as Python floats (for :meth:`predict_row`)."""
        self._dense_weights = None if self.coef_ is None else self.coef_[self.n_features:].tolist()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for derived in ("_dense_weights", "_memo", "_structural"):  # rebuilt on load
            del state[derived]
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("label_rule", "fixed")
        state.setdefault("first_blend", "none")  # a model saved before the option
        state.setdefault("blend_score", "auc")
        state.setdefault("blend_label", "reach")
        state.setdefault("blend_max", 1.0)
        state.setdefault("words", "on")
        state.setdefault("words_", True)
        state.setdefault("plain_", None)
        state.setdefault("plain_auc_", {})
        state.setdefault("_dirty", True)
        state.setdefault("_prob", [float(r) for r in state.get("_relevant", b"")])
        self.__dict__.update(state)
        self._memo = {"a:": {}, "u:": {}, "c:": {}, "": {}}
        self._structural = None
        self._set_weights()

