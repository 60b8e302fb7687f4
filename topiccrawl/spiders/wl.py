"""The Wang–Landau focused crawler: ``scrapy crawl wl -a topic=暴雨灾害``.

The focused spider with the WL paper's defaults (Liu, Chen, Zhao, J. UESTC 2023): strategy
``wl``, ∂ = 0.3 (eq. 5), links enter the frontier when R(l) ≥ 0.2 or they carry potential value
(PageRank ≥ 2), β from the topic, a DP budget of 15,000 pages. ``-a strategy=bfs|bestfirst|sa|
fcsa-host|oracle`` runs a baseline under the same settings; see docs/wl.md.
"""

from topiccrawl.spiders.focused import FocusedSpider


class WLSpider(FocusedSpider):
    name = "wl"
    custom_settings = {
        "TOPICCRAWL_STRATEGY": "wl",
        "TOPICCRAWL_ANCHOR_WEIGHT": 0.3,
        "TOPICCRAWL_LINK_THRESHOLD": 0.2,
        "TOPICCRAWL_MAX_PAGES": 15000,
    }
