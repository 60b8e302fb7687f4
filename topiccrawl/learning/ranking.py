"""Small, fast helpers the learners call at every refit.

:func:`roc_auc` is the ROC AUC of binary labels as scikit-learn's ``roc_auc_score`` gives it (the
Mann–Whitney U with tied scores counted a half), from one ranking: ``roc_auc_score`` validates its
arguments and builds the ROC curve, ~1.5 ms a call against ~60 µs here, and a crawl calls it at
every refit of the page classifier and for each blend weight at every retrain of the link model.
:func:`one_blas_thread` limits the BLAS libraries to one thread around a fit through one
``threadpoolctl`` controller made at first use, where ``threadpool_limits`` looks the loaded
libraries up again at each call.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

_controller = None


def roc_auc(y, score) -> float:
    """ROC AUC of ``score`` against binary labels ``y`` (truthy: positive). Both classes must be
    present (``ValueError`` otherwise, as ``roc_auc_score``)."""
    y = np.asarray(y).astype(bool).ravel()
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if not n_pos or not n_neg:
        raise ValueError("ROC AUC needs both classes among the labels")
    ranks = rankdata(np.asarray(score, dtype=np.float64).ravel())  # ties: their average rank
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def one_blas_thread():
    """A context manager limiting every BLAS library loaded at first use to one thread."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")
