"""Category trees that describe topics (TD-CS): the tree model, a streaming DMOZ RDF reader and the
Wikispeedia subject tree.

* :class:`TopicTree` -- nodes identified by their path (``Top/Arts/Animation`` or
  ``subject.Science.Biology``), level 0 = root, each with its own descriptive documents; the
  topic documents D_ij of a node are those of its whole subtree (TD-CS paper, §2 notation).
* :func:`iter_dmoz` / :func:`read_dmoz` -- the DMOZ (Open Directory) RDF dumps, ``structure.rdf.u8``
  (``Topic`` with ``narrow*``/``symbolic*``/``related``/``altlang*`` links, ``Alias``) and
  ``content.rdf.u8`` (``Topic`` with ``link``/``link1``, ``ExternalPage`` with ``d:Title``,
  ``d:Description`` and ``topic``), read with lxml ``iterparse`` and cleared element by element,
  so the 2 GB dumps stream in constant memory (plain or ``.gz``). Namespaces are matched by local
  name, so the old ``http://dmoz.org/rdf`` and the 2.0 ``http://dmoz.org/rdf/`` dumps both read.
* :func:`wikispeedia_tree` -- the 129-node ``subject.*`` tree of Wikispeedia, described by the
  first sentences of a seeded random half of each category's articles; the other half is held out
  for evaluation (no article is both descriptive and evaluated).

Scrapy-free.
"""

from __future__ import annotations

import gzip
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from lxml import etree

from topiccrawl.weblab.corpus import CorpusError


class TreeError(ValueError):
    """A bad tree spec, an unreadable tree file or an unknown node (one-line message)."""


# ---------------------------------------------------------------------------------------------
# the tree


@dataclass
class Node:
    """A category: ``id`` is its full path, ``docs`` its own descriptive documents (texts), ``urls``
    the pages listed in it (DMOZ) or its descriptive articles (Wikispeedia)."""

    id: str
    title: str
    parent: str | None
    children: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    description: str = ""
    #: DMOZ cross links: ``narrow``, ``symbolic`` (as ``name:target``), ``related``, ``altlang`` ...
    links: dict[str, list[str]] = field(default_factory=dict)


class TopicTree:
    """A rooted category tree. Paths are split on ``sep`` (``/`` for DMOZ, ``.`` for Wikispeedia)."""

    def __init__(self, root: str, sep: str, name: str = "tree"):
        self.root, self.sep, self.name = root, sep, name
        self.nodes: dict[str, Node] = {root: Node(root, _title(root, sep), None)}
        #: held-out evaluation pages: URL -> labels (Wikispeedia; empty for DMOZ)
        self.heldout: dict[str, frozenset[str]] = {}

    def add(self, node_id: str, title: str = "") -> Node:
        """The node ``node_id``, created with all missing ancestors (parent = path prefix)."""
        node = self.nodes.get(node_id)
        if node is None:
            if not node_id.startswith(self.root + self.sep):
                raise TreeError(f"{self.name}: {node_id!r} is not under the root {self.root!r}")
            parent = self.add(node_id.rsplit(self.sep, 1)[0])
            node = self.nodes[node_id] = Node(node_id, title or _title(node_id, self.sep), parent.id)
            parent.children.append(node_id)
        elif title:
            node.title = title
        return node

    def __getitem__(self, node_id: str) -> Node:
        """The node ``node_id``; the root prefix may be left out (``Geography.Storms``)."""
        node = self.nodes.get(node_id) or self.nodes.get(f"{self.root}{self.sep}{node_id}")
        if node is None:
            near = sorted(n for n in self.nodes if n.lower().endswith(node_id.lower().rsplit(self.sep, 1)[-1]))
            hint = f" (did you mean {', '.join(near[:3])}?)" if near else ""
            raise TreeError(f"{self.name}: no node {node_id!r}{hint}")
        return node

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    def path(self, node_id: str) -> list[str]:
        """N.Path = [P_0 = root, ..., P_i = node]."""
        out = [self[node_id].id]
        while self.nodes[out[-1]].parent is not None:
            out.append(self.nodes[out[-1]].parent)
        return out[::-1]

    def level(self, node_id: str) -> int:
        return len(self.path(node_id)) - 1

    def siblings(self, node_id: str) -> list[str]:
        """The children of the node's parent, the node included (just the node for the root)."""
        node = self[node_id]
        return [node.id] if node.parent is None else list(self.nodes[node.parent].children)

    def subtree(self, node_id: str) -> Iterator[Node]:
        """The node and all its descendants (ST_ij), depth first."""
        stack = [self[node_id]]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(self.nodes[c] for c in reversed(node.children))

    def documents(self, node_id: str) -> list[str]:
        """D_ij: the descriptive documents of the node's subtree."""
        return [d for n in self.subtree(node_id) for d in n.docs]

    def labels(self, node_id: str) -> frozenset[str]:
        """The evaluation label of a node (its id), for topic files and ground truth."""
        return frozenset({self[node_id].id})


