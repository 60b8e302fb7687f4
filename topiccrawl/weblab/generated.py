"""The procedural "generated" web: a deterministic synthetic web computed page by page from its URL.

Spec: ``generated[:PRESET][?pages=N&seed=S]`` (defaults ``zh-disaster``, 50000 pages, seed 1).
Everything served here is synthetic: invented host names, word-salad text drawn from the word
lists in ``data/words/``, invented books and phones. See ``docs/generated-web.md``.

Model (all integers derived from ``(preset, pages, seed)``):

* A small host table (one row per host: kind, language, page range, topic clusters) is built when
  the corpus opens; pages are never stored. Page ``j`` of host ``h`` is generated on demand from
  ``random.Random(hash(seed, h, j))`` in O(outlinks + words).
* Host layout: local 0 is the home page, locals ``1..S`` are list (section) pages, the rest are
  content pages. On topic-bearing hosts, relevant pages form *clusters* of consecutive locals;
  each cluster is preceded by a *tunnel zone* of ``g`` irrelevant pages (``g`` in 1..12, mean
  about 5, after Bergmark et al. 2002). Zone pages chain ``next`` links into the cluster; every
  relevant page has one *exit* link per topic label to the zone start of the next cluster with
  that label (a ring over all hosts), so the nearest other relevant cluster is ``g`` irrelevant
  content pages away. Ordinary ("bulk") content pages link to home, section, prev/next and
  nearby bulk pages, and to other hosts' home pages chosen with Zipf popularity (power-law
  in-degree); list and home pages list random content pages, which gives P(rel | irr) > 0.
* URLs carry an opaque code ``(local * A + B) mod 10**d`` per host, so paths reveal nothing about
  labels; any other code is a 404.
"""

from __future__ import annotations

import bisect
import random
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from functools import cache
from html import escape
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from topiccrawl.weblab.corpus import Corpus, CorpusError, Doc, Page, int_param

PORTAL_HOST = "www.daohang-wang.cn"
PORTAL_URL = f"http://{PORTAL_HOST}/"
MIN_PAGES, MAX_PAGES = 1000, 50_000_000

# ---------------------------------------------------------------------------------------------
# word lists


