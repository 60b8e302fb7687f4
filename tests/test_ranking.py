"""The learners' fast ROC AUC against scikit-learn's, and the one-thread BLAS limit."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_info, threadpool_limits

from topiccrawl.learning.ranking import one_blas_thread, roc_auc


@pytest.mark.parametrize("n, levels", [(7, 3), (60, 5), (500, 1000), (3000, 20)])
def test_the_auc_is_scikit_learns_ties_included(n, levels):
    rng = np.random.default_rng(n)
    for _ in range(20):
        y = rng.random(n) < rng.uniform(0.05, 0.6)
        y[0], y[1] = True, False
        score = rng.integers(0, levels, n) / levels  # few levels: many tied scores
        assert roc_auc(y, score) == pytest.approx(roc_auc_score(y, score), abs=1e-12)
        assert roc_auc(y.astype(int), -score) == pytest.approx(roc_auc_score(y, -score), abs=1e-12)


def test_the_auc_of_a_perfect_a_reversed_and_a_flat_ranking():
    y = [0, 0, 1, 1]
    assert roc_auc(y, [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert roc_auc(y, [0.4, 0.3, 0.2, 0.1]) == 0.0
    assert roc_auc(y, [0.5, 0.5, 0.5, 0.5]) == 0.5


def test_the_auc_needs_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        roc_auc([1, 1, 1], [0.1, 0.2, 0.3])


def blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_one_blas_thread_limits_and_restores():
    with threadpool_limits(limits=2, user_api="blas"):  # a process whose BLAS may use two
        assert blas_threads() == {2}
        with one_blas_thread():
            assert blas_threads() == {1}
        assert blas_threads() == {2}
