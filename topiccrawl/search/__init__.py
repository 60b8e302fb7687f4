"""Search engines used by domain discovery (DWDBRM/DISCO): see :mod:`topiccrawl.search.backends`."""

from topiccrawl.search.backends import (BACKENDS, SEARCH_OPERATORS, LocalSearchBackend, SearchBackend,
                                        SearchBackendError, SearchResult, SearXNGBackend,
                                        make_backend)

__all__ = ["BACKENDS", "SEARCH_OPERATORS", "LocalSearchBackend", "SearchBackend",
           "SearchBackendError", "SearchResult", "SearXNGBackend", "make_backend"]
