"""Topic relevance of pages, anchors and links: the vector space model of the WL paper, §1.1.

* eq. 3: TF-IDF weight of term i in page j, ``w_ji = (n_ji / Σ_k n_jk) · lg(D / (1 + D_i))``
  with D the number of downloaded pages and D_i those containing term i;
* eq. 4: page relevance R(P) = cos(topic vector, page vector);
* eq. 5: link relevance R(l) = ∂·R(anchor_l) + (1 − ∂)·R(P_l), ∂ = 0.3.

The choices the paper leaves open (the IDF guard, which dimensions the cosine runs over, anchor
weights) are explained with a worked example in ``docs/scoring.md``. Scrapy-free.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from topiccrawl.scoring import text
from topiccrawl.scoring.topic import Topic

#: lower bound of the IDF factor of eq. 3. lg(D / (1 + D_i)) is <= 0 whenever a term is in all
#: but at most one page (always for the first pages of a crawl, and D = 0 has no logarithm);
#: such terms keep this small positive weight instead of vanishing or turning negative.
IDF_FLOOR = 0.05


class DocumentFrequencies:
    """Document frequencies D_i and page count D of eq. 3, updated one page at a time.

    With a ``vocabulary`` only those terms are counted (the crawler restricts scoring to the
    topic words, so this keeps the state tiny); asking for another term is then a KeyError.
    """

    def __init__(self, vocabulary: Iterable[str] | None = None):
        self.n_docs = 0
        self.vocabulary = frozenset(vocabulary) if vocabulary is not None else None
        self._df: Counter[str] = Counter()

    def add(self, terms: Iterable[str]) -> None:
        """Count one document, given its terms (repeats are counted once)."""
        self.n_docs += 1
        seen = set(terms)
        self._df.update(seen if self.vocabulary is None else seen & self.vocabulary)

    def df(self, term: str) -> int:
        """D_i: how many counted documents contain ``term``."""
        if self.vocabulary is not None and term not in self.vocabulary:
            raise KeyError(f"{term!r} is outside the vocabulary of these document frequencies")
        return self._df.get(term, 0)

    def idf(self, term: str, floor: float = IDF_FLOOR) -> float:
        """The IDF factor of eq. 3, ``lg(D / (1 + D_i))``, but at least ``floor``."""
        if not self.n_docs:
            return floor
        return max(math.log10(self.n_docs / (1 + self.df(term))), floor)

    def state(self) -> dict:
        vocab = None if self.vocabulary is None else sorted(self.vocabulary)
        return {"n_docs": self.n_docs, "vocabulary": vocab, "df": dict(self._df)}

    @classmethod
    def from_state(cls, state: Mapping) -> DocumentFrequencies:
        new = cls(state.get("vocabulary"))
        new.n_docs = int(state["n_docs"])
        new._df.update(state["df"])
        return new


def tfidf_vector(terms: list[str], df: DocumentFrequencies,
                 vocabulary: Iterable[str] | None = None,
                 floor: float = IDF_FLOOR) -> dict[str, float]:
    """TF-IDF vector of one page (eq. 3): ``(n_ji / Σ_k n_jk) · max(lg(D / (1 + D_i)), floor)``.

    Σ_k n_jk counts every term of the page; with a ``vocabulary`` only those components are
    returned (the others are never computed).
    """
    if not terms:
        return {}
    counts = Counter(terms)
    if vocabulary is not None:
        counts = Counter({t: counts[t] for t in vocabulary if t in counts})
    total = len(terms)
    return {t: n / total * df.idf(t, floor) for t, n in counts.items()}


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Cosine similarity of two sparse vectors (eq. 4); 0.0 if either is zero."""
    if len(a) > len(b):
        a, b = b, a
    dot = sum(v * b[k] for k, v in a.items() if k in b)
    if not dot:
        return 0.0
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm


class RelevanceScorer:
    """R(P), R(anchor) and R(l) of a topic (WL paper §1.1, eqs. 3–5).

    ``restrict_to_topic`` (default, the reading under which the paper's β = 0.62/0.67 make
    sense): the page vector is restricted to the topic-word dimensions before the cosine, so a
    page is judged by the *mix* of topic words it contains. With ``False`` the cosine runs over
    the full page vector and is small for long pages (docs/scoring.md).
    """

    def __init__(self, topic: Topic, df: DocumentFrequencies | None = None,
                 anchor_weight: float = 0.3, restrict_to_topic: bool = True,
                 idf_floor: float = IDF_FLOOR):
        if not 0.0 <= anchor_weight <= 1.0:
            raise ValueError(f"anchor_weight must be in [0, 1], got {anchor_weight!r}")
        if not idf_floor > 0:
            raise ValueError(f"idf_floor must be positive, got {idf_floor!r}")
        self.topic = topic
        self.topic_vector = dict(topic.words)
        self.restrict_to_topic = restrict_to_topic
        self.anchor_weight = anchor_weight
        self.idf_floor = idf_floor
        self.df = df if df is not None else DocumentFrequencies(
            self.topic_vector if restrict_to_topic else None)
        text.add_words(list(self.topic_vector))

    def _scope(self) -> dict[str, float] | None:
        return self.topic_vector if self.restrict_to_topic else None

    def page_relevance(self, terms: list[str], update_df: bool = True) -> float:
        """R(P) in [0, 1] (eq. 4 over eq. 3 weights) of a page given its terms.

        With ``update_df`` the page is first counted in the document frequencies, so D >= 1
        and the page's own terms have D_i >= 1.
        """
        if update_df:
            self.df.add(terms)
        vector = tfidf_vector(terms, self.df, self._scope(), self.idf_floor)
        return min(1.0, cosine(self.topic_vector, vector))

    def anchor_relevance(self, anchor_text_and_context: str) -> float:
        """R(anchor) in [0, 1]: the cosine with raw term-frequency weights (no IDF).

        Anchor text plus context is a dozen or two terms, nearly all occurring once, so TF-IDF
        would reduce to IDF alone, measured on whole pages; plain TF keeps short texts stable.
        """
        scope = self._scope()
        if scope is not None:
            # fast path: a topic term that is a token is also a substring, so no substring, no score
            lowered = anchor_text_and_context.lower()
            if not any(word in lowered for word in scope):
                return 0.0
        counts = Counter(text.tokenize(anchor_text_and_context))
        vector = {t: float(n) for t, n in counts.items() if scope is None or t in scope}
        return min(1.0, cosine(self.topic_vector, vector))

    def link_relevance(self, anchor_rel: float, parent_page_rel: float) -> float:
        """R(l) = ∂·R(anchor_l) + (1 − ∂)·R(P_l) (eq. 5); P_l is the page holding the link.

        The page the link points to is not downloaded yet, so the only page relevance known
        when a link is scored is that of the page it was found on.
        """
        return self.anchor_weight * anchor_rel + (1.0 - self.anchor_weight) * parent_page_rel

    def state(self) -> dict:
        return {"df": self.df.state(), "anchor_weight": self.anchor_weight,
                "restrict_to_topic": self.restrict_to_topic, "idf_floor": self.idf_floor}

    @classmethod
    def from_state(cls, state: Mapping, topic: Topic) -> RelevanceScorer:
        return cls(topic, DocumentFrequencies.from_state(state["df"]),
                   anchor_weight=state["anchor_weight"],
                   restrict_to_topic=state["restrict_to_topic"], idf_floor=state["idf_floor"])
