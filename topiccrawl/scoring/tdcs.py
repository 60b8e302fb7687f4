"""TD-CS: a topic described by a node of a category tree (DMOZ style), scored by Bayes over siblings.

Notation of the paper: node N_ij at level i (root = level 0), its siblings {N_i1 ... N_il}, topic
path N_ij.Path = {P_0 = root, ..., P_i = N_ij}, topic documents D_ij (the descriptive documents of
the node's subtree, :meth:`topiccrawl.scoring.dmoz.TopicTree.documents`), features F_ij(k).

* eqs. 1-2, :func:`disc_scores`: Disc(t) = between-sibling spread of the mean count of t over its
  within-node variance, times its mean count in the node;
* eqs. 3-6, :func:`laplace_log_probs` / :func:`log_posterior`: Pr(N_ij | q) by Bayes over the
  siblings, prior |D_ij| / Σ_c |D_ic|, multinomial Pr(q | N_ij) with Laplace smoothing over F_ij(k);
* eq. 7, :func:`path_weights` / :class:`TDCSModel`: Score(q) = Σ_c α_c Pr(P_c | q) / Σ_c α_c,
  α_c = 1 / (i − c + 1), c = 1..i.

The readings the paper leaves open (ε, raw vs length-normalised counts, the query space, the
keyword baselines TD-KW and TD-CTKW) are documented in ``docs/tdcs.md``. The scorers have the
interface of :class:`topiccrawl.scoring.relevance.RelevanceScorer`; :func:`make_scorer` builds one from a
tree spec (``wikispeedia:DIR`` or ``dmoz:STRUCTURE.rdf[,CONTENT.rdf]``). Scrapy-free.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from urllib.parse import parse_qsl

import numpy as np
from scipy import sparse
from scipy.special import logsumexp

from topiccrawl.scoring import text
from topiccrawl.scoring.dmoz import TopicTree, TreeError, read_dmoz, wikispeedia_tree
from topiccrawl.scoring.relevance import DocumentFrequencies, RelevanceScorer
from topiccrawl.scoring.topic import Topic

#: features per node; the paper's best K is about 175 and it reports K = 180
DEFAULT_K = 180
#: added to the within-node variance of eq. 2 (in squared counts of an average-length document)
EPS = 0.01
SCORERS = ("vsm", "tdcs", "tdctkw", "tdkw")
#: readings of F(k) in eq. 6: one set shared by the sibling group, or each sibling's own
SPACES = ("group", "node")


# ---------------------------------------------------------------------------------------------
# the pure algorithms


def count_matrix(docs: Sequence[Sequence[str]], vocabulary: Mapping[str, int] | None = None
                 ) -> tuple[sparse.csr_matrix, dict[str, int]]:
    """Document-term count matrix of tokenised documents. Without a ``vocabulary`` it is built
    (terms sorted, so ties break alphabetically); with one, other terms are ignored."""
    if vocabulary is None:
        vocabulary = {t: i for i, t in enumerate(sorted({t for d in docs for t in d}))}
    rows, cols, vals = [], [], []
    for r, doc in enumerate(docs):
        for t, n in Counter(t for t in doc if t in vocabulary).items():
            rows.append(r)
            cols.append(vocabulary[t])
            vals.append(n)
    shape = (len(docs), len(vocabulary))
    return sparse.csr_matrix((vals, (rows, cols)), shape=shape, dtype=np.float64), dict(vocabulary)


def _class_means(X: sparse.spmatrix, y: np.ndarray, n_classes: int) -> np.ndarray:
    sizes = np.bincount(y, minlength=n_classes)
    if (sizes == 0).any():
        raise ValueError(f"class {int(np.argmin(sizes))} has no documents")
    Y = sparse.csr_matrix((1.0 / sizes[y], (y, np.arange(len(y)))), shape=(n_classes, len(y)))
    return np.asarray((Y @ X).todense())


def length_normalise(X: sparse.spmatrix) -> sparse.csr_matrix:
    """Counts rescaled to a document of average length: x_dt · L̄ / L_d (empty rows stay 0)."""
    lengths = np.asarray(X.sum(axis=1)).ravel()
    lengths = lengths.astype(float)
    scale = np.divide(lengths.mean(), lengths, out=np.zeros_like(lengths), where=lengths > 0)
    return sparse.csr_matrix(sparse.diags(scale) @ X)


def disc_scores(X: sparse.spmatrix, y: Sequence[int], eps: float = EPS,
                normalise: bool = False) -> np.ndarray:
    """Disc(t) of every feature for every class (eqs. 1-2); an array of shape (l, V).

    For class j among l >= 2 sibling classes, with u_j = mean count of t per document of j:
    ``Disc_j(t) = [1/(l−1) Σ_{m≠j} (u_m − u_j)²] / [1/n_j Σ_{d∈D_j} (x_dt − u_j)² + eps] · u_j``.
    ``eps`` keeps a feature with zero variance in D_j (every document has the same count) finite:
    it then ranks by its spread and mean. With ``normalise`` the counts are first rescaled to an
    average-length document (:func:`length_normalise`), so long documents do not dominate.
    """
    y = np.asarray(y, dtype=int)
    n_classes = int(y.max()) + 1 if len(y) else 0
    if n_classes < 2:
        raise ValueError("Disc needs at least two sibling classes")
    X = length_normalise(X) if normalise else sparse.csr_matrix(X, dtype=np.float64)
    u = _class_means(X, y, n_classes)
    variance = np.maximum(_class_means(X.multiply(X), y, n_classes) - u * u, 0.0)
    s1, s2 = u.sum(axis=0), (u * u).sum(axis=0)
    between = (s2 - 2 * u * s1 + n_classes * u * u) / (n_classes - 1)  # Σ_m (u_m − u_j)², m = j adds 0
    return np.maximum(between, 0.0) / (variance + eps) * u


def top_k(scores: np.ndarray, k: int) -> list[np.ndarray]:
    """F(k) per class: indices of the ``k`` highest positive scores of each row (ties: lower index)."""
    out = []
    for row in np.atleast_2d(scores):
        order = np.argsort(-row, kind="stable")[:k]
        out.append(np.sort(order[row[order] > 0]))
    return out


def laplace_log_probs(X: sparse.spmatrix, y: Sequence[int], features: Sequence[np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``(log Pr(w | N_m), log Pr(N_m))`` of the sibling classes (eqs. 4-6).

    Pr(N_m) = |D_m| / Σ_c |D_c|;  Pr(w | N_m) = (1 + count(w, D_m)) / (|F_m| + Σ_{b∈F_m} count(b, D_m))
    with count(w, D_m) = 0 for w ∉ F_m. The query is read in the feature space of the sibling
    group, ∪_m F_m: the columns outside it get log-probability 0 in every class, so such words
    leave the posterior unchanged. Pass the same feature set for every class (:func:`group_space`)
    for the "group" reading of F(k).
    """
    y = np.asarray(y, dtype=int)
    n_classes, n_terms = len(features), X.shape[1]
    sizes = np.bincount(y, minlength=n_classes).astype(float)
    totals = np.asarray(sparse.csr_matrix(X).T @ np.eye(n_classes)[y]).T  # (l, V) counts per class
    union = np.zeros(n_terms, dtype=bool)
    logp = np.zeros((n_classes, n_terms))
    for m, feats in enumerate(features):
        union[feats] = True
        in_f = np.zeros(n_terms)
        in_f[feats] = totals[m, feats]
        logp[m] = np.log1p(in_f) - math.log(len(feats) + in_f.sum())
    logp[:, ~union] = 0.0
    return logp, np.log(sizes / sizes.sum())