def _title(node_id: str, sep: str) -> str:
    return node_id.rsplit(sep, 1)[-1].replace("_", " ")


# ---------------------------------------------------------------------------------------------
# DMOZ RDF

R_NS = "http://www.w3.org/TR/RDF/"


@dataclass
class DmozTopic:
    """A ``<Topic r:id=...>``: catid, title, description and its links by kind (local tag name
    without the priority digit: ``narrow``, ``symbolic``, ``related``, ``altlang``, ``link``...)."""

    id: str
    catid: str = ""
    title: str = ""
    description: str = ""
    links: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class DmozPage:
    """An ``<ExternalPage about=...>`` of the content dump."""

    url: str
    title: str = ""
    description: str = ""
    topic: str = ""
    priority: int = 0


@dataclass
class DmozAlias:
    """An ``<Alias r:id="name:target">`` of the structure dump (a symbolic link's target)."""

    id: str
    title: str
    target: str


def _local(tag) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def _resource(el) -> str:
    return el.get(f"{{{R_NS}}}resource") or el.get("resource") or ""


def _topic_id(raw: str) -> str:
    """``""`` (the content dump's root entry) is ``Top``."""
    return raw.strip() or "Top"


def iter_dmoz(path: str | Path) -> Iterator[DmozTopic | DmozPage | DmozAlias]:
    """Stream the records of a DMOZ structure or content dump (``.gz`` allowed), in file order.

    Raises :class:`TreeError` naming the file for a missing file or broken XML.
    """
    path = Path(path)
    if not path.is_file():
        raise TreeError(f"dmoz: {path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            for _, el in etree.iterparse(fh, events=("end",), huge_tree=True):
                parent = el.getparent()
                if parent is None or parent.getparent() is not None:
                    continue  # only the children of <RDF>
                record = _record(el)
                el.clear()
                while el.getprevious() is not None:
                    del parent[0]
                if record is not None:
                    yield record
    except etree.XMLSyntaxError as exc:
        raise TreeError(f"dmoz: {path}: broken XML: {exc}") from None
    except (OSError, EOFError) as exc:
        raise TreeError(f"dmoz: {path}: cannot read: {exc}") from None


def _record(el) -> DmozTopic | DmozPage | DmozAlias | None:
    kind = _local(el.tag)
    fields: dict[str, str] = {}
    links: dict[str, list[str]] = {}
    for child in el:
        name = _local(child.tag)
        target = _resource(child)
        if target:
            links.setdefault(name.rstrip("0123456789"), []).append(target)
        elif name and name not in fields:
            fields[name] = " ".join((child.text or "").split())
    if kind == "Topic":
        return DmozTopic(_topic_id(el.get(f"{{{R_NS}}}id", "")), fields.get("catid", ""),
                         fields.get("Title", ""), fields.get("Description", ""), links)
    if kind == "ExternalPage":
        prio = fields.get("priority", "0")
        return DmozPage(el.get("about", ""), fields.get("Title", ""), fields.get("Description", ""),
                        _topic_id(fields.get("topic", "")), int(prio) if prio.isdigit() else 0)
    if kind == "Alias":
        target = links.get("Target", [""])[0]
        return DmozAlias(el.get(f"{{{R_NS}}}id", ""), fields.get("Title", ""), target)
    return None


def read_dmoz(*paths: str | Path, under: str = "") -> TopicTree:
    """A :class:`TopicTree` rooted at ``Top`` from DMOZ dumps (structure and/or content, any order).

    The hierarchy is the topic path (``Top/Arts/Animation`` is a child of ``Top/Arts``); every
    topic met, and every ``narrow`` target, becomes a node with its missing ancestors. The
    descriptive documents of a node are ``"title. description"`` of each ExternalPage whose
    ``<topic>`` it is; ``urls`` are its ``link``/``link1`` pages plus those ExternalPages.
    ``under`` keeps only that subtree (and its ancestors) to bound memory on the full dump.
    """
    if not paths:
        raise TreeError("dmoz: give a structure and/or a content RDF file")
    tree = TopicTree("Top", "/", name="dmoz")
    keep = under.rstrip("/")

    def node(topic: str) -> Node | None:
        if topic == "Top":
            return tree.nodes["Top"]
        inside = not keep or topic == keep or topic.startswith(keep + "/") or keep.startswith(topic + "/")
        # a topic outside Top (a related "Kids_and_Teens") or outside ``under`` is skipped
        return tree.add(topic) if inside and topic.startswith("Top/") else None

    for path in paths:
        for rec in iter_dmoz(path):
            if isinstance(rec, DmozTopic):
                n = node(rec.id)
                if n is None:
                    continue
                if rec.title and rec.id != "Top":
                    n.title = rec.title
                n.description = n.description or rec.description
                for kind, targets in rec.links.items():
                    if kind in ("link", "narrow"):
                        continue
                    n.links.setdefault(kind, []).extend(targets)
                n.urls.extend(u for u in rec.links.get("link", []) if u not in n.urls)
                for target in rec.links.get("narrow", []):
                    n.links.setdefault("narrow", []).append(target)
                    node(target)
            elif isinstance(rec, DmozPage):
                n = node(rec.topic)
                if n is None:
                    continue
                if rec.url not in n.urls:
                    n.urls.append(rec.url)
                doc = ". ".join(p for p in (rec.title, rec.description) if p)
                if doc:
                    n.docs.append(doc)
    if keep and keep not in tree:
        raise TreeError(f"dmoz: no topic {keep!r} in {', '.join(map(str, paths))}")
    return tree


# ---------------------------------------------------------------------------------------------
# Wikispeedia

_SCHOOLS_LINE = re.compile(r"^\s*\d{4} Schools Wikipedia Selection\..*$", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"(])")


def first_sentences(text: str, sentences: int = 3) -> str:
    """A short description of a Wikispeedia article: the first ``sentences`` sentences of its first
    prose paragraph (>= 20 words, mostly words, ending like a sentence). The "Schools Wikipedia
    Selection. Related subjects: <category>" line (which names the label) is never used; infobox
    lines fail the prose test and image captions (marked "Enlarge", or repeated) are skipped."""
    text = _SCHOOLS_LINE.sub("", text)
    for block in re.split(r"\n\s*\n", text):
        para = " ".join(block.split())
        words = para.split()
        if (len(words) >= 20 and para.endswith((".", '"', ")")) and "Enlarge" not in words
                and para.count(para[:40]) == 1 and sum(w[:1].isalpha() for w in words) >= 0.75 * len(words)):
            return " ".join(_SENTENCE_END.split(para)[:sentences])
    return ""


@lru_cache(maxsize=4)
def wikispeedia_layout(directory: str) -> tuple[Path, dict[str, list[str]]]:
    """The article text directory and article name -> categories (``subject.A.B``, file order) of a
    Wikispeedia directory or of its SNAP tarballs (extracted once into the cache)."""
    from topiccrawl.weblab.readers import wikispeedia as ws

    try:
        text_dir, graph_dir = ws.find_layout(directory, ["plaintext_articles", ws.GRAPH],
                                             ws.ARCHIVES, "wikispeedia")
        lines = (graph_dir / "categories.tsv").read_text(encoding="utf-8").splitlines()
    except (CorpusError, OSError) as exc:
        raise TreeError(str(exc)) from None
    cats: dict[str, list[str]] = {}
    for line in lines:
        name, _, cat = line.partition("\t")
        if line and not line.startswith("#") and cat.startswith("subject."):
            cats.setdefault(name, []).append(cat.strip())
    return text_dir, cats


def article_text(directory: str, name: str) -> str:
    """Text of a Wikispeedia article without the copyright marker and the "Related subjects" line
    that names its category (for classification experiments)."""
    text_dir = wikispeedia_layout(directory)[0]
    try:
        raw = (text_dir / f"{name}.txt").read_text(encoding="utf-8")
    except OSError as exc:
        raise TreeError(f"wikispeedia: cannot read {text_dir / name}.txt: {exc}") from None
    return _SCHOOLS_LINE.sub("", raw.replace("#copyright", ""))


def wikispeedia_tree(directory: str, seed: int = 0, sentences: int = 3) -> TopicTree:
    """The Wikispeedia subject tree (root ``subject``, 3 levels below it) with descriptive documents.

    Each article with a category goes, with its first category (sorted), into a stratum; a seeded
    shuffle of each stratum puts half of it (rounded up) on the descriptive side: those articles'
    :func:`first_sentences` become documents of **every** node of their categories. The other half
    is ``tree.heldout`` (URL -> labels as the wikispeedia reader gives them), the only pages an
    evaluation should count. ``node.urls`` are the descriptive articles of a node.
    """
    from topiccrawl.weblab.readers.wikispeedia import PREFIX, category_labels

    _, cats = wikispeedia_layout(directory)
    tree = TopicTree("subject", ".", name="wikispeedia")
    strata: dict[str, list[str]] = {}
    for name in sorted(cats):
        for cat in cats[name]:
            tree.add(cat)
        strata.setdefault(min(cats[name]), []).append(name)
    rng = random.Random(seed)
    for stratum in sorted(strata):
        names = strata[stratum]
        rng.shuffle(names)
        half = (len(names) + 1) // 2
        for name in names[half:]:
            tree.heldout[PREFIX + name] = frozenset(
                lab for cat in cats[name] for lab in category_labels(cat))
        for name in sorted(names[:half]):
            doc = first_sentences(article_text(directory, name), sentences)
            for cat in cats[name]:
                node = tree.nodes[cat]
                node.urls.append(PREFIX + name)
                if doc:
                    node.docs.append(doc)
    return tree
