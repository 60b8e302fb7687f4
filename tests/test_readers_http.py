"""The real-corpus readers served over loopback HTTP through the lab's proxy (topiccrawl.weblab.api).

Real data comes from the shared data folder and Debian's LibreOffice help (skipped with the
reason when absent); the htmltree and warc cases use tiny corpora from tmp_path and always run.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from test_readers import lo_help, make_tree, make_warc, shared, write
from topiccrawl.weblab.api import WebLab
from topiccrawl.weblab.corpus import open_corpus
from topiccrawl.weblab.readers._links import extract_links


def test_wikispeedia_over_http():
    spec = f"wikispeedia:{shared('wikispeedia')}"
    corpus = open_corpus(spec)
    with WebLab(spec) as lab:
        assert lab.pages == 4598 and lab.proxy_url.startswith("http://127.0.0.1:")
        url = "http://en.wikispeedia.test/wiki/Hurricane_Katrina"
        status, headers, body = lab.fetch(url)
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert set(extract_links(body, url)) == set(corpus.get(url).links)
        assert lab.fetch("http://en.wikispeedia.test/wiki/No_such_article")[0] == 404
        hits = [r["url"] for r in lab.search("hurricane katrina")["results"]]
        assert url in hits[:5]


def test_webkb_over_http():
    with WebLab(f"webkb:{shared('webkb')}") as lab:
        assert lab.pages == 8266
        status, headers, body = lab.fetch("http://www.cs.wisc.edu/")
        assert status == 200 and "Last-Modified" in headers
        assert int(headers["Content-Length"]) == len(body) and b"<" in body
        status, headers, _ = lab.fetch("http://www.tc.cornell.edu/~anne")  # a stored redirect
        assert (status, headers["Location"]) == (301, "http://www.tc.cornell.edu/~anne/")
        status, headers, _ = lab.fetch("http://www.cs.uidaho.edu/~bobc")  # slash alias
        assert (status, headers["Location"]) == (301, "http://www.cs.uidaho.edu/~bobc/")
        assert lab.fetch("http://www.cs.uidaho.edu/~bobc/")[0] == 200


def test_htmltree_opaque_over_http(tmp_path):
    with WebLab(f"htmltree:{make_tree(tmp_path)}?opaque=1&labeldepth=1") as lab:
        assert lab.pages == 3
        hits = [r["url"] for r in lab.search("calc")["results"]]
        assert hits and all(re.search(r"/p/[0-9a-f]{16}\.html$", u) for u in hits)
        start = next(u for u in hits)
        seen, queue = set(), [start]
        while queue:  # crawl through the served bodies: every page is reachable from one
            url = queue.pop()
            status, _, body = lab.fetch(url)
            if status != 200 or url in seen:
                continue
            seen.add(url)
            queue += [a for a in extract_links(body, url) if urlsplit(a).hostname == "htmltree.test"]
        assert len(seen) == 3 and not any(b"/calc/" in lab.fetch(u)[2] for u in seen)


def test_libreoffice_help_over_http():
    with WebLab(f"htmltree:{lo_help()}?opaque=1&labeldepth=1&host=help.test") as lab:
        assert lab.pages == 2560
        hits = lab.search("数据透视表")["results"]
        assert hits and all(urlsplit(r["url"]).hostname == "help.test" for r in hits)
        status, headers, body = lab.fetch(hits[0]["url"])
        assert status == 200 and "utf-8" in headers["Content-Type"]
        assert b"zh-CN/text" not in body and "数据透视表" in body.decode("utf-8")


def test_warc_over_http(tmp_path):
    path = make_warc(tmp_path / "t.warc.gz")
    write(tmp_path / "t.warc.gz.labels.tsv", "http://a.test/\ttopic\n")
    with WebLab(f"warc:{path}") as lab:
        status, headers, body = lab.fetch("http://a.test/")
        assert status == 200 and headers["Server"] == "old/1.0" and body.startswith(b"<html><title>A")
        assert headers["Content-Length"] == str(len(body))
        status, headers, _ = lab.fetch("http://a.test/b")
        assert (status, headers["Location"]) == (301, "http://a.test/")
        assert lab.fetch("http://a.test/nothing")[0] == 404
