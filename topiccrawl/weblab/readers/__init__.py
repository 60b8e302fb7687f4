"""Readers of real third-party corpora for the offline web lab (see ``docs/real-corpora.md``).

Each module exposes an opener ``(arg, params) -> Corpus`` registered in
:data:`topiccrawl.weblab.corpus.READERS`: ``wikispeedia:DIR``, ``webkb:DIR``,
``htmltree:DIR[?host=H&opaque=1&labeldepth=N]`` and ``warc:FILE[?labels=PATH]``.
"""
