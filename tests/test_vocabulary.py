"""One vocabulary for a page's terms: the page classifier's rows and the anchor association's
counts come out exactly as when each looks the terms up on its own (docs/learned.md, "One
vocabulary for a page's terms")."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer

from topiccrawl.learning.association import TermAssociation
from topiccrawl.learning.classifier import counts_row, hash_terms
from topiccrawl.learning.focus import PageFocus
from topiccrawl.learning.vocabulary import Vocabulary, merge_columns
from topiccrawl.scoring.text import tokenize
from topiccrawl.weblab.corpus import open_corpus


def _pages(n: int = 400) -> list[list[str]]:
    """Terms of the first ``n`` pages of a small generated zh web (synthetic)."""
    web = open_corpus("generated:zh-disaster?pages=1000&seed=4")
    pages = []
    for url in web.iter_urls():
        doc = web.doc(url)
        if doc is not None and doc.text:
            pages.append(tokenize(doc.text))
        if len(pages) == n:
            break
    return pages


def _hashed(vocabulary: Vocabulary, terms: list[str], n_features: int):
    counts = Counter(terms)
    distinct = list(counts)
    ids = vocabulary.ids(distinct)
    cols = vocabulary.columns(ids, distinct, n_features)
    return ids, merge_columns(cols, np.fromiter(counts.values(), dtype=np.float64, count=len(distinct)))


def test_ids_are_given_in_order_once_and_not_beyond_the_bound():
    v = Vocabulary(max_terms=3)
    assert v.ids(["a", "b"]).tolist() == [0, 1]
    assert v.ids(["b", "c", "c", "d", "a"]).tolist() == [1, 2, 2, -1, 0]  # a repeat within a call, then full
    assert len(v) == 3 and v.ids(["d"]).tolist() == [-1]


def _reference_ids(index: dict[str, int], max_terms: int, distinct: list[str]) -> list[int]:
    """Ids as a plain dictionary gives them (the vocabulary's behaviour, without its hash table)."""
    out = []
    for term in distinct:
        if term not in index and len(index) < max_terms:
            index[term] = len(index)
        out.append(index.get(term, -1))
    return out


def test_hash_table_gives_the_dictionarys_ids_through_growth_the_bound_and_a_pickle():
    pages = _pages(300)
    v, reference = Vocabulary(max_terms=5000), {}
    for i, terms in enumerate(pages):
        distinct = list(dict.fromkeys(terms + [f"{t}·{i % 37}" for t in terms[:40]]))  # more terms
        if i % 3 == 0:
            distinct = distinct + distinct[:5]  # repeats within a call get one id
        assert v.ids(distinct).tolist() == _reference_ids(reference, 5000, distinct)
        if i == 150:  # a resumed crawl: the table is not pickled (a new process salts string
            v = pickle.loads(pickle.dumps(v))  # hashes differently); it is rebuilt from the terms
            assert v._tabled == 0 and len(v._slots) == 0 and len(v) == len(reference)
    assert len(v) == 5000 and v.index == reference  # the bound was reached; the table grew many times
    mask = len(v._slots) - 1
    used = v._slots >= 0
    assert int(used.sum()) == 5000 and 2 * 5000 <= len(v._slots)
    assert (np.flatnonzero(used) != (v._keys[used] & mask)).any()  # some terms sit past their home slot
    unseen = ["未见过的词", "another unseen term"]
    probe = [t for terms in pages[::10] for t in terms[:30]] + unseen
    assert v.lookup(probe).tolist() == [reference.get(t, -1) for t in probe]
    assert len(v) == 5000  # lookup adds nothing
    # an empty vocabulary, and one that has seen only an empty page, find nothing
    empty, after_an_empty_page = Vocabulary(), Vocabulary()
    assert after_an_empty_page.ids([]).tolist() == []
    for fresh in (empty, after_an_empty_page):
        assert fresh.lookup(unseen).tolist() == [-1, -1] and len(fresh) == 0
    # an index filled directly (as a restored association does) is tabled on the next look-up
    w = Vocabulary()
    w.index.update(reference)
    assert w.lookup(probe).tolist() == [reference.get(t, -1) for t in probe]
    assert w.ids(unseen).tolist() == [5000, 5001]


def test_columns_are_the_hashing_vectorizers_with_and_without_an_id():
    v = Vocabulary(max_terms=50)
    pages = _pages(40)
    for n_features in (2**18, 64):  # 64 columns: many terms share one, and their counts add up
        expected = HashingVectorizer(analyzer=lambda d: d, n_features=n_features, alternate_sign=False,
                                     norm=None).transform(pages)
        for i, terms in enumerate(pages):
            ids, (cols, counts) = _hashed(v, terms, n_features)
            assert (ids == -1).any() or i == 0  # the bound is reached on the first page: most terms have no id
            want = expected[i]
            want.sum_duplicates()  # canonical: sorted columns, each once
            assert cols.tolist() == want.indices.tolist() and counts.tolist() == want.data.tolist()
            row, theirs = counts_row(cols, counts, n_features), hash_terms([terms], n_features)
            assert row.indices.tolist() == theirs.indices.tolist() and row.data.tolist() == theirs.data.tolist()


def test_association_with_the_shared_ids_counts_as_with_terms():
    pages = _pages(200)
    rng = np.random.default_rng(0)
    relevance = rng.random(len(pages))
    alone, shared = TermAssociation(max_terms=500), TermAssociation(max_terms=500)
    for terms, r in zip(pages, relevance):
        alone.add_page(terms, r)
        ids, _ = _hashed(shared.vocabulary, terms, 2**18)  # the crawl's way: the classifier's pass gives the ids
        shared.add_page((), r, ids=ids)
    assert len(alone) == len(shared) == 500  # full: later terms are not counted in either
    anchors = [terms[:4] for terms in pages[::7]] + [terms[-4:] for terms in pages[::5]] + [["未见过的词"], []]
    assert np.array_equal(alone.shifts(anchors), shared.shifts(anchors))
    assert [alone.shift(a) for a in anchors] == [shared.shift(a) for a in anchors]
    restored = pickle.loads(pickle.dumps(shared))
    assert np.array_equal(restored.shifts(anchors), shared.shifts(anchors))
    # a resumed association keeps giving ids after its restored terms
    assert restored.vocabulary.ids([pages[0][0]]).tolist() == shared.vocabulary.ids([pages[0][0]]).tolist()


def test_page_focus_gives_the_same_probabilities_from_shared_columns():
    pages = _pages(300)
    v = Vocabulary()
    # a reservoir of 150: later pages replace rows or are scored without one (both ways covered)
    plain, shared = (PageFocus(use_words=True, refit_every=60, max_unlabeled=150),
                     PageFocus(use_words=True, refit_every=60, max_unlabeled=150))
    rng = np.random.default_rng(1)
    p_plain, p_shared = [], []
    for terms in pages:
        r = float(rng.random() < 0.2) * rng.random()
        p_plain.append(plain.observe(terms, r))
        _, hashed = _hashed(v, terms, shared.classifier.n_features)
        p_shared.append(shared.observe(terms, r, hashed=hashed))
    assert plain.refits >= 2 and p_plain == p_shared
    assert plain.expected_harvest == shared.expected_harvest
