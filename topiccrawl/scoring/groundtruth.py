"""Ground-truth labels for evaluation: a labels file (``url<TAB>label,label…``) or a corpus.

The crawler's scorers never see these; only the statistics (true harvest rate, target recall) and
the ``oracle`` benchmark strategy read them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from w3lib.url import canonicalize_url


class GroundTruthError(ValueError):
    """An unreadable labels file (one-line message)."""


def _key(url: str) -> str:
    return canonicalize_url(url, keep_fragments=False)


class GroundTruth:
    """``labels(url)`` plus the number of pages carrying any of a set of labels."""

    def __init__(self, lookup: Callable[[str], frozenset[str]], urls: Callable[[], object], source: str,
                 identity: Callable[[str], str] | None = None):
        self._lookup = lookup
        #: the page a URL serves (aliases share it): recall counts distinct pages
        self.identity = identity or _key
        self._urls = urls
        self.source = source
        self._totals: dict[frozenset[str], int] = {}

    def labels(self, url: str) -> frozenset[str]:
        return self._lookup(url)

    def is_relevant(self, url: str, relevant: frozenset[str]) -> bool:
        return bool(self._lookup(url) & relevant)

    def total_relevant(self, relevant: frozenset[str]) -> int:
        """How many pages of the corpus carry any of ``relevant`` (computed once per label set)."""
        if relevant not in self._totals:
            self._totals[relevant] = sum(1 for u in self._urls() if self._lookup(u) & relevant)
        return self._totals[relevant]

    @classmethod
    def from_file(cls, path: str | Path) -> GroundTruth:
        path = Path(path)
        table: dict[str, frozenset[str]] = {}
        try:
            with path.open(encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    line = line.rstrip("\n")
                    if not line or line.startswith("#"):
                        continue
                    url, sep, labels = line.partition("\t")
                    if not sep:
                        raise GroundTruthError(f"{path}:{lineno}: expected 'url<TAB>label,label…'")
                    table[_key(url)] = frozenset(x for x in labels.split(",") if x)
        except OSError as exc:
            raise GroundTruthError(f"{path}: cannot read labels file ({exc.strerror})") from None
        return cls(lambda u: table.get(_key(u), frozenset()), lambda: iter(table), str(path))

    @classmethod
    def from_corpus(cls, corpus) -> GroundTruth:
        """Labels straight from an offline-web corpus (works for alias URLs too)."""
        return cls(corpus.labels, corpus.iter_urls, f"corpus {corpus.name}", corpus.canonical)
