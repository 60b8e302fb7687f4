"""Ground truth of sites for evaluation: the k-pages rule.

Labelled data label pages, not sites (WebKB labels a page ``class:faculty``; the generated web
labels every page of a genuine shop ``site:bookstore``). A site (host) is **truly relevant when at
least k of its distinct pages carry the label** (k = ``TOPICCRAWL_SITES_TRUTH_PAGES``, default 3 =
the default NumRelPages, the good pages a verdict "relevant" needs). Pages are counted once per
site by their identity (aliases of one page share it). Used by the spider's statistics and every
benchmark script; never used to choose pages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable

from topiccrawl.sitefinder.verifier import canonical_url, site_of


class SiteTruth:
    """``is_true(site)``: at least ``k`` distinct pages of ``site`` carry ``label``."""

    def __init__(self, counts: dict[str, int], k: int = 3, label: str = "") -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        self.counts, self.k, self.label = dict(counts), k, label

    @classmethod
    def from_pages(cls, urls: Iterable[str], labels: Callable[[str], Collection[str]], label: str, k: int = 3,
                   identity: Callable[[str], str] | None = None) -> SiteTruth:
        """Count, per site, the distinct pages (by ``identity``, default the canonical URL) among
        ``urls`` whose ``labels(url)`` include ``label``."""
        identity = identity or canonical_url
        counts: Counter[str] = Counter()
        seen: set[str] = set()
        for url in urls:
            if label not in labels(url):
                continue
            key = identity(url)
            if key in seen:
                continue
            seen.add(key)
            counts[site_of(url)] += 1
        return cls(counts, k, label)

    def labelled(self, site_or_url: str) -> int:
        """Labelled pages of a site (a host name, or any URL of the site)."""
        site = site_of(site_or_url) if "/" in site_or_url else site_or_url.lower()
        return self.counts.get(site, 0)

    def is_true(self, site_or_url: str) -> bool:
        return self.labelled(site_or_url) >= self.k

    def true_sites(self) -> set[str]:
        return {s for s, n in self.counts.items() if n >= self.k}

    def __len__(self) -> int:
        return len(self.true_sites())
