"""Packaging for pip and for ``scrapyd-deploy`` (which runs ``setup.py bdist_egg``).

The top-level ``data/`` folder is installed as the ``topiccrawl.data`` package so that code
reads it with :mod:`importlib.resources` from a wheel, an editable install or a Scrapyd egg.
"""

from setuptools import find_packages, setup

packages = find_packages(include=["topiccrawl", "topiccrawl.*"]) + ["topiccrawl.data"]

setup(
    name="topiccrawl",
    version="0.1.0",
    description="Topic-focused crawling and domain web discovery on Scrapy, with an offline web lab",
    python_requires=">=3.10",
    packages=packages,
    package_dir={"topiccrawl.data": "data"},
    package_data={"topiccrawl.data": ["*.md", "topics/*.toml", "words/*.txt", "words/*.toml", "rules/*.toml"],
                  "topiccrawl.redis": ["lua/*.lua"]},  # the Redis store's Lua scripts
    include_package_data=True,
    # the semantic prior (TOPICCRAWL_SEMANTIC_ENABLED, docs/learned.md): a sentence encoder on torch,
    # and model2vec to distil a static model from it (TOPICCRAWL_SEMANTIC_ENCODER=static); "static"
    # alone: the static model, distilled from a BERT encoder with numpy, without torch
    extras_require={"semantic": ["sentence-transformers>=5", "model2vec[distill]>=0.10"],
                    "static": ["model2vec>=0.10"]},
    entry_points={
        "scrapy": ["settings = topiccrawl.settings"],
        # `scrapy serveweb` also outside the project directory
        "scrapy.commands": ["serveweb = topiccrawl.crawl.commands.serveweb:Command"],
    },
    zip_safe=False,
)
