"""Naming pages and search backends the same way everywhere: ``scrapy serveweb … --url-of PATH``
for ``htmltree:`` corpora, and one spider argument (``search_url``) for the search backend's URL
in every spider, with ``backend_url`` kept as a deprecated alias."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topiccrawl.discovery.pages import DWDBRMError
from topiccrawl.sitefinder.rules import SiteFinderError
from topiccrawl.spiders.discovery import DiscoverySpider
from topiccrawl.spiders.sitefinder import SiteFinderSpider
from topiccrawl.weblab.corpus import CorpusError, open_corpus

ROOT = Path(__file__).resolve().parents[1]
SCRAPY = ("import sys\nfrom scrapy.cmdline import execute\n"
          "from scrapy.utils.project import get_project_settings\n"
          "s = get_project_settings(); s.set('COMMANDS_MODULE', 'topiccrawl.crawl.commands')\n"
          "execute(['scrapy', 'serveweb', *sys.argv[1:]], s)\n")


def tree(root: Path) -> Path:
    """Two pages whose links climb above DIR through <base href> (as Debian's LibreOffice help)."""
    text = root / "help" / "zh-TW" / "text"
    (text / "scalc").mkdir(parents=True)
    (text / "scalc" / "main0000.html").write_text(
        '<html><head><base href="../../../"><title>Calc</title></head>'
        '<body><a href="zh-TW/text/swriter/main0000.html">w</a></body></html>', encoding="utf-8")
    (text / "swriter").mkdir()
    (text / "swriter" / "main0000.html").write_text("<html><body>Writer</body></html>", encoding="utf-8")
    return text


def serveweb(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", SCRAPY, *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_url_of_names_an_opaque_page_by_its_path(tmp_path):
    text = tree(tmp_path)
    corpus = open_corpus(f"htmltree:{text}?opaque=1")
    expected = f"http://htmltree.test/p/{hashlib.sha1(b'scalc/main0000.html').hexdigest()[:16]}.html"
    assert corpus.url_of("scalc/main0000.html") == expected
    assert corpus.url_of(str(text / "scalc" / "main0000.html")) == expected  # absolute path under DIR
    assert corpus.url_of("/zh-TW/text/scalc/main0000.html") == expected  # its mirrored path
    assert corpus.get(expected).status == 200
    with pytest.raises(CorpusError, match="no page at 'scalc/none.html'"):
        corpus.url_of("scalc/none.html")
    plain = open_corpus(f"htmltree:{text}")
    assert plain.url_of("./swriter/main0000.html") == "http://htmltree.test/zh-TW/text/swriter/main0000.html"


def test_serveweb_url_of_prints_urls_and_reports_bad_paths_in_one_line(tmp_path):
    text = tree(tmp_path)
    spec = f"htmltree:{text}?opaque=1"
    ok = serveweb(spec, "--url-of", "scalc/main0000.html", "--url-of", "swriter/main0000.html")
    assert ok.returncode == 0, ok.stderr
    corpus = open_corpus(spec)
    assert ok.stdout.split() == [corpus.url_of("scalc/main0000.html"), corpus.url_of("swriter/main0000.html")]
    bad = serveweb(spec, "--url-of", "nope.html")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [f"error: htmltree: no page at 'nope.html' under {text} "
                                               "(give a path relative to it)"]
    other = serveweb("generated:zh-disaster?pages=1000", "--url-of", "x.html")
    assert other.returncode == 2 and "not named by a file path" in other.stderr and "Traceback" not in other.stderr


@pytest.mark.parametrize("spider", [SiteFinderSpider, DiscoverySpider])
def test_search_url_is_the_argument_of_every_spider_and_backend_url_its_deprecated_alias(spider):
    url = "https://searx.example/search"
    kwargs = {"backend": "searxng"}
    assert repr(spider.check_arguments(**kwargs, search_url=url)) == repr(spider.check_arguments(**kwargs, backend_url=url))
    with pytest.warns(DeprecationWarning, match="backend_url is deprecated: use search_url"):
        old = spider(**kwargs, backend_url=url)
    new = spider(**kwargs, search_url=url)
    backends = [getattr(s, "backends", None) or [s.backend_url] for s in (old, new)]
    assert repr(backends[0]) == repr(backends[1]) and url in repr(backends[1])
    error = SiteFinderError if spider is SiteFinderSpider else DWDBRMError
    with pytest.raises(error, match="give the search backend's URL once"):
        spider.check_arguments(**kwargs, search_url=url, backend_url="https://other.example/search")
