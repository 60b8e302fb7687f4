"""The page classifier's judgement of a link's anchor and the words around it (docs/learned.md,
"The page classifier judges the words around the anchor").

A link's shift is λ·(z − μ)/σ: z the classifier's linear score
(:meth:`~topiccrawl.learning.classifier.PageClassifier.decision_function`) of the anchor's terms and
the Latin words around it taken as a short page; μ and σ the mean and standard deviation of z over
the last ``reference`` links with terms, computed under each fit of the classifier when it is first
used. A link without terms gets no shift. The Chinese terms around an anchor are left out: judged
too, they did not help (docs/learned.md, "The Chinese words around the anchor in the judge").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from topiccrawl.learning.classifier import hash_short
from topiccrawl.learning.linkvalue import quick_terms
from topiccrawl.scoring.text import STOPWORDS


def context_words(text: str) -> list[str]:
    """The Latin words (and numbers) of ``text`` as the page classifier's terms have them:
    lower-cased, stop words and single characters out."""
    return [w for w in quick_terms(text) if w[0] <= "z" and len(w) > 1 and w not in STOPWORDS]


class AnchorJudge:
    """Shifts of links' priorities by the page classifier's score of their anchor and context.

    ``weight`` is λ; ``reference`` the number of recent links whose scores standardise z.
    :meth:`shifts` needs the classifier and an id of its fit (the crawl's refit count): a new id
    rescores the reference links under the new fit.
    """

    #: links judged at once by :meth:`rescore`
    chunk = 50_000

    def __init__(self, weight: float, reference: int = 500) -> None:
        self.weight = weight
        self._recent: deque[tuple[str, ...]] = deque(maxlen=reference)
        self._fit = None
        self._mean, self._std = 0.0, 1.0
        self.judged = 0

    def shifts(self, classifier, fit, docs: Sequence[Sequence[str]]) -> np.ndarray:
        """λ·(z − μ)/σ per term list of ``docs`` (0 for an empty one) under ``classifier``."""
        out = np.zeros(len(docs))
        some = [i for i, d in enumerate(docs) if d]
        if not some:
            return out
        kept = [tuple(docs[i]) for i in some]
        n = classifier.n_features
        z = classifier.decision_function(hash_short(kept, n))
        self._recent.extend(kept)
        if fit != self._fit:
            ref = classifier.decision_function(hash_short(list(self._recent), n))
            self._mean, self._std, self._fit = float(ref.mean()), float(ref.std()) or 1.0, fit
        out[some] = self.weight * (z - self._mean) / self._std
        self.judged += len(some)
        return out

    def rescore(self, classifier, fit, docs: Sequence[Sequence[str]]) -> np.ndarray:
        """λ·(z − μ)/σ per term list of ``docs`` (non-empty) under a new fit of ``classifier``, μ
        and σ over ``docs`` themselves; later :meth:`shifts` under the same ``fit`` use that μ and σ
        (docs/learned.md, "The anchor judge kept current")."""
        if not docs:
            return np.zeros(0)
        n, step = classifier.n_features, self.chunk  # in chunks: a queue of 10^6 links is not one matrix
        z = np.concatenate([classifier.decision_function(hash_short([tuple(d) for d in docs[i:i + step]], n))
                            for i in range(0, len(docs), step)])
        self._mean, self._std, self._fit = float(z.mean()), float(z.std()) or 1.0, fit
        self.judged += len(docs)
        return self.weight * (z - self._mean) / self._std