@cache
def load_words(name: str) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Words and weights of ``data/words/NAME.txt`` (package ``topiccrawl.data`` or the repo)."""
    try:
        text = resources.files("topiccrawl.data").joinpath("words", f"{name}.txt").read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        path = Path(__file__).resolve().parents[2] / "data" / "words" / f"{name}.txt"
        try:
            text = path.read_text("utf-8")
        except OSError:
            raise CorpusError(f"word list {path} is missing") from None
    words, weights = [], []
    for line in text.splitlines():
        for tok in line.split("#", 1)[0].split():
            word, _, w = tok.partition(":")
            words.append(word)
            weights.append(float(w) if w else 1.0)
    return tuple(words), tuple(weights)


#: text pools: a mixture of word lists; clauses of a pool are drawn from the mixture
POOLS: dict[str, tuple[tuple[str, float], ...]] = {
    "rain": (("zh-rainstorm", 0.55), ("zh-news", 0.15), ("zh-common", 0.30)),
    "typhoon": (("zh-typhoon", 0.55), ("zh-news", 0.15), ("zh-common", 0.30)),
    "realestate": (("zh-realestate", 0.6), ("zh-news", 0.1), ("zh-common", 0.3)),
    "zh-news": (("zh-news", 0.6), ("zh-common", 0.4)),
    "zh-forum": (("zh-forum", 0.4), ("zh-news", 0.25), ("zh-common", 0.35)),
    "zh-blog": (("zh-blog", 0.55), ("zh-common", 0.45)),
    "zh-gov": (("zh-gov", 0.6), ("zh-common", 0.4)),
    "zh-weather": (("zh-weather-daily", 0.65), ("zh-common", 0.35)),
    "zh-company": (("zh-company", 0.6), ("zh-common", 0.4)),
    "zh-books": (("zh-books", 0.55), ("zh-booktitle", 0.1), ("zh-common", 0.35)),
    "bookshop": (("zh-bookstore", 0.45), ("zh-books", 0.3), ("zh-common", 0.25)),
    "phoneshop": (("zh-phoneshop", 0.6), ("zh-brands", 0.1), ("zh-common", 0.3)),
    "en-weather": (("en-weather", 0.55), ("en-common", 0.45)),
    "en-news": (("en-news", 0.6), ("en-common", 0.4)),
    "en-blog": (("en-blog", 0.6), ("en-common", 0.4)),
    "en-gov": (("en-gov", 0.6), ("en-common", 0.4)),
    "en-company": (("en-company", 0.6), ("en-common", 0.4)),
    "en-forecast": (("en-weather-daily", 0.65), ("en-common", 0.35)),
}

#: topic label -> (text pool, title keywords)
TOPICS: dict[str, tuple[str, str]] = {
    "暴雨灾害": ("rain", "zh-rainstorm"),
    "台风灾害": ("typhoon", "zh-typhoon"),
    "房产": ("realestate", "zh-realestate"),
    "en-weather": ("en-weather", "en-weather"),
}
SHOP_TOPICS = ("bookstore", "phoneshop")
ALL_TOPICS = tuple(TOPICS) + SHOP_TOPICS


@dataclass(frozen=True)
class HostKind:
    """A kind of host. ``bulk``: text pools of irrelevant pages; ``topics``: share of content pages
    in topic clusters; ``path``: content URL template; ``names``: host name templates."""

    kind: str
    lang: str
    bulk: dict[str, float]
    topics: dict[str, float]
    path: str
    names: tuple[str, ...]
    suffix: str
    shop: str = ""


VARIANTS: dict[str, HostKind] = {
    "news": HostKind("news", "zh", {"zh-news": 0.85, "zh-weather": 0.08, "zh-books": 0.07},
                     {"暴雨灾害": 0.05, "台风灾害": 0.04, "房产": 0.04}, "/a/{}.html",
                     ("news.{}.com.cn", "www.{}.com", "news.{}.cn"), "新闻网"),
    "forum": HostKind("forum", "zh", {"zh-forum": 0.85, "zh-weather": 0.15},
                      {"暴雨灾害": 0.03, "台风灾害": 0.03, "房产": 0.05}, "/thread-{}-1-1.html",
                      ("bbs.{}.com", "bbs.{}.cn"), "论坛"),
    "forum-books": HostKind("forum", "zh", {"zh-books": 0.7, "zh-forum": 0.3}, {},
                            "/thread-{}-1-1.html", ("bbs.{}.com", "club.{}.cn"), "读书社区"),
    "blog": HostKind("blog", "zh", {"zh-blog": 0.9, "zh-weather": 0.1},
                     {"暴雨灾害": 0.02, "台风灾害": 0.02}, "/post/{}.html",
                     ("blog.{}.net", "www.{}.me"), "的博客"),
    "blog-books": HostKind("blog", "zh", {"zh-books": 0.8, "zh-blog": 0.2}, {}, "/post/{}.html",
                           ("blog.{}.net", "www.{}.me"), "读书笔记"),
    "gov": HostKind("gov", "zh", {"zh-gov": 0.5, "zh-weather": 0.5},
                    {"暴雨灾害": 0.06, "台风灾害": 0.05}, "/art/{}.htm", ("www.{}.gov.cn",), "政务网"),
    "realestate": HostKind("realestate", "zh", {"zh-news": 0.4, "zh-company": 0.3, "zh-blog": 0.3},
                           {"房产": 0.55}, "/detail/{}.html", ("www.{}.com", "{}.com.cn"), "置业网"),
    "company": HostKind("company", "zh", {"zh-company": 1.0}, {}, "/info/{}.html",
                        ("www.{}.com.cn", "www.{}.cn"), "科技有限公司"),
    "bookstore": HostKind("bookstore", "zh", {"zh-company": 1.0}, {}, "/{}.html",
                          ("www.{}.com", "shop.{}.cn", "www.{}.cn"), "书城", shop="bookstore"),
    "phoneshop": HostKind("phoneshop", "zh", {"zh-company": 1.0}, {}, "/{}.html",
                          ("www.{}.com", "mall.{}.cn"), "数码商城", shop="phoneshop"),
    "portal": HostKind("portal", "zh", {"zh-news": 1.0}, {}, "/dir/{}.html",
                       ("www.{}123.com", "dir.{}.cn"), "网址导航"),
    "en-news": HostKind("news", "en", {"en-news": 0.85, "en-forecast": 0.15}, {"en-weather": 0.06},
                        "/story/{}.html", ("www.{}times.com", "news.{}.com"), " Times"),
    "en-gov": HostKind("gov", "en", {"en-gov": 0.5, "en-forecast": 0.5}, {"en-weather": 0.08},
                       "/page/{}.html", ("www.{}county.gov", "www.{}.gov"), " County"),
    "en-blog": HostKind("blog", "en", {"en-blog": 0.9, "en-forecast": 0.1}, {"en-weather": 0.03},
                        "/post/{}.html", ("{}.blogs.net", "www.{}.me"), " Notes"),
    "en-company": HostKind("company", "en", {"en-company": 1.0}, {}, "/info/{}.html",
                           ("www.{}.com", "www.{}inc.com"), " Inc."),
}

_BASE_MIX = {"news": 8, "forum": 5, "forum-books": 1, "blog": 5, "blog-books": 1, "gov": 4,
             "realestate": 2, "company": 6, "bookstore": 2, "phoneshop": 2, "portal": 1,
             "en-news": 3, "en-gov": 1, "en-blog": 2, "en-company": 2}


@dataclass(frozen=True)
class Preset:
    """Host mix (relative number of hosts per variant) and topic-rate multipliers."""

    description: str
    mix: dict[str, float]
    boost: dict[str, float] = field(default_factory=dict)


PRESETS: dict[str, Preset] = {
    "zh-disaster": Preset("Chinese web, focus 暴雨灾害 + 台风灾害",
                          {**_BASE_MIX, "news": 10, "gov": 6}, {"暴雨灾害": 1.4, "台风灾害": 1.4}),
    "zh-realestate": Preset("Chinese web, focus 房产 over many sites",
                            {**_BASE_MIX, "realestate": 8, "news": 10}, {"房产": 1.5}),
    "zh-bookstores": Preset("bookstores, phone shops, book decoys and the portal",
                            {**_BASE_MIX, "bookstore": 8, "phoneshop": 5, "blog-books": 5,
                             "forum-books": 3}),
    "en-weather": Preset("English weather and natural disasters",
                         {**_BASE_MIX, "en-news": 12, "en-gov": 5, "en-blog": 6, "en-company": 4},
                         {"en-weather": 2.0}),
    "mixed": Preset("all topics together", {**_BASE_MIX, "realestate": 4, "bookstore": 4,
                                             "phoneshop": 3, "en-news": 5, "en-gov": 2}),
}

# ---------------------------------------------------------------------------------------------
# small helpers

_M64 = (1 << 64) - 1
#: tunnel zone length g (1..12) weights: mean 4.9, tail to 12
_ZONE_W = (6, 10, 13, 14, 13, 11, 9, 7, 6, 5, 3, 3)
_FROM = ("rss", "weibo", "wechat", "home", "index")
_FILES = (("pdf", "application/pdf", b"%PDF-1.4\n", b"\n%%EOF\n"),
          ("jpg", "image/jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", b"\xff\xd9"),
          ("doc", "application/msword", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", b""))
_ENCODINGS = {"utf8": ("utf-8", "utf-8", "utf-8"), "gbk": ("gbk", "gbk", "gbk"),
              "gb18030": ("gb18030", "gb18030", "gb18030"),
              "meta-only": ("gbk", None, "gb2312"), "wrong-header": ("gbk", "utf-8", "gbk")}
HOME, LIST, BULK, ZONE, REL, FILE, HUGE, PRODUCT, HELP = range(9)


def _mix(*xs: int) -> int:
    """A 64-bit hash of integers (FNV-style combine, splitmix64 finaliser); deterministic, unlike
    ``hash`` of strings."""
    h = 0
    for x in xs:
        h = (h * 0x100000001B3 + x) & _M64
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9 & _M64
    h = (h ^ (h >> 27)) * 0x94D049BB133111EB & _M64
    return h ^ (h >> 31)


@cache
def _expanded(pool: str) -> tuple[str, ...]:
    """512 words of a pool (or of one word list) drawn by weight: O(1) weighted picks by hash bits."""
    words, cum = _mixture(pool)
    rng = random.Random(_mix(len(pool), *map(ord, pool)))
    return tuple(rng.choices(words, cum_weights=cum, k=512))


@cache
def _mixture(pool: str) -> tuple[tuple[str, ...], list[float]]:
    words: list[str] = []
    weights: list[float] = []
    for name, share in POOLS.get(pool, ((pool, 1.0),)):
        ws, wt = load_words(name)
        total = sum(wt)
        words += ws
        weights += [share * w / total for w in wt]
    cum, acc = [], 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    return tuple(words), cum


@cache
def _clauses(pool: str) -> tuple[str, ...]:
    """1024 fixed clauses of a pool (3-9 words); page text is a weighted choice of clauses."""
    words, cum = _mixture(pool)
    rng = random.Random(_mix(7, *map(ord, pool)))
    joiner = " " if pool.startswith("en-") else ""
    return tuple(joiner.join(rng.choices(words, cum_weights=cum, k=rng.randint(3, 9)))
                 for _ in range(1024))


# ---------------------------------------------------------------------------------------------
# the host table


class Host:
    __slots__ = ("idx", "name", "variant", "spec", "start", "n", "S", "A", "B", "Ainv", "M",
                 "zs", "cl", "enc", "site", "tpl_re", "bare", "files", "huge", "friends")

    def __init__(self, idx: int, name: str, variant: str, start: int, n: int, key: int):
        self.idx, self.name, self.variant, self.spec = idx, name, variant, VARIANTS[variant]
        self.start, self.n = start, n
        self.S = max(1, min(60, n // 60)) if variant != "portal" else n - 1
        self.M = 10 ** max(5, len(str(n)) + 1)
        a = 1 + 2 * (_mix(key, idx, 1) % (self.M // 2))
        self.A = a + 2 if a % 5 == 0 else a
        self.B = _mix(key, idx, 2) % self.M
        self.Ainv = pow(self.A, -1, self.M)
        self.zs: list[int] = []  # zone starts of clusters, sorted
        self.cl: list[tuple] = []  # (zone start, c0, c1, labels, exits {label: (host, local)})
        self.enc = "utf8"
        self.site = ""
        self.tpl_re = re.compile(re.escape(self.spec.path).replace(r"\{\}", r"([1-9]\d*|0)") + "$")
        self.bare = ""  # registered domain redirecting to this www host
        self.huge: set[int] = set()
        self.friends: tuple[int, ...] = ()

    def code(self, j: int) -> int:
        return (j * self.A + self.B) % self.M

    def local(self, code: int) -> int:
        return (code - self.B) * self.Ainv % self.M

    def cluster(self, j: int) -> tuple | None:
        i = bisect_right(self.zs, j) - 1
        if i >= 0 and j < self.cl[i][2]:
            return self.cl[i]
        return None


def _parse_preset(arg: str) -> tuple[str, Preset]:
    name = (arg or "zh-disaster").strip().lower()
    if name not in PRESETS:
        raise CorpusError(f"unknown generated preset {name!r}; expected one of: {', '.join(PRESETS)}")
    return name, PRESETS[name]


def generated_options(arg: str, params: dict[str, str]) -> tuple[str, int, int]:
    """(preset, pages, seed) of ``generated[:PRESET][?pages=N&seed=S]``, checked without building
    the web (a one-line :class:`CorpusError`)."""
    unknown = set(params) - {"pages", "seed"}
    if unknown:
        raise CorpusError(f"unknown parameter(s) {', '.join(sorted(unknown))} for generated corpus; "
                          "expected pages, seed")
    name, _ = _parse_preset(arg)
    pages = int_param(params, "pages", 50000, "in generated corpus spec")
    seed = int_param(params, "seed", 1, "in generated corpus spec")
    if not MIN_PAGES <= pages <= MAX_PAGES:
        raise CorpusError(f"generated corpus pages={pages} out of range {MIN_PAGES}..{MAX_PAGES}")
    return name, pages, seed


def open_generated(arg: str, params: dict[str, str]) -> GeneratedWeb:
    """Reader for ``generated[:PRESET][?pages=N&seed=S]``."""
    return GeneratedWeb(*generated_options(arg, params))


class GeneratedWeb(Corpus):
    """A synthetic web of ``pages`` canonical pages; see the module docstring."""

    def __init__(self, preset: str = "zh-disaster", pages: int = 50000, seed: int = 1):
        self.preset_name, self.preset = _parse_preset(preset)
        if not MIN_PAGES <= pages <= MAX_PAGES:
            raise CorpusError(f"generated corpus pages={pages} out of range {MIN_PAGES}..{MAX_PAGES}")
        self.pages, self.seed = pages, seed
        self.name = f"generated:{self.preset_name}"
        self.key = _mix(seed, pages, *map(ord, self.preset_name))
        self._build()

    # -- construction ---------------------------------------------------------------------
    def _build(self) -> None:
        rng = random.Random(self.key)
        nh = max(30, min(4000, self.pages // 250))
        variants = list(VARIANTS)
        mix = self.preset.mix
        chosen = variants + rng.choices(variants, weights=[mix.get(v, 0) for v in variants],
                                        k=nh - 1 - len(variants))
        rng.shuffle(chosen)
        portal_n = 1 + max(3, min(100, nh // 25))
        rest = self.pages - portal_n
        zipf = [1 / (r + 1) ** 0.9 for r in range(len(chosen))]
        rng.shuffle(zipf)
        total, minimum = sum(zipf), 20
        sizes = [minimum + int((rest - minimum * len(chosen)) * z / total) for z in zipf]
        sizes[sizes.index(max(sizes))] += rest - sum(sizes)
        self.table: list[Host] = [Host(0, PORTAL_HOST, "portal", 0, portal_n, self.key)]
        self.table[0].site = "导航网"
        used = {"daohang-wang"}
        start = portal_n
        syl = load_words("syllables")[0]
        esyl = load_words("en-syllables")[0]
        hanzi = load_words("zh-names")[0]
        for variant, n in zip(chosen, sizes):
            spec = VARIANTS[variant]
            while True:
                parts = esyl if spec.lang == "en" else syl
                base = "".join(rng.sample(parts, rng.choice((2, 2, 3))))
                if base not in used:
                    used.add(base)
                    break
            host = Host(len(self.table), rng.choice(spec.names).format(base), variant, start,
                        n, self.key)
            host.site = (base.title() if spec.lang == "en" else "".join(rng.sample(hanzi, 2))) \
                + spec.suffix
            if host.name.startswith("www.") and rng.random() < 0.5:
                host.bare = host.name[4:]
            self.table.append(host)
            start += n
        self._starts = [h.start for h in self.table]
        self._by_name = {h.name: h for h in self.table}
        self._by_name.update({h.bare: h for h in self.table if h.bare})
        # encodings: the first Chinese hosts get each GBK variant, then 10% random GBK
        zh = [h for h in self.table[1:] if h.spec.lang == "zh"]
        modes = ["gbk", "gb18030", "meta-only", "wrong-header"]
        for i, h in enumerate(zh):
            gbk = i < len(modes) or rng.random() < 0.1
            h.enc = (modes[i] if i < len(modes) else rng.choice(modes)) if gbk else "utf8"
        # popularity for cross-host links (Zipf by host size: big hosts are linked more)
        by_size = sorted(self.table, key=lambda h: -h.n)
        self._popular = [h.idx for h in by_size]
        self._pop_cum = list(_cumsum(1 / (r + 1) for r in range(len(by_size))))
        self.trap_host = next(h for h in self.table if h.variant == "gov")
        nhuge = max(1, self.pages // 25000)
        for h in self.table[1:]:
            self._place_clusters(h, rng)
            others = [o.idx for o in rng.sample(self.table, min(12, len(self.table)))
                      if o.idx != h.idx and not (h.spec.shop and o.spec.shop)]
            h.friends = tuple(others[:8])
        candidates = [h for h in self.table[1:] if h.spec.kind in ("forum", "news", "gov")]
        for _ in range(nhuge):
            h = rng.choice(candidates)
            j = rng.randrange(1 + h.S, h.n)
            if h.cluster(j) is None:
                h.huge.add(j)
        self._link_chains()

    def _place_clusters(self, h: Host, rng: random.Random) -> None:
        rates = {t: r * self.preset.boost.get(t, 1.0) for t, r in h.spec.topics.items()}
        total = sum(rates.values())
        if not total:
            return
        topics, weights = list(rates), list(rates.values())
        mean_size, mean_zone = 17.0, 4.9
        gap = max(2.0, mean_size / total - mean_size - mean_zone)
        pos = 1 + h.S + int(rng.expovariate(1 / gap))
        while True:
            g = rng.choices(range(1, 13), weights=_ZONE_W)[0]
            size = rng.randint(4, 30)
            if pos + g + size > h.n:
                break
            t = rng.choices(topics, weights=weights)[0]
            labels = (t, "暴雨灾害") if t == "台风灾害" and rng.random() < 0.3 else (t,)
            h.zs.append(pos)
            h.cl.append((pos, pos + g, pos + g + size, labels, {}))
            pos += g + size + 1 + int(rng.expovariate(1 / gap))

    def _link_chains(self) -> None:
        """Ring of clusters per label: each cluster exits to the zone start of the next one."""
        chains: dict[str, list[tuple[Host, tuple]]] = {}
        for h in self.table:
            for c in h.cl:
                for t in c[3]:
                    chains.setdefault(t, []).append((h, c))
        for t, members in chains.items():
            for i, (_h, c) in enumerate(members):
                nh, nc = members[(i + 1) % len(members)]
                c[4][t] = (nh.idx, nc[0])

    # -- addressing -------------------------------------------------------------------------
    def _ptype(self, h: Host, j: int) -> tuple[int, tuple | None]:
        if j == 0:
            return HOME, None
        if j <= h.S:
            return LIST, None
        c = h.cluster(j)
        if c is not None:
            return (REL if j >= c[1] else ZONE), c
        if j in h.huge:
            return HUGE, None
        if _mix(self.key, h.idx, j, 5) % 100 < 3:
            return FILE, None
        if h.spec.shop:
            return (HELP if _mix(self.key, h.idx, j, 3) % 10 == 0 else PRODUCT), None
        return BULK, None

    def _list_path(self, h: Host, j: int) -> str:
        if h.spec.shop:
            return f"/list.asp?cat={11 + (j - 1) % 8}&page={(j - 1) // 8 + 1}"
        if h.spec.kind == "forum":
            return f"/forum-{j}-1.html"
        return f"/dir/{j}.html" if h.variant == "portal" else f"/list/{j}.html"

    def _url(self, h: Host, j: int, pt: int | None = None) -> str:
        if j == 0:
            return f"http://{h.name}/"
        if j <= h.S:
            return f"http://{h.name}{self._list_path(h, j)}"
        if pt is None:
            pt = self._ptype(h, j)[0]
        if pt == FILE:
            return f"http://{h.name}/upload/{h.code(j)}.{self._file(h, j)[0]}"
        return f"http://{h.name}" + h.spec.path.format(h.code(j))

    def _file(self, h: Host, j: int) -> tuple:
        return _FILES[_mix(self.key, h.idx, j, 6) % len(_FILES)]

    def _content_local(self, h: Host, code: str) -> int:
        j = h.local(int(code))
        return j if 1 + h.S <= j < h.n else -1

    def canonical(self, url: str) -> str:
        """Aliases (``?from=``, ``/index.html``, ``/print/`` …) of one page share its identity."""
        r = self._resolve(url)
        return f"{r[0].name}#{r[1]}" if r is not None and r[2] == 200 else url

    def _resolve(self, url: str) -> tuple | None:
        """(host, local, status, extra): status 200 (canonical or duplicate), 301/302 with the
        target URL in ``extra``, 0 for a calendar trap page (``extra`` = (year, month))."""
        parts = urlsplit(url)
        name = (parts.hostname or "").lower()
        h = self._by_name.get(name)
        if h is None:
            return None
        path, query = parts.path or "/", parts.query
        if name == h.bare:
            return h, -1, 301, f"http://{h.name}{path}" + (f"?{query}" if query else "")
        qs = dict(parse_qsl(query))
        dup_ok = not query or (set(qs) == {"from"} and qs["from"] in _FROM)
        if path in ("/", "/index.html"):
            return (h, 0, 200, None) if dup_ok else None
        if path == "/index.php":
            return h, 0, 301, f"http://{h.name}/"
        if h.spec.shop and path == "/list.asp":
            try:
                cat, page = int(qs.get("cat", "")), int(qs.get("page", ""))
            except ValueError:
                return None
            j = (page - 1) * 8 + cat - 11 + 1
            ok = set(qs) == {"cat", "page"} and 11 <= cat < 19 and 1 <= j <= h.S
            return (h, j, 200, None) if ok and query == self._list_path(h, j)[10:] else None
        m = re.fullmatch(r"/(?:list/|dir/|forum-)([1-9]\d*)(?:-1)?\.html", path)
        if m:
            j = int(m.group(1))
            ok = j <= h.S and path == self._list_path(h, j) and dup_ok
            return (h, j, 200, None) if ok else None
        m = re.fullmatch(r"/(upload|go|old|print)/([1-9]\d*|0)\.(\w+)", path)
        if m and not query:
            kind, code, ext = m.groups()
            j = self._content_local(h, code)
            if j < 0:
                return None
            pt = self._ptype(h, j)[0]
            if kind == "upload":
                return (h, j, 200, None) if pt == FILE and ext == self._file(h, j)[0] else None
            if kind == "go" and ext == "html":
                return h, j, 302, self._url(h, j, pt)
            if kind == "old" and ext == "htm":
                return h, j, 301, f"http://{h.name}/go/{code}.html"
            if kind == "print" and ext == "html" and pt not in (FILE, HUGE):
                return h, j, 200, None
            return None
        m = h.tpl_re.match(path)
        if m and dup_ok:
            j = self._content_local(h, m.group(1))
            return (h, j, 200, None) if j >= 0 and self._ptype(h, j)[0] != FILE else None
        m = re.fullmatch(r"/calendar/(\d{4})/(\d{2})/", path)
        if m and h is self.trap_host and not query:
            y, mo = int(m.group(1)), int(m.group(2))
            return (h, -1, 0, (y, mo)) if 1000 <= y and 1 <= mo <= 12 else None
        return None

    # -- text -------------------------------------------------------------------------------
    def _title(self, h: Host, j: int, pt: int | None = None, c: tuple | None = None) -> str:
        if pt is None:
            pt, c = self._ptype(h, j)
        x = _mix(self.key, h.idx, j, 9)
        zh = h.spec.lang == "zh"
        if pt == HOME:
            return h.site
        if pt == LIST:
            return f"{self._section(h, j)} - {h.site}"
        if pt == FILE:
            return (f"附件{h.code(j)}" if zh else f"Attachment {h.code(j)}")
        if pt == PRODUCT:
            return self._product_name(h, x)
        if pt == HELP:
            return ("帮助中心", "配送说明", "支付方式", "售后服务", "关于我们", "联系我们", "招聘信息")[x % 7]
        if pt == REL:
            kw = _expanded(TOPICS[c[3][0]][1])
            pool = _expanded(TOPICS[c[3][0]][0])
        else:
            kw = pool = _expanded(self._bulk_pool(h, j))
        w = [kw[x & 511], pool[(x >> 9) & 511], kw[(x >> 18) & 511]]
        if zh:
            places = load_words("zh-places")[0]
            return places[(x >> 27) % len(places)] + "".join(dict.fromkeys(w))
        return " ".join(dict.fromkeys(w)).title()

    def _bulk_pool(self, h: Host, j: int) -> str:
        x = (_mix(self.key, h.idx, j, 8) % 1000) / 1000
        for pool, share in h.spec.bulk.items():
            x -= share
            if x < 0:
                return pool
        return pool

    def _section(self, h: Host, j: int) -> str:
        if h.spec.shop == "phoneshop":
            brands = load_words("zh-brands")[0]
            return f"{brands[(j - 1) % len(brands)]}手机 第{(j - 1) // 8 + 1}页"
        if h.spec.shop:
            return f"分类{11 + (j - 1) % 8} 第{(j - 1) // 8 + 1}页"
        if h.spec.lang == "en":
            return f"Section {j}"
        names = load_words("zh-sections")[0]
        return names[(j - 1) % len(names)] + ("" if j <= len(names) else str(j))

    def _product_name(self, h: Host, x: int) -> str:
        if h.spec.shop == "phoneshop":
            brands = load_words("zh-brands")[0]
            return (f"{brands[x % len(brands)]} {'XMKPNS'[(x >> 8) % 6]}{(x >> 12) % 60 + 1}"
                    f"{' Pro' if x >> 20 & 1 else ''} 5G手机 {8 << ((x >> 21) % 2)}GB+{128 << ((x >> 22) % 3)}GB")
        frags = _expanded("zh-booktitle")
        return frags[x & 511] + ("的" if x >> 9 & 1 else "") + frags[(x >> 10) & 511]

    def _text(self, rng: random.Random, pools: list[tuple[str, float]], n: int, lang: str) -> list[str]:
        """``n`` clauses in paragraphs; each clause comes from pool ``i`` with probability ``s_i``."""
        tables = [_clauses(p) for p, _ in pools]
        picks = rng.choices(range(1024), k=n)
        if len(tables) == 1:
            out = [tables[0][k] for k in picks]
        else:
            which = rng.choices(range(len(tables)), weights=[s for _, s in pools], k=n)
            out = [tables[w][k] for w, k in zip(which, picks)]
        paras, i = [], 0
        sep, end = ("，", "。") if lang == "zh" else (", ", ".")
        while i < n:
            k = rng.randint(3, 7)
            p = sep.join(out[i:i + k]) + end
            paras.append(p if lang == "zh" else p[0].upper() + p[1:])
            i += k
        return paras

    # -- page generation --------------------------------------------------------------------
    def _pop_host(self, h: Host, x: float) -> Host:
        o = self.table[self._popular[bisect.bisect_left(self._pop_cum, x * self._pop_cum[-1])]]
        return self.table[0] if o is h or (o.spec.shop and h.spec.shop) else o

    def _bulk_step(self, h: Host, j: int, d: int) -> int:
        """The nearest bulk page from ``j`` in direction ``d`` (skips zones and clusters)."""
        j += d
        c = h.cluster(j)
        while c is not None:
            j = c[2] if d > 0 else c[0] - 1
            c = h.cluster(j)
        return j if 1 + h.S <= j < h.n else -1

    def _listed(self, h: Host, rng: random.Random) -> int:
        """An entry of a home or list page: a random content page, or (30%) a topical one."""
        if h.cl and rng.random() < 0.3:
            c = rng.choice(h.cl)
            return rng.randrange(c[1], c[2])
        return rng.randrange(1 + h.S, h.n)

    def _gen(self, h: Host, j: int, pt: int, c: tuple | None) -> _Gen:
        rng = random.Random(_mix(self.key, h.idx, j))
        zh = h.spec.lang == "zh"
        g = _Gen(self._title(h, j, pt, c))
        links = g.links
        home = f"http://{h.name}/"
        links.append((home + ("index.html" if rng.random() < 0.05 else ""), "首页" if zh else "Home"))

        def page(j2: int, alias: bool = True) -> None:
            if not 0 <= j2 < h.n or j2 == j:
                return
            pt2, c2 = self._ptype(h, j2)
            url = self._url(h, j2, pt2)
            r = rng.random() if alias and pt2 not in (HOME, LIST) else 1.0
            if r < 0.01:
                url = f"http://{h.name}/old/{h.code(j2)}.htm"
            elif r < 0.03:
                url = f"http://{h.name}/go/{h.code(j2)}.html"
            elif r < 0.07 and pt2 != FILE:
                url += f"?from={_FROM[int(r * 1000) % len(_FROM)]}"
            links.append((url, self._title(h, j2, pt2, c2)))

        def other(o: Host, j2: int = 0) -> None:
            links.append((self._url(o, j2), self._title(o, j2)))

        def friends(k: int) -> None:
            for o in h.friends[:k]:
                other(self.table[o])

        content = range(1 + h.S, h.n)
        if h.variant == "portal":
            for s in range(1, h.S + 1) if pt == HOME else (1, max(1, j - 1), min(h.S, j + 1)):
                page(s)
            listed = [o for o in self.table[h.idx + 1:] + self.table[1:h.idx]
                      if not (o.spec.shop and _mix(self.key, h.idx, o.idx) % 2)]
            for o in (listed[:60] if pt == HOME else listed[j - 1::h.S]):
                other(o)
        elif pt == HOME:
            for s in range(1, min(h.S, 40) + 1):
                page(s)
            for _ in range(20):
                page(self._listed(h, rng))
            if h is self.trap_host:
                links.append((f"{home}calendar/2024/06/", "信息日历"))
            friends(8)
            if h.idx:
                other(self.table[0])
        elif pt == LIST:
            for s in sorted({1, h.S, max(1, j - 1), min(h.S, j + 1)}):
                page(s)
            for _ in range(30):
                page(self._listed(h, rng))
            friends(8)
        else:
            page(1 + j % h.S)
            if pt == REL:
                c0, c1 = c[1], c[2]
                page(j + 1 if j + 1 < c1 else c0, alias=False)
                for _ in range(2):
                    page(rng.randrange(c0, c1), alias=False)
                for t in c[3]:
                    oh, oj = c[4][t]
                    if oh == h.idx:
                        page(oj, alias=False)
                    else:
                        other(self.table[oh], oj)
                for d, base in ((1, c1 - 1), (1, c1), (-1, c[0]), (-1, c[0] - 1)):
                    page(self._bulk_step(h, base, d))
                for _ in range(2):
                    other(self._pop_host(h, rng.random()))
            elif pt in (PRODUCT, HELP):
                for _ in range(rng.randint(4, 7)):
                    page(rng.choice(content))
            elif pt != FILE:
                if pt == ZONE:
                    page(j + 1, alias=False)
                    page(j - 1 if j > c[0] else self._bulk_step(h, j, -1), alias=False)
                else:
                    page(self._bulk_step(h, j, 1))
                    page(self._bulk_step(h, j, -1))
                for _ in range(rng.randint(3, 6)):
                    t = j + rng.choice((-6, -5, -4, -3, -2, 2, 3, 4, 5, 6))
                    if 1 + h.S <= t < h.n and h.cluster(t) is None:
                        page(t)
                for _ in range(rng.randint(1, 2)):
                    other(self._pop_host(h, rng.random()))
                if pt == BULK and rng.random() < 0.1:
                    links.append((f"http://{h.name}/print/{h.code(j)}.html",
                                  "打印" if zh else "Print"))
                if rng.random() < 0.04:  # a broken link: a code past the last page
                    missing = h.spec.path.format(h.code(h.n + rng.randrange(50)))
                    links.append((f"http://{h.name}{missing}", "更多" if zh else "More"))
        self._fill_text(g, h, j, pt, c, rng)
        return g

    def _fill_text(self, g: _Gen, h: Host, j: int, pt: int, c: tuple | None,
                   rng: random.Random) -> None:
        zh = h.spec.lang == "zh"
        n = 30 + int(250 * rng.random() ** 2)
        bulk = self._bulk_pool(h, j)
        if pt == REL:
            sigma = rng.uniform(0.2, 0.85)
            pools = [(TOPICS[t][0], sigma / len(c[3])) for t in c[3]] + [(bulk, 1 - sigma)]
        elif pt == PRODUCT:
            x = _mix(self.key, h.idx, j, 9)
            pools = [("bookshop" if h.spec.shop == "bookstore" else "phoneshop", 1.0)]
            n = 15 + n // 4
            g.fields = self._product_fields(h, x)
        elif pt in (HOME, LIST):
            pools = [("bookshop", 1.0)] if h.spec.shop == "bookstore" else \
                [("phoneshop", 1.0)] if h.spec.shop else [(bulk, 1.0)]
            n = 10 + n // 6
        elif pt in (BULK, ZONE, HUGE) and h.spec.topics and rng.random() < 0.05:
            mention = TOPICS[rng.choice(list(h.spec.topics))][0]
            pools = [(mention, 0.04), (bulk, 0.96)]
        else:
            pools = [("zh-company" if zh else "en-company", 1.0)] if pt == HELP else [(bulk, 1.0)]
        g.paras = self._text(rng, pools, n, h.spec.lang)
        if pt == HUGE:
            size = 3_000_000 + 1_000_000 * (j % 4)
            g.paras = g.paras * (size // max(1, sum(len(p) for p in g.paras) * 3) + 1)
        if rng.random() < 0.5 and pt not in (HOME, LIST):
            words = list(dict.fromkeys(re.split(r"[ ，。,.]+", g.paras[0])))[:2]
            g.keywords = ",".join([g.title[:12]] + words)
            g.description = g.paras[0][:80]

    def _product_fields(self, h: Host, x: int) -> list[str]:
        if h.spec.shop == "phoneshop":
            brands = load_words("zh-brands")[0]
            price = 999 + (x >> 7) % 60 * 100
            return [f"品牌：{brands[x % len(brands)]}", f"价格：￥{price}.00",
                    f"颜色：{('曜石黑', '冰川蓝', '星河银', '晨曦金')[(x >> 30) % 4]}",
                    "全国联保 正品行货", "加入购物车", "立即购买"]
        names = load_words("zh-names")[0]
        price = 15 + (x >> 7) % 120
        isbn = f"978-7-{(x >> 14) % 90000 + 10000}-{(x >> 31) % 9000 + 1000}-{(x >> 45) % 10}"
        return [f"作者：{names[(x >> 20) % len(names)]}{names[(x >> 26) % len(names)]}",
                f"出版社：{names[(x >> 33) % len(names)]}{names[(x >> 38) % len(names)]}出版社",
                f"ISBN：{isbn}", f"定价：{price + 10}.00元", f"售价：{price}.{(x >> 50) % 10}0元",
                "加入购物车", "内容简介"]

    def _render(self, h: Host, g: _Gen, lastmod: str) -> tuple[dict[str, str], bytes]:
        enc, header_cs, meta_cs = _ENCODINGS[h.enc]
        base = f"http://{h.name}"
        out = [f'<!DOCTYPE html>\n<html lang="{h.spec.lang}"><head><meta charset="{meta_cs}">'
               f"<title>{escape(g.title)}</title>"]
        if g.keywords:
            out.append(f'<meta name="keywords" content="{escape(g.keywords)}">'
                       f'<meta name="description" content="{escape(g.description)}">')
        out.append(f'</head><body><div id="top">{escape(h.site)}</div><h1>{escape(g.title)}</h1>')
        if g.fields:
            out.append('<div class="info">' + "".join(f"<p>{escape(f)}</p>" for f in g.fields) + "</div>")
        out.append('<div class="content">' + "".join(f"<p>{p}</p>" for p in g.paras) + "</div><ul>")
        for url, anchor in g.links:
            href = url[len(base):] if url.startswith(base + "/") else url
            out.append(f'<li><a href="{escape(href)}">{escape(anchor)}</a></li>')
        out.append(f'</ul><div id="footer">&copy; {escape(h.site)} {lastmod[12:16]}</div></body></html>')
        headers = {"Content-Type": f"text/html; charset={header_cs}" if header_cs else "text/html",
                   "Last-Modified": lastmod}
        return headers, "".join(out).encode(enc, "xmlcharrefreplace")

    def _lastmod(self, h: Host, j: int) -> str:
        return formatdate(1514764800 + _mix(self.key, h.idx, j, 4) % (7 * 365 * 86400), usegmt=True)

    # -- Corpus API -------------------------------------------------------------------------
    def has_host(self, host: str) -> bool:
        return host in self._by_name

    def hosts(self) -> list[str]:
        return list(self._by_name)

    def __len__(self) -> int:
        return self.pages

    def _at(self, i: int) -> tuple[Host, int]:
        h = self.table[bisect_right(self._starts, i) - 1]
        return h, i - h.start

    def iter_urls(self) -> Iterator[str]:
        for h in self.table:
            for j in range(h.n):
                yield self._url(h, j)

    def search_sample(self, limit: int) -> Iterator[str]:
        """All pages, or ``limit`` pages evenly spaced over the global page order."""
        if self.pages <= limit:
            yield from self.iter_urls()
            return
        for k in range(limit):
            yield self._url(*self._at(k * self.pages // limit))

    def seeds(self) -> list[str]:
        big = sorted(self.table[1:], key=lambda h: -h.n)[:5]
        return [PORTAL_URL] + [f"http://{h.name}/" for h in big]

    def get(self, url: str) -> Page | None:
        r = self._resolve(url)
        if r is None:
            return None
        h, j, status, extra = r
        lastmod = self._lastmod(h, j)
        if status in (301, 302):
            body = f'<html><body>Moved to <a href="{escape(extra)}">here</a></body></html>'.encode()
            return Page(url, status, {"Location": extra, "Content-Type": "text/html; charset=utf-8",
                                      "Last-Modified": lastmod}, body, [extra])
        if status == 0:
            g = self._calendar(h, *extra)
            headers, body = self._render(h, g, lastmod)
            return Page(url, 200, headers, body, [u for u, _ in g.links])
        pt, c = self._ptype(h, j)
        if pt == FILE:
            ext, ctype, head, tail = self._file(h, j)
            rng = random.Random(_mix(self.key, h.idx, j))
            body = head + rng.randbytes(rng.randint(3000, 60000)) + tail
            return Page(url, 200, {"Content-Type": ctype, "Last-Modified": lastmod}, body, [])
        g = self._gen(h, j, pt, c)
        headers, body = self._render(h, g, lastmod)
        return Page(url, 200, headers, body, [u for u, _ in g.links])

    def _calendar(self, h: Host, y: int, m: int) -> _Gen:
        prev = (y, m - 1) if m > 1 else (y - 1, 12)
        nxt = (y, m + 1) if m < 12 else (y + 1, 1)
        g = _Gen(f"{y}年{m}月 信息日历 - {h.site}")
        g.links = [(f"http://{h.name}/", "首页")]
        for (a, b), anchor in ((prev, "上个月"), (nxt, "下个月")):
            if a >= 1000:
                g.links.append((f"http://{h.name}/calendar/{a:04d}/{b:02d}/", anchor))
        g.paras = [f"{y}年{m}月{d}日 暂无信息。" for d in range(1, 29)]
        return g

    def doc(self, url: str) -> Doc | None:
        """Title, text and links straight from the generator (no HTML parsing)."""
        r = self._resolve(url)
        if r is None or r[2] != 200:
            return None
        h, j = r[0], r[1]
        pt, c = self._ptype(h, j)
        if pt == FILE:
            return None
        g = self._gen(h, j, pt, c)
        text = " ".join([h.site, g.title, *g.fields, *g.paras, *(a for _, a in g.links)])
        return Doc(url, g.title, text, [u for u, _ in g.links])

    def labels(self, url: str) -> frozenset[str]:
        for _ in range(4):
            r = self._resolve(url)
            if r is None:
                return frozenset()
            h, j, status, extra = r
            if status not in (301, 302):
                break
            url = extra
        else:
            return frozenset()
        out = {f"kind:{h.spec.kind}", f"lang:{h.spec.lang}"}
        if status == 0:
            return frozenset(out)
        pt, c = self._ptype(h, j)
        if h.spec.shop:
            out.add(f"site:{h.spec.shop}")
            if pt in (HOME, LIST, PRODUCT):
                out.add(f"topic:{h.spec.shop}")
        if pt == REL:
            out.update(f"topic:{t}" for t in c[3])
        return frozenset(out)

    def robots_txt(self, host: str) -> str | None:
        h = self._by_name.get(host)
        if h is None or host == h.bare:
            return None
        x = _mix(self.key, h.idx, 77) % 100
        if x < 30 and h.idx > 1:
            return None
        rules = ["/cgi-bin/"] + ["/print/"] * (x % 2) + ["/search"] * (x % 3 == 0) \
            + ["/admin/"] * (x % 5 == 0)
        lines = ["User-agent: *"] + [f"Disallow: {r}" for r in rules]
        if x % 10 == 7 or h.idx == 1:
            lines.append(f"Crawl-delay: {1 + x % 3}")
        if x % 4 == 0:
            lines += ["", "User-agent: BadBot", "Disallow: /"]
        return "\n".join(lines) + "\n"

    def topic_counts(self) -> dict[str, int]:
        """Exact number of canonical pages per label ``topic:*`` / ``site:*`` (from the host table)."""
        counts: Counter[str] = Counter()
        for h in self.table:
            for c in h.cl:
                for t in c[3]:
                    counts[f"topic:{t}"] += c[2] - c[1]
            if h.spec.shop:
                counts[f"site:{h.spec.shop}"] += h.n
                # a shop's home, list and product pages are on its topic (:meth:`labels`)
                counts[f"topic:{h.spec.shop}"] += sum(self._ptype(h, j)[0] in (HOME, LIST, PRODUCT) for j in range(h.n))
        return dict(sorted(counts.items()))

    def describe(self) -> dict:
        kinds = Counter(h.variant for h in self.table)
        return {"name": self.name, "preset": self.preset_name, "description": self.preset.description,
                "pages": self.pages, "seed": self.seed, "hosts": len(self.table),
                "host_variants": dict(sorted(kinds.items())), "portal": PORTAL_URL,
                "trap": f"http://{self.trap_host.name}/calendar/2024/06/",
                "label_pages": self.topic_counts(), "synthetic": True}


@dataclass
class _Gen:
    title: str
    links: list[tuple[str, str]] = field(default_factory=list)
    paras: list[str] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)
    keywords: str = ""
    description: str = ""


def _cumsum(xs) -> Iterator[float]:
    acc = 0.0
    for x in xs:
        acc += x
        yield acc
