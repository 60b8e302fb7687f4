"""How many threads the BLAS libraries of numpy and scipy may use in this process.

The models here multiply small matrices and vectors; a second BLAS thread finds no work worth
sharing and spins waiting for some, so it only burns CPU a crawl could use (docs/learned.md,
"BLAS threads"). :func:`limit_blas_threads` sets the limit once for the whole process through
``threadpoolctl`` (a scikit-learn dependency).
"""

from __future__ import annotations


def limit_blas_threads(threads: int) -> dict[str, int]:
    """Limit every loaded BLAS library to ``threads`` threads (0: leave the libraries' own
    defaults); returns each library's thread count before the call, by file name."""
    # import first what loads a BLAS: a library loaded after the call would keep its default
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    from threadpoolctl import threadpool_info, threadpool_limits

    before = {info["filepath"].rsplit("/", 1)[-1]: info["num_threads"]
              for info in threadpool_info() if info["user_api"] == "blas"}
    if threads > 0:
        threadpool_limits(limits=threads, user_api="blas")
    return before
