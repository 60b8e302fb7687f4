"""DWDBRM (Wang, Li & Li, Data Mining 2022; after DISCO, Pham, Santos & Freire, WWW 2019): pages
and features. :class:`DiscoveredPage` (a fetched page as the discovery algorithms see it), the
vocabulary (TF-IDF over the seeds), :class:`FeatureSet` and :class:`PageVectorizer` (keyword
frequencies and URL/host name lengths), :class:`DWDBRMError` and the operator names.
Method, equations, ambiguities and defaults: ``docs/dwdbrm.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlsplit

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from topiccrawl.scoring.text import Extracted, tokenize

#: the discovery operators: keyword search, related search, forward crawl, backward crawl
OPERATORS = ("KS", "RS", "FC", "BC")
#: characters of a page's main text that are tokenised
MAX_CHARS = 5000


class DWDBRMError(ValueError):
    """Bad input to the discovery algorithms (one-line message)."""


# ---------------------------------------------------------------------------------------------
# pages and features


@dataclass
class DiscoveredPage:
    """A fetched page as the discovery algorithms see it. The URL is its identity."""

    url: str
    title: str = ""
    text: str = ""
    keywords: Sequence[str] = ()
    description: str = ""
    outlinks: Sequence[str] = ()
    operator: str = "seed"
    iteration: int = 0

    @classmethod
    def from_extracted(cls, url: str, extracted: Extracted, operator: str = "seed",
                       iteration: int = 0) -> DiscoveredPage:
        """From :func:`topiccrawl.scoring.text.extract` output; outlinks are the distinct anchor URLs."""
        return cls(url, extracted.title, extracted.text, tuple(extracted.keywords),
                   extracted.description, tuple(dict.fromkeys(a.url for a in extracted.anchors)),
                   operator, iteration)

    def document(self, max_chars: int = MAX_CHARS) -> str:
        """Title, meta keywords, meta description and the first ``max_chars`` of the text."""
        return " ".join((self.title, " ".join(self.keywords), self.description,
                         self.text[:max_chars]))


def _vectorizer(cls, **kwargs):
    return cls(tokenizer=tokenize, lowercase=False, token_pattern=None, **kwargs)


def build_vocabulary(seeds: Sequence[DiscoveredPage], topic_words: Iterable[str] = (),
                     background: Sequence[DiscoveredPage] = (), n_terms: int = 300,
                     max_chars: int = MAX_CHARS) -> list[str]:
    """The topic words (tokenised) then the ``n_terms`` terms of highest TF-IDF summed over the
    seed pages; IDF is computed over the seeds and ``background`` pages, so that words common
    on the whole web are down-weighted. Ties are broken alphabetically."""
    words = [t for w in topic_words for t in tokenize(w)]
    if not seeds:
        raise DWDBRMError("no seed pages: the vocabulary is learnt from them")
    tfidf = _vectorizer(TfidfVectorizer)
    docs = [p.document(max_chars) for p in (*seeds, *background)]
    try:
        matrix = tfidf.fit_transform(docs)
    except ValueError:  # no term in any document
        top = []
    else:
        weight = np.asarray(matrix[:len(seeds)].sum(axis=0)).ravel()
        terms = tfidf.get_feature_names_out()
        order = np.lexsort((terms, -weight))
        top = [str(terms[i]) for i in order[:n_terms] if weight[i] > 0]
    vocabulary = list(dict.fromkeys(words + top))
    if not vocabulary:
        raise DWDBRMError("empty vocabulary: the seed pages have no terms and no topic words "
                          "were given")
    return vocabulary


@dataclass
class FeatureSet:
    """Features of a list of pages: term frequencies over the vocabulary (CSR, one row per page)
    and URL/host name lengths."""

    urls: list[str]
    tf: sparse.csr_matrix
    url_length: np.ndarray
    domain_length: np.ndarray

    @cached_property
    def binary(self) -> sparse.csr_matrix:
        """Keyword presence (0/1)."""
        out = self.tf.copy()
        out.data[:] = 1.0
        return out

    def __len__(self) -> int:
        return len(self.urls)


class PageVectorizer:
    """Term-frequency rows over a fixed vocabulary, cached by URL: a page is tokenised once, so
    re-ranking only tokenises the pages that are new since the last call."""

    def __init__(self, vocabulary: Sequence[str], max_chars: int = MAX_CHARS):
        self.vocabulary = list(dict.fromkeys(vocabulary))
        self.max_chars = max_chars
        self._cv = _vectorizer(CountVectorizer, vocabulary=self.vocabulary, dtype=np.float64)
        self._row: dict[str, int] = {}
        self._blocks: list[sparse.csr_matrix] = []
        self._stacked: sparse.csr_matrix | None = None

    def __len__(self) -> int:
        return len(self._row)

    def transform(self, pages: Sequence[DiscoveredPage]) -> FeatureSet:
        new = {p.url: p for p in pages if p.url not in self._row}
        if new:
            self._blocks.append(self._cv.transform(
                [p.document(self.max_chars) for p in new.values()]).tocsr())
            for url in new:
                self._row[url] = len(self._row)
            self._stacked = None
        if self._stacked is None:
            self._stacked = sparse.vstack(self._blocks, format="csr") if self._blocks else \
                sparse.csr_matrix((0, len(self.vocabulary)))
        urls = [p.url for p in pages]
        tf = self._stacked[[self._row[u] for u in urls]]
        hosts = [urlsplit(u).hostname or "" for u in urls]
        return FeatureSet(urls, tf, np.array([len(u) for u in urls], dtype=float),
                          np.array([len(h) for h in hosts], dtype=float))
