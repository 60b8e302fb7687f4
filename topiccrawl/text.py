"""Text processing: tokenisation (jieba for Chinese, a Latin tokenizer otherwise) and stop words.

Scrapy-free. ``tokenize`` is used everywhere a text becomes terms: relevance scoring, the search
engine of the offline web lab and the rankers, so that a topic word and a page word always match.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

import jieba

jieba.setLogLevel(logging.WARNING)

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: a run of CJK characters, or a Latin/digit word (apostrophes and inner hyphens kept)
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W_]+(?:['’\-][^\W_]+)*", re.UNICODE)
_CJK_RE = re.compile(rf"[{_CJK}]")

EN_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves also may might must shall one two
    s t""".split()
)

ZH_STOPWORDS = frozenset(
    """的 了 和 是 在 有 与 及 或 等 也 都 而 就 被 把 对 从 到 为 以 于 之 其 这 那 这些 那些 一个 我们 你们
    他们 她们 它们 我 你 他 她 它 着 过 将 并 但 很 还 又 已 已经 可以 可 要 会 能 上 下 中 个 来 去 说 让
    给 向 由 因 因为 所以 如果 虽然 但是 以及 其中 进行 通过 没有 不 各 该 每 此 之后 之前 目前 相关""".split()
)

STOPWORDS = EN_STOPWORDS | ZH_STOPWORDS


def has_cjk(text: str) -> bool:
    """True when the text contains a CJK ideograph."""
    return bool(_CJK_RE.search(text))


def detect_language(text: str) -> str:
    """``zh`` when CJK ideographs make up at least 10% of the letters, else ``en``."""
    sample = text[:4000]
    cjk = len(_CJK_RE.findall(sample))
    letters = sum(ch.isalpha() for ch in sample)
    return "zh" if letters and cjk / letters >= 0.1 else "en"


@lru_cache(maxsize=65536)
def _cut(run: str) -> tuple[str, ...]:
    return tuple(jieba.lcut(run, HMM=True))


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Terms of ``text``: Chinese runs segmented by jieba, Latin words lower-cased.

    Stop words, single Latin letters and pure punctuation are dropped; digits are kept (prices,
    years, ISBNs matter to some topics).
    """
    out: list[str] = []
    for m in _TOKEN_RE.finditer(text):
        run = m.group(0)
        if _CJK_RE.match(run):
            for tok in _cut(run) if len(run) > 1 else (run,):
                if tok not in stopwords:
                    out.append(tok)
        else:
            tok = run.lower()
            if len(tok) > 1 and tok not in stopwords:
                out.append(tok)
    return out


def add_words(words: list[str]) -> None:
    """Teach jieba words it must not split (topic words such as 风暴潮)."""
    for w in words:
        if has_cjk(w):
            jieba.add_word(w, freq=2000)
    _cut.cache_clear()
