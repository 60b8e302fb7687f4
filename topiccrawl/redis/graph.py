"""The seen link graph shared between workers, for PageRank (WL paper's importance).

Every worker appends each downloaded page and its outlinks to the Redis list
``topiccrawl:<crawl_id>:graph`` (JSON ``[url, [outlinks]]``) and, in the same step, replays the
entries other workers appended since its last step, so each worker's :class:`LinkGraph` — and
the PageRank refreshed over it every ``TOPICCRAWL_PAGERANK_EVERY`` pages — covers the whole
crawl. A restarted worker replays the whole list first. Entries are applied in list order, so all
workers build the same graph (node ids may differ, scores do not).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from topiccrawl.scoring.importance import LinkGraph


class SharedLinkGraph(LinkGraph):
    def __init__(self, client, key: str) -> None:
        super().__init__()
        self.r, self.key = client, key
        self._replayed = 0
        self._replay(self.r.llen(key))

    def _replay(self, upto: int) -> None:
        """Apply list entries [replayed, upto) written by any worker."""
        if upto > self._replayed:
            for entry in self.r.lrange(self.key, self._replayed, upto - 1):
                url, outlinks = json.loads(entry)
                super().add_page(url, outlinks)
            self._replayed = upto

    def add_page(self, url: str, outlinks: Iterable[str]) -> None:
        outlinks = list(outlinks)
        n = self.r.rpush(self.key, json.dumps([url, outlinks], ensure_ascii=False))
        self._replay(n - 1)
        super().add_page(url, outlinks)
        self._replayed = n
