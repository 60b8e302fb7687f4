"""Text normalisation for learning: Traditional -> Simplified Chinese and stop words of both scripts.

``to_simplified`` converts with OpenCC's ``t2s`` configuration (the ``opencc`` package ships its
dictionaries). :func:`topiccrawl.scoring.text.tokenize` calls it before jieba, which segments
Traditional text badly, so every term of the crawler is in Simplified form. This module imports
no other topiccrawl module (the tokenizer imports it).
"""

from __future__ import annotations

import importlib.resources
import re
from functools import cache
from pathlib import Path

#: CJK ideographs (Unified, Extension A, Compatibility): the only characters ``t2s`` changes
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@cache
def _converter():
    import opencc

    return opencc.OpenCC("t2s")


def to_simplified(text: str) -> str:
    """``text`` with Traditional Chinese characters and phrases in their Simplified form.

    Text without CJK ideographs is returned as it is (no conversion call); Simplified text comes
    back unchanged apart from rare variant characters (捱 -> 挨). One converter per process.
    """
    if not _CJK_RE.search(text):
        return text
    return _converter().convert(text)


def _read_words(name: str) -> str:
    try:
        return importlib.resources.files("topiccrawl.data").joinpath("words", name).read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return (Path(__file__).resolve().parents[2] / "data" / "words" / name).read_text("utf-8")


@cache
def stopwords(language: str) -> frozenset[str]:
    """Stop words of ``zh`` (Simplified forms) or ``en`` (lower case; contractions with ``'``
    also with ``’``), from ``data/words/stopwords-<language>.txt``."""
    if language not in ("zh", "en"):
        raise ValueError(f"no stop words for language {language!r} (expected 'zh' or 'en')")
    words: set[str] = set()
    for line in _read_words(f"stopwords-{language}.txt").splitlines():
        words.update(line.split("#", 1)[0].split())
    words.update([w.replace("'", "\u2019") for w in words if "'" in w])
    return frozenset(words)


def all_stopwords() -> frozenset[str]:
    """Stop words of both languages."""
    return stopwords("zh") | stopwords("en")
