"""Topic words from example pages: the words that set the examples apart from other pages.

A word's score is the z-score of its log-odds ratio between the example pages and background
pages (pages fetched so far, or any sample of ordinary pages) with an informative Dirichlet prior
(Monroe, Colaresi & Quinn 2008, "Fightin' words", Political Analysis 16:372-403). Counts are sublinear per page
(1 + log tf) so that one long page cannot carry a word alone, and a word must occur in at least
two examples (when there are two). The top ``k`` words get weights z / max z in (0, 1], ready
for a topic's ``[words]`` table (:func:`format_words_toml`). Deterministic; pure.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from topiccrawl.learning.normalize import all_stopwords
from topiccrawl.scoring.text import is_html, tokenize

_LETTER = re.compile(r"[^\W\d_]")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _weights(doc) -> Counter:
    """Sublinear term weights (1 + log tf) of a page given as text or terms."""
    terms = tokenize(doc) if isinstance(doc, str) else doc
    return Counter({t: 1.0 + math.log(n) for t, n in Counter(terms).items()})


def _candidate(word: str, stop: frozenset[str]) -> bool:
    """A word that can be a topic word: two characters or more, a letter, not a stop word."""
    return len(word) > 1 and bool(_LETTER.search(word)) and word not in stop


def topic_words(example_docs: Iterable, background_docs: Iterable = (), k: int = 30,
                prior: float = 1000.0) -> list[tuple[str, float]]:
    """The ``k`` words most typical of ``example_docs`` against ``background_docs``, weighted.

    Pages are strings (tokenised with :func:`topiccrawl.scoring.text.tokenize`, Traditional
    Chinese becomes Simplified) or term lists. With y_w and n the (sublinear) counts of word w
    and all words in the examples (E) and the background (B), and the prior
    α_w = ``prior`` · (y_w^E + y_w^B) / (n^E + n^B), α_0 = ``prior``:

        δ_w = log((y_w^E + α_w) / (n^E + α_0 - y_w^E - α_w))
              - log((y_w^B + α_w) / (n^B + α_0 - y_w^B - α_w))
        z_w = δ_w / sqrt(1 / (y_w^E + α_w) + 1 / (y_w^B + α_w))

    Words with z_w > 0 rank by z_w (ties by word); weights are z_w / max z. Without background
    pages, the examples' own counts rank the words (weight y_w^E / max). Stop words of both
    scripts, words without a letter and one-character words are left out. Returns
    ``[(word, weight), ...]``, highest first; empty without examples.
    """
    examples = [_weights(d) for d in example_docs]
    background = [_weights(d) for d in background_docs]
    if not examples:
        return []
    stop = all_stopwords()
    min_df = min(2, len(examples))
    df = Counter(w for page in examples for w in page)
    y_e: Counter = Counter()
    for page in examples:
        y_e.update(page)
    words = [w for w, n in df.items() if n >= min_df and _candidate(w, stop)]
    if not background:
        scored = {w: y_e[w] for w in words}
    else:
        y_b: Counter = Counter()
        for page in background:
            y_b.update(page)
        n_e, n_b = sum(y_e.values()), sum(y_b.values())
        total = n_e + n_b
        scored = {}
        for w in words:
            a = prior * (y_e[w] + y_b[w]) / total
            ye, yb = y_e[w] + a, y_b[w] + a
            delta = math.log(ye / (n_e + prior - ye)) - math.log(yb / (n_b + prior - yb))
            z = delta / math.sqrt(1.0 / ye + 1.0 / yb)
            if z > 0:
                scored[w] = z
    top = sorted(scored.items(), key=lambda wz: (-wz[1], wz[0]))[:k]
    if not top:
        return []
    best = top[0][1]
    return [(w, z / best) for w, z in top]


def format_words_toml(words: Iterable[tuple[str, float]], digits: int = 2, beta: float | None = None) -> str:
    """The ``[words]`` table of a topic file (``docs/topics.md``) for ``(word, weight)`` pairs,
    after a ``beta = …`` line when ``beta`` is given (a topic file with words needs one, and it must
    come before the table).

    Non-ASCII words are quoted; weights are rounded to ``digits`` decimals and kept positive.
    A topic file is this plus ``name`` and so on.
    """
    lines = [] if beta is None else [f"beta = {beta:g}", ""]
    lines.append("[words]")
    floor = 10.0 ** -digits
    for word, weight in words:
        key = word if _BARE_KEY.match(word) else json.dumps(word, ensure_ascii=False)
        lines.append(f"{key} = {max(floor, round(float(weight), digits)):.{digits}f}")
    return "\n".join(lines) + "\n"


#: the files of an ``examples_dir`` read as saved example pages (any case)
EXAMPLE_SUFFIXES = (".html", ".htm", ".xhtml")


def example_files(folder: str | Path, max_bytes: int = 0) -> tuple[list[tuple[Path, bytes]], list[tuple[Path, str]]]:
    """The saved pages of an ``examples_dir``, in name order: the files named ``*.html``, ``*.htm``
    or ``*.xhtml`` that are readable regular files of at most ``max_bytes`` (0: any size) holding
    HTML (:func:`~topiccrawl.scoring.text.is_html`: not a PDF, not binary), with their bytes; and
    the files of those names left out, each with the reason (a folder, a broken link, unreadable,
    empty, too large, not HTML; the folder itself when it cannot be listed or holds no file of
    those names). Other files are not looked at."""
    usable: list[tuple[Path, bytes]] = []
    skipped: list[tuple[Path, str]] = []
    try:
        paths = sorted(Path(folder).iterdir())
    except OSError as exc:  # unreadable, or gone since the topic was loaded: the folder itself is left out
        return usable, [(Path(folder), exc.strerror or type(exc).__name__)]
    for path in paths:
        if path.suffix.lower() not in EXAMPLE_SUFFIXES:
            continue
        try:
            if not path.is_file():
                skipped.append((path, "not a file" if path.exists() else "a broken link"))
                continue
            size = path.stat().st_size
            if max_bytes and size > max_bytes:
                skipped.append((path, f"{size:,} bytes, over the {max_bytes:,} of DOWNLOAD_MAXSIZE"))
                continue
            body = path.read_bytes()
        except OSError as exc:
            skipped.append((path, exc.strerror or type(exc).__name__))
            continue
        if not body.strip():
            skipped.append((path, "empty"))
        elif not is_html(body, None):
            skipped.append((path, "not HTML (a PDF or binary data)"))
        else:
            usable.append((path, body))
    if not usable and not skipped:  # nothing of those names: the folder itself is named
        skipped.append((Path(folder), f"no {', '.join('*' + x for x in EXAMPLE_SUFFIXES)} file in it"))
    return usable, skipped


def folder_digest(folder: str | Path) -> str:
    """A SHA-256 of an ``examples_dir``'s saved pages: the names and bytes of its files named
    ``*.html``, ``*.htm`` or ``*.xhtml``, in name order (one that cannot be read counts by name and
    error). A JOBDIR resume compares it to tell a folder whose pages changed from the same folder."""
    digest = hashlib.sha256()
    try:
        paths = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in EXAMPLE_SUFFIXES)
    except OSError as exc:
        return f"unlisted: {exc.strerror or type(exc).__name__}"
    for path in paths:
        digest.update(path.name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b"-")
        except OSError as exc:
            digest.update((exc.strerror or type(exc).__name__).encode())
    return digest.hexdigest()
