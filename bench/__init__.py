"""Benchmarks (docs/benchmarks.md), run from the repository root as ``python -m bench.NAME``.

Scripts that read third-party corpora (Wikispeedia, WebKB) take their folder from ``--data-dir``,
which defaults to ``$TOPICCRAWL_DATA_DIR``.
"""
