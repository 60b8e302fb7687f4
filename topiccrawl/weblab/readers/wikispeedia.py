"""``wikispeedia:DIR`` -- the 4,598 articles of the 2007 Schools Wikipedia Selection with their
real link graph and subject categories (SNAP "Wikispeedia navigation paths", West & Leskovec,
WWW 2012; West, Pineau & Precup, IJCAI 2009; text under the GNU FDL).

DIR holds the publisher's layout (``plaintext_articles/`` and ``wikispeedia_paths-and-graph/``,
possibly under ``data/``) or the two SNAP tarballs, extracted once into the cache. The original
HTML is not distributed, so each article is rendered from its text: an anchor on the first
occurrence of each link target's title, the remaining links in a "See also" list, so the served
link set is exactly ``links.tsv``. URLs are ``http://en.wikispeedia.test/wiki/<name>`` (the
URL-encoded article name); labels are every prefix (depth >= 1) of each subject category.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from topiccrawl.weblab.corpus import Corpus, CorpusError, Doc, Page
from topiccrawl.weblab.readers._cache import check_layout, find_layout

_SUBJECT_LINE = re.compile(r"^2007 Schools Wikipedia Selection\. Related subjects:")
HOST = "en.wikispeedia.test"
PREFIX = f"http://{HOST}/wiki/"
SEEDS = ["Earth", "United_States", "Europe", "Science", "Geography"]
ARCHIVES = ["wikispeedia-plaintext-4598.tar.xz", "wikispeedia-graph-categories.tar.gz"]
GRAPH = "wikispeedia_paths-and-graph"


def _rows(path: Path) -> Iterator[list[str]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                yield line.split("\t")


def title_of(name: str) -> str:
    """Display title of an article name: ``Mercury_%28planet%29`` -> ``Mercury (planet)``."""
    return unquote(name).replace("_", " ")


def category_labels(category: str) -> list[str]:
    """``subject.Geography.Storms`` -> ``[subject.Geography, subject.Geography.Storms]``."""
    parts = category.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts) + 1)]


class WikispeediaCorpus(Corpus):
    name = "wikispeedia"

    def __init__(self, text_dir: Path, graph_dir: Path):
        self.text_dir = text_dir
        self.names = [row[0] for row in _rows(graph_dir / "articles.tsv")]
        self._by_title = {unquote(n): n for n in self.names}
        self.out: dict[str, list[str]] = {n: [] for n in self.names}
        for src, dst, *_ in _rows(graph_dir / "links.tsv"):
            if src in self.out and dst in self.out and dst not in self.out[src]:
                self.out[src].append(dst)
        self._labels: dict[str, set[str]] = {}
        for name, cat, *_ in _rows(graph_dir / "categories.tsv"):
            self._labels.setdefault(name, set()).update(category_labels(cat))

    # -- Corpus interface ----------------------------------------------------------------------
    def has_host(self, host: str) -> bool:
        return host == HOST

    def _name(self, url: str) -> str | None:
        parts = urlsplit(url)
        if parts.hostname != HOST or not parts.path.startswith("/wiki/"):
            return None
        return self._by_title.get(unquote(parts.path[len("/wiki/"):]))

    def get(self, url: str) -> Page | None:
        name = self._name(url)
        if name is None:
            return None
        return Page(PREFIX + name, 200, {"Content-Type": "text/html; charset=utf-8"},
                    self.render(name).encode("utf-8"), [PREFIX + t for t in self.out[name]])

    def doc(self, url: str) -> Doc | None:
        name = self._name(url)
        if name is None:
            return None
        return Doc(PREFIX + name, title_of(name), " ".join(self._paragraphs(name)),
                   [PREFIX + t for t in self.out[name]])

    def iter_urls(self) -> Iterator[str]:
        return (PREFIX + n for n in self.names)

    def labels(self, url: str) -> frozenset[str]:
        name = self._name(url)
        return frozenset(self._labels.get(name, ())) if name else frozenset()

    def __len__(self) -> int:
        return len(self.names)

    def hosts(self) -> list[str]:
        return [HOST]

    def seeds(self) -> list[str]:
        return [PREFIX + n for n in SEEDS if n in self.out]

    def describe(self) -> dict:
        return {"name": self.name, "pages": len(self), "host": HOST,
                "links": sum(map(len, self.out.values())),
                "categories": len({lab for labs in self._labels.values() for lab in labs})}

    # -- rendering -----------------------------------------------------------------------------
    def _paragraphs(self, name: str) -> list[str]:
        """The article text as paragraphs (blank-line separated, whitespace collapsed), without
        the ``#copyright`` marker, the title line and the selection's header line
        ("2007 Schools Wikipedia Selection. Related subjects: Storms"), which names the subject
        category — the ground-truth label — and would let any scorer read the label."""
        try:
            text = (self.text_dir / f"{name}.txt").read_text(encoding="utf-8")
        except OSError as exc:
            raise CorpusError(f"wikispeedia: cannot read {self.text_dir / name}.txt: {exc}") from None
        paras = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text)]
        paras = [p for p in paras if p and p != "#copyright" and not _SUBJECT_LINE.match(p)]
        return paras[1:] if paras and paras[0] == title_of(name) else paras

    def render(self, name: str) -> str:
        """HTML of an article with every outlink of ``links.tsv`` placed exactly once."""
        paras = self._paragraphs(name)
        lowered = [p.lower() if len(p.lower()) == len(p) else p for p in paras]
        spans: list[tuple[int, int, int, str]] = []  # (paragraph, start, end, target)
        for target in self.out[name]:
            phrase = re.sub(r"\s*\(.*\)$", "", title_of(target)) or title_of(target)
            hit = _first(phrase, paras) or _first(phrase.lower(), lowered)
            spans.append((*hit, target) if hit else (-1, 0, 0, target))
        placed: dict[int, list[tuple[int, int, str]]] = {}
        see_also = []
        for i, start, end, target in sorted(spans):
            taken = placed.setdefault(i, [])
            if i < 0 or (taken and start < taken[-1][1]):
                see_also.append(target)
            else:
                taken.append((start, end, target))
        title = html.escape(title_of(name))
        out = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}'
               f"</title></head>\n<body><h1>{title}</h1>\n"]
        for i, para in enumerate(paras):
            pos, chunks = 0, []
            for start, end, target in placed.get(i, []):
                chunks += [html.escape(para[pos:start]), _anchor(target, para[start:end])]
                pos = end
            out.append(f"<p>{''.join(chunks)}{html.escape(para[pos:])}</p>\n")
        if see_also:
            items = "".join(f"<li>{_anchor(t, title_of(t))}</li>" for t in sorted(see_also))
            out.append(f"<h2>See also</h2>\n<ul>{items}</ul>\n")
        out.append("</body></html>\n")
        return "".join(out)


def _first(phrase: str, paras: list[str]) -> tuple[int, int, int] | None:
    """(paragraph, start, end) of the first whole-word occurrence of ``phrase``."""
    for i, para in enumerate(paras):
        start = para.find(phrase)
        while start >= 0:
            end = start + len(phrase)
            if not (start and para[start - 1].isalnum()) and not (
                    end < len(para) and para[end].isalnum()):
                return i, start, end
            start = para.find(phrase, start + 1)
    return None


def _anchor(target: str, text: str) -> str:
    return f'<a href="/wiki/{html.escape(target)}">{html.escape(text)}</a>'


def open_wikispeedia(arg: str, params: dict[str, str]) -> WikispeediaCorpus:
    text_dir, graph_dir = find_layout(arg, ["plaintext_articles", GRAPH], ARCHIVES, "wikispeedia")
    _check_graph(graph_dir)
    return WikispeediaCorpus(text_dir, graph_dir)


def check_wikispeedia(arg: str, params: dict[str, str]) -> None:
    """The layout checks of :func:`open_wikispeedia`, without reading or extracting anything."""
    _, graph_dir = check_layout(arg, ["plaintext_articles", GRAPH], ARCHIVES, "wikispeedia")
    if graph_dir is not None:
        _check_graph(graph_dir)


def _check_graph(graph_dir: Path) -> None:
    for part in ("articles.tsv", "links.tsv", "categories.tsv"):
        if not (graph_dir / part).is_file():
            raise CorpusError(f"wikispeedia: {graph_dir / part} is missing")