def group_space(features: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The "group" reading of eq. 6: every sibling uses F = ∪_m F_m(k) (see docs/tdcs.md)."""
    union = np.unique(np.concatenate(list(features))) if len(features) else np.array([], int)
    return [union] * len(features)


def log_posterior(Xq: sparse.spmatrix, logp: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """log Pr(N_m | q) for each query row (eq. 3): Bayes over the siblings, normalised in log space."""
    joint = np.asarray(sparse.csr_matrix(Xq) @ logp.T) + log_prior
    return joint - logsumexp(joint, axis=1, keepdims=True)


def path_weights(level: int) -> np.ndarray:
    """α_c = 1 / (i − c + 1) for c = 1..i (eq. 7): the node itself weighs 1, its parent 1/2, ..."""
    return 1.0 / (level - np.arange(1, level + 1) + 1)


# ---------------------------------------------------------------------------------------------
# the TD-CS model of a node


@dataclass
class Level:
    """The sibling group of P_c: its members, the target's position, vocabulary ∪F, tables and
    each sibling's features F(k)."""

    siblings: list[str]
    target: int
    vocabulary: dict[str, int]
    logp: np.ndarray
    log_prior: np.ndarray
    features: list[list[str]]

    def posterior(self, counts: Counter) -> float:
        """Pr(P_c | q) (eq. 3); 1.0 when P_c has no sibling with documents."""
        if len(self.siblings) == 1:
            return 1.0
        q = np.zeros(len(self.vocabulary))
        for t, n in counts.items():
            if t in self.vocabulary:
                q[self.vocabulary[t]] = n
        joint = self.logp @ q + self.log_prior
        return float(math.exp(joint[self.target] - logsumexp(joint)))


class TDCSModel:
    """Score(q) = Σ_{c=1..i} α_c Pr(P_c | q) / Σ α_c (eq. 7) for a node at level i >= 1.

    Eq. 3 gives Pr(P_c | q) among the siblings of P_c, i.e. given its parent. With ``chain``
    (default) Pr(P_c | q) is the probability of the category in the tree,
    Π_{c' <= c} Pr(P_c' | q, P_c'-1); without it each level's sibling posterior is used as is,
    so a page far off the topic still gets the priors of the lower levels (about 0.5 for a
    tennis page and a storm node, docs/tdcs.md).
    """

    def __init__(self, node: str, levels: list[Level], chain: bool = True):
        self.node, self.levels, self.chain = node, levels, chain
        self.alpha = path_weights(len(levels))

    @classmethod
    def build(cls, tree: TopicTree, node: str, k: int = DEFAULT_K, eps: float = EPS,
              normalise: bool = False, space: str = "group", chain: bool = True) -> TDCSModel:
        """Features F(k) by Disc and the multinomial tables of every level of the node's path.

        ``space``: ``group`` (default) smooths every sibling over the union of the group's F(k);
        ``node`` is the literal eq. 6 with each sibling's own F(k), which lets the smallest
        sibling win every long page (docs/tdcs.md). Siblings without documents in their subtree
        are left out of a group (no estimate); a group reduced to the path node gives Pr = 1.
        """
        if space not in SPACES:
            raise TreeError(f"space must be one of {', '.join(SPACES)}, got {space!r}")
        if k < 1:
            raise TreeError(f"k must be a positive number of features, got {k!r}")
        path = tree.path(node)
        if len(path) < 2:
            raise TreeError(f"{tree.name}: {path[0]!r} is the root; pick a category below it")
        tokens = _Tokens(tree)
        levels = []
        for p in path[1:]:
            sibs = [s for s in tree.siblings(p) if tokens(s)]
            if p not in sibs:
                raise TreeError(f"{tree.name}: node {p!r} has no descriptive documents")
            if len(sibs) == 1:
                levels.append(Level(sibs, 0, {}, np.zeros((1, 0)), np.zeros(1), [[]]))
                continue
            docs = [d for s in sibs for d in tokens(s)]
            y = np.repeat(np.arange(len(sibs)), [len(tokens(s)) for s in sibs])
            X, vocab = count_matrix(docs)
            feats = top_k(disc_scores(X, y, eps, normalise), k)
            logp, prior = laplace_log_probs(X, y, group_space(feats) if space == "group" else feats)
            keep = np.flatnonzero(np.any(logp != 0, axis=0))
            terms = sorted(vocab, key=vocab.get)
            levels.append(Level(sibs, sibs.index(p), {terms[c]: i for i, c in enumerate(keep)},
                                logp[:, keep], prior, [[terms[c] for c in f] for f in feats]))
        return cls(path[-1], levels, chain)

    def level_posteriors(self, terms: Sequence[str]) -> list[float]:
        """Pr(P_c | q) among the siblings of P_c (eq. 3), c = 1..i."""
        counts = Counter(terms)
        return [lv.posterior(counts) for lv in self.levels]

    def score(self, terms: Sequence[str]) -> float:
        """Score(q) in [0, 1] (eq. 7)."""
        posts = np.array(self.level_posteriors(terms))
        if self.chain:
            posts = np.cumprod(posts)
        return float(self.alpha @ posts / self.alpha.sum())

    def features(self, level: int = -1) -> list[str]:
        """F(k) of the path node at a level (default: the node itself)."""
        lv = self.levels[level]
        return list(lv.features[lv.target])

    def state(self) -> dict:
        return {"node": self.node, "chain": self.chain, "levels": [
            {"siblings": lv.siblings, "target": lv.target, "vocabulary": list(lv.vocabulary),
             "logp": lv.logp.tolist(), "log_prior": lv.log_prior.tolist(),
             "features": lv.features} for lv in self.levels]}

    @classmethod
    def from_state(cls, state: Mapping) -> TDCSModel:
        levels = [Level(list(lv["siblings"]), lv["target"],
                        {t: i for i, t in enumerate(lv["vocabulary"])},
                        np.array(lv["logp"], dtype=float).reshape(len(lv["siblings"]), -1),
                        np.array(lv["log_prior"], dtype=float),
                        [list(f) for f in lv["features"]]) for lv in state["levels"]]
        return cls(state["node"], levels, state["chain"])


class _Tokens:
    """Tokenised topic documents D of tree nodes, computed once per node."""

    def __init__(self, tree: TopicTree):
        self.tree = tree
        self._own: dict[str, list[list[str]]] = {}

    def __call__(self, node: str) -> list[list[str]]:
        out = []
        for n in self.tree.subtree(node):
            if n.id not in self._own:
                self._own[n.id] = [text.tokenize(d) for d in n.docs]
            out += self._own[n.id]
        return out


# ---------------------------------------------------------------------------------------------
# keyword baselines


def node_keywords(tree: TopicTree, node: str, k: int, tokens: _Tokens | None = None) -> dict[str, float]:
    """TD-KW: the ``k`` terms of D_node with the highest TF-IDF, weights scaled to max 1.

    tf = count of the term in D_node / terms in D_node; idf = ln(N / df) over the documents of the
    node's context, the parent's subtree (the whole tree for a level-1 node), so words common to
    all siblings fall away.
    """
    tokens = tokens or _Tokens(tree)
    own = tokens(node)
    if not own:
        raise TreeError(f"{tree.name}: node {node!r} has no descriptive documents")
    parent = tree[node].parent
    context = tokens(parent) if parent is not None else own
    df = Counter(t for d in context for t in set(d))
    tf = Counter(t for d in own for t in d)
    total = sum(tf.values())
    weights = {t: n / total * math.log(len(context) / df[t]) for t, n in tf.items()}
    best = sorted((w, t) for t, w in weights.items() if w > 0)[::-1][:k]
    if not best:
        raise TreeError(f"{tree.name}: node {node!r} has no distinctive terms")
    return {t: w / best[0][0] for w, t in best}


def context_keywords(tree: TopicTree, node: str, k: int) -> dict[str, float]:
    """TD-CTKW: the keywords of every path node P_1..P_i, each weighted by its level's α_c (eq. 7)
    times its own TD-KW weight; a word of several levels keeps its highest weight."""
    path = tree.path(node)[1:]
    if not path:
        raise TreeError(f"{tree.name}: {node!r} is the root; pick a category below it")
    tokens = _Tokens(tree)
    merged: dict[str, float] = {}
    for alpha, p in zip(path_weights(len(path)), path):
        for t, w in node_keywords(tree, p, k, tokens).items():
            merged[t] = max(merged.get(t, 0.0), alpha * w)
    return merged


# ---------------------------------------------------------------------------------------------
# scorers with the interface of RelevanceScorer


class TDCSScorer:
    """R(P) = R(anchor) = TD-CS Score (eq. 7); R(l) as in the WL paper (eq. 5 of relevance.py)."""

    kind = "tdcs"

    def __init__(self, model: TDCSModel, anchor_weight: float = 0.3):
        if not 0.0 <= anchor_weight <= 1.0:
            raise ValueError(f"anchor_weight must be in [0, 1], got {anchor_weight!r}")
        self.model, self.anchor_weight = model, anchor_weight

    @classmethod
    def from_tree(cls, tree: TopicTree, node: str, k: int = DEFAULT_K, anchor_weight: float = 0.3,
                  **options) -> TDCSScorer:
        return cls(TDCSModel.build(tree, node, k, **options), anchor_weight)

    def page_relevance(self, terms: list[str], update_df: bool = True) -> float:
        """Score(q) of the page's terms; ``update_df`` is accepted and ignored (no page statistics)."""
        return self.model.score(terms)

    def anchor_relevance(self, anchor_text_and_context: str) -> float:
        return self.model.score(text.tokenize(anchor_text_and_context))

    def link_relevance(self, anchor_rel: float, parent_page_rel: float) -> float:
        return self.anchor_weight * anchor_rel + (1.0 - self.anchor_weight) * parent_page_rel

    def state(self) -> dict:
        return {"kind": self.kind, "model": self.model.state(), "anchor_weight": self.anchor_weight}

    @classmethod
    def from_state(cls, state: Mapping, topic: Topic | None = None) -> TDCSScorer:
        return cls(TDCSModel.from_state(state["model"]), state["anchor_weight"])


class TDKWScorer(RelevanceScorer):
    """The VSM scorer of relevance.py (eqs. 3-5 of the WL paper) over a node's keywords (TD-KW)."""

    kind = "tdkw"

    def __init__(self, keywords: Mapping[str, float], topic: Topic | None = None,
                 df: DocumentFrequencies | None = None, anchor_weight: float = 0.3, **options):
        base = topic or Topic(name=self.kind, language="en", words={}, beta=0.5)
        super().__init__(replace(base, words=dict(keywords)), df, anchor_weight, **options)

    @staticmethod
    def keywords(tree: TopicTree, node: str, k: int) -> dict[str, float]:
        return node_keywords(tree, tree[node].id, k)

    @classmethod
    def from_tree(cls, tree: TopicTree, node: str, k: int = DEFAULT_K, topic: Topic | None = None,
                  anchor_weight: float = 0.3) -> TDKWScorer:
        return cls(cls.keywords(tree, node, k), topic, anchor_weight=anchor_weight)

    def state(self) -> dict:
        return {**super().state(), "kind": self.kind, "keywords": dict(self.topic_vector)}

    @classmethod
    def from_state(cls, state: Mapping, topic: Topic | None = None) -> TDKWScorer:
        return cls(state["keywords"], topic, DocumentFrequencies.from_state(state["df"]),
                   state["anchor_weight"], restrict_to_topic=state["restrict_to_topic"],
                   idf_floor=state["idf_floor"])


class TDCTKWScorer(TDKWScorer):
    """TD-KW over the context topic keywords of the node's path (TD-CTKW, :func:`context_keywords`)."""

    kind = "tdctkw"

    @staticmethod
    def keywords(tree: TopicTree, node: str, k: int) -> dict[str, float]:
        return context_keywords(tree, node, k)


# ---------------------------------------------------------------------------------------------
# tree specs and the scorer factory


@lru_cache(maxsize=4)
def load_tree(spec: str) -> TopicTree:
    """``wikispeedia:DIR[?seed=0&sentences=3]`` or ``dmoz:FILE.rdf[,FILE2.rdf][?under=Top/Science]``."""
    kind, _, rest = (spec or "").strip().partition(":")
    arg, _, query = rest.partition("?")
    params = dict(parse_qsl(query))
    allowed = {"wikispeedia": {"seed", "sentences"}, "dmoz": {"under"}}
    if kind not in allowed or not arg:
        raise TreeError(f"bad topic tree {spec!r}: expected wikispeedia:DIR or dmoz:STRUCTURE.rdf[,CONTENT.rdf]")
    unknown = set(params) - allowed[kind]
    if unknown:
        raise TreeError(f"topic tree {spec!r}: unknown parameter {sorted(unknown)[0]!r} "
                        f"(allowed: {', '.join(sorted(allowed[kind]))})")
    if kind == "dmoz":
        return read_dmoz(*[p for p in arg.split(",") if p], under=params.get("under", ""))
    try:
        seed, sentences = int(params.get("seed", 0)), int(params.get("sentences", 3))
    except ValueError:
        raise TreeError(f"topic tree {spec!r}: seed and sentences must be integers") from None
    return wikispeedia_tree(arg, seed, sentences)


def make_scorer(kind: str, tree_spec: str | None = None, node: str | None = None,
                k: int = DEFAULT_K, topic: Topic | None = None, anchor_weight: float = 0.3):
    """The scorer of ``TOPICCRAWL_SCORER``: ``vsm`` (the topic's words, relevance.py), or ``tdcs``,
    ``tdctkw``, ``tdkw`` built from the node ``node`` of the tree ``tree_spec`` with ``k`` features
    (TD-CS) or keywords per node (TD-KW, TD-CTKW)."""
    if kind == "vsm":
        if topic is None:
            raise TreeError("the vsm scorer needs a topic")
        return RelevanceScorer(topic, anchor_weight=anchor_weight)
    if kind not in SCORERS:
        raise TreeError(f"unknown scorer {kind!r} (expected one of: {', '.join(SCORERS)})")
    if not tree_spec or not node:
        raise TreeError(f"the {kind} scorer needs a topic tree and a node (-a topic_tree=... -a topic_node=...)")
    tree = load_tree(tree_spec)
    node_id = tree[node].id
    if kind == "tdcs":
        return TDCSScorer.from_tree(tree, node_id, k, anchor_weight)
    cls = TDKWScorer if kind == "tdkw" else TDCTKWScorer
    return cls.from_tree(tree, node_id, k, topic, anchor_weight)


def scorer_from_state(state: Mapping, topic: Topic):
    """Rebuild any scorer from its ``state()`` (a JOBDIR resume); states without a kind are VSM."""
    cls = {"tdcs": TDCSScorer, "tdkw": TDKWScorer, "tdctkw": TDCTKWScorer}.get(state.get("kind"), RelevanceScorer)
    return cls.from_state(state, topic)


def tree_topic(tree: TopicTree, node: str, beta: float = 0.5, k: int = 20) -> Topic:
    """A :class:`Topic` for a category node: its TD-CTKW keywords as words and its id as label
    (Wikispeedia labels are node ids, so ground truth matches)."""
    n = tree[node]
    return Topic(name=n.title, language="zh" if text.has_cjk(n.title) else "en",
                 words=context_keywords(tree, n.id, k), beta=beta, labels=tree.labels(n.id),
                 description=f"category {n.id} of {tree.name}")
