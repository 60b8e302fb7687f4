"""Corpus-level tests of the real-corpus readers (wikispeedia, webkb, htmltree, warc).

Real data is read from $TOPICCRAWL_DATA_DIR (see tests/conftest.py) and Debian's LibreOffice
help (scripts/fetch-libreoffice-help.sh); those tests skip with the reason when it is absent.
Tiny corpora written into tmp_path cover every reader's rules and always run.
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from conftest import shared_data_dir
from topiccrawl.weblab.corpus import CorpusError, open_corpus
from topiccrawl.weblab.readers._cache import cache_dir
from topiccrawl.weblab.readers._links import extract_links

WEATHER = {"subject.Geography.Natural_Disasters", "subject.Geography.Storms",
           "subject.Geography.Climate_and_the_Weather"}


def shared(sub: str) -> Path:
    root = shared_data_dir()
    if root is None or not (root / sub).is_dir():
        pytest.skip(f"third-party data {sub}/ missing: set TOPICCRAWL_DATA_DIR to the folder that holds it "
                    f"(docs/real-corpora.md)")
    return root / sub


def lo_help() -> Path:
    path = Path(os.environ.get("TOPICCRAWL_LO_HELP") or
                cache_dir() / "libreoffice-help-zh-cn/usr/share/libreoffice/help/zh-CN/text")
    if not path.is_dir():
        pytest.skip(f"{path} missing: run scripts/fetch-libreoffice-help.sh "
                    "(or set TOPICCRAWL_LO_HELP to a zh-CN/text directory)")
    return path


def write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


# --------------------------------------------------------------------------------- wikispeedia
def make_wikispeedia(root: Path) -> Path:
    """The SNAP layout under data/, three articles."""
    g = root / "data" / "wikispeedia_paths-and-graph"
    write(g / "articles.tsv", "# comment\n\nEarth\nHurricane\nMercury_%28planet%29\n")
    write(g / "links.tsv", "# src\ttgt\nHurricane\tEarth\nHurricane\tMercury_%28planet%29\n"
                           "Earth\tHurricane\n")
    write(g / "categories.tsv", "Hurricane\tsubject.Geography.Storms\n"
                                "Earth\tsubject.Science.Physics\nEarth\tsubject.Geography.General\n")
    t = root / "data" / "plaintext_articles"
    write(t / "Earth.txt", "   #copyright\n\nEarth\n\nEarth has hurricanes and\n   weather.\n")
    write(t / "Hurricane.txt", "   #copyright\n\nHurricane\n\nA storm on Earth, not Earthly.\n")
    write(t / "Mercury_%28planet%29.txt", "   #copyright\n\nMercury (planet)\n\nSmall.\n")
    return root


def test_wikispeedia_renders_the_real_link_set(tmp_path):
    c = open_corpus(f"wikispeedia:{make_wikispeedia(tmp_path)}")
    assert len(c) == 3 and c.hosts() == ["en.wikispeedia.test"]
    page = c.get("http://en.wikispeedia.test/wiki/Hurricane")
    body = page.body.decode()
    assert "<title>Hurricane</title>" in body
    assert 'on <a href="/wiki/Earth">Earth</a>, not Earthly' in body  # first whole-word hit
    assert re.search(r"See also.*/wiki/Mercury_%28planet%29", body, re.S)  # not in the text
    assert set(extract_links(page.body, page.url)) == set(page.links) == {
        "http://en.wikispeedia.test/wiki/Earth", "http://en.wikispeedia.test/wiki/Mercury_%28planet%29"}
    # case-insensitive fallback ("hurricanes" is no whole word, "Hurricane" absent) -> see also
    assert "See also" in c.get("http://en.wikispeedia.test/wiki/Earth").body.decode()
    assert c.labels(page.url) == {"subject.Geography", "subject.Geography.Storms"}
    assert c.labels("http://en.wikispeedia.test/wiki/Mercury_(planet)") == set()
    assert c.get("http://en.wikispeedia.test/wiki/Mercury_(planet)").url.endswith("%28planet%29")
    assert c.get("http://en.wikispeedia.test/wiki/Nope") is None
    assert c.doc(page.url).title == "Hurricane" and "storm" in c.doc(page.url).text


def test_wikispeedia_real_data():
    c = open_corpus(f"wikispeedia:{shared('wikispeedia')}")
    assert len(c) == 4598
    weather = [u for u in c.iter_urls() if c.labels(u) & WEATHER]
    assert len(weather) == 104
    rendered = 0
    for url in c.iter_urls():
        page = c.get(url)
        links = extract_links(page.body, url, "utf-8")
        assert set(links) == set(page.links), url
        rendered += len(links)
    assert rendered == 119_879
    assert all(urlsplit(u).path.startswith("/wiki/") for u in c.seeds())
    assert not any("subject" in u or "Geography" in u for u in weather)


# --------------------------------------------------------------------------------------- webkb
def make_webkb(root: Path) -> Path:
    d = root / "webkb"
    write(d / "student/cornell/http:^^www.cs.cornell.edu^~ann^",
          b"Date: Sunday, 24-Nov-96 21:37:21 GMT\r\nServer: NCSA/1.1\r\nContent-type: text/html\r\n"
          b"Last-modified: Friday, 25-Oct-96 18:21:47 GMT\r\nContent-length: 9999\r\n"
          b"Connection: close\r\n\r\n<html><title>Ann \xe9</title><a href=../~bob>bob</a>"
          b"<a href='http://WWW.CS.CORNELL.EDU:80/'>dept</a><a href=/~ann>me</a><a href=mailto:a@b>m</a></html>")
    write(d / "faculty/cornell/http:^^www.cs.cornell.edu^~bob",
          b"WWW Alert:  Redirection response from server is not handled by this client\n"
          b"Date: Wed, 19 Feb 1997 16:49:16 GMT\nLocation: http://www.cs.cornell.edu/~bob/\n"
          b"Content-type: text/html\n\n<BODY>moved</BODY>\n")
    write(d / "department/cornell/http:^^www.cs.cornell.edu^", b"<html>no headers \xe9</html>")
    write(d / "other/misc/ftp:^^ftp.x.edu^pub^index.html", b"<html>ftp</html>")
    return root


def test_webkb_headers_redirects_and_aliases(tmp_path):
    c = open_corpus(f"webkb:{make_webkb(tmp_path)}")
    assert len(c) == 4
    ann = c.get("http://www.cs.cornell.edu/~ann/")
    assert ann.status == 200 and ann.body.startswith(b"<html><title>Ann \xe9")
    assert ann.headers == {"Date": "Sunday, 24-Nov-96 21:37:21 GMT", "Server": "NCSA/1.1",
                           "Content-Type": "text/html",
                           "Last-Modified": "Friday, 25-Oct-96 18:21:47 GMT"}
    assert ann.links == ["http://www.cs.cornell.edu/~bob", "http://www.cs.cornell.edu:80/",
                         "http://www.cs.cornell.edu/~ann"]
    assert c.labels("http://www.cs.cornell.edu/~ann/") == {"class:student", "univ:cornell"}
    bob = c.get("http://www.cs.cornell.edu/~bob")
    assert (bob.status, bob.headers["Location"]) == (301, "http://www.cs.cornell.edu/~bob/")
    dept = c.get("HTTP://WWW.CS.CORNELL.EDU:80")  # any spelling of the canonical URL
    assert dept.url == "http://www.cs.cornell.edu/"
    assert dept.headers == {"Content-Type": "text/html; charset=iso-8859-1"}
    assert c.doc(dept.url).text == "no headers é"
    alias = c.get("http://www.cs.cornell.edu/~ann")  # directory without its slash
    assert (alias.status, alias.headers["Location"]) == (301, "http://www.cs.cornell.edu/~ann/")
    assert c.get("ftp://ftp.x.edu/pub/").headers["Location"] == "ftp://ftp.x.edu/pub/index.html"
    assert c.get("http://www.cs.cornell.edu/~carl/") is None
    # ann -> ~bob, -> dept (":80" is the same URL) and -> ~ann (alias of ~ann/) are inside;
    # ~bob's Location "~bob/" is not
    assert c.internal_links() == (4, 3, 2)


def test_webkb_real_data():
    c = open_corpus(f"webkb:{shared('webkb')}")
    assert len(c) == 8266  # 8,282 files; 16 name the same URL twice (see docs/real-corpora.md)
    counts = Counter(lab for u in c.iter_urls() for lab in c.labels(u))
    assert {k.split(":")[1] for k in counts if k.startswith("class:")} == {
        "course", "department", "faculty", "other", "project", "staff", "student"}
    assert {k.split(":")[1] for k in counts if k.startswith("univ:")} == {
        "cornell", "texas", "washington", "wisconsin", "misc"}
    statuses = Counter(c.get(u).status for u in c.iter_urls())
    assert statuses[301] > 50 and statuses[200] > 8000
    assert all("Content-Length" not in c.get(u).headers for u in c.seeds())
    total, inside, exact = c.internal_links()
    # the data README reports 16,449 links resolving inside; we count 16,493 with the 1996
    # server aliases (/dir -> /dir/, /dir/ <-> /dir/index.html) and fewer without them
    assert exact < inside and abs(inside - 16_449) / 16_449 < 0.01 and total > inside


# ------------------------------------------------------------------------------------ htmltree
def make_tree(root: Path) -> Path:
    """A help-like tree whose links climb above DIR through <base href> (as Debian's help)."""
    t = root / "help" / "en" / "text"
    write(t / "calc/main.html", '<html><head><base href="../../../"><title>Calc</title></head>'
          '<body><a href="en/text/write/w%201.html#x">w</a> <a href="en/text/calc/">idx</a>'
          '<a href="en/text/calc/missing.html">dead</a><a href="http://ext.test/e">e</a>'
          '<meta http-equiv="refresh" content="0; URL=en/text/write/w%201.html"></body></html>')
    write(t / "calc/index.html", '<html><body><a href="main.html">main</a></body></html>')
    write(t / "write/w 1.html", '<html><body><a href="../calc/main.html">back</a></body></html>')
    write(t / "labels.tsv", "calc/main.html\tspreadsheet,office\n")
    return t


def test_htmltree_mirrors_paths_and_base_href(tmp_path):
    c = open_corpus(f"htmltree:{make_tree(tmp_path)}?labeldepth=1")
    base = "http://htmltree.test/en/text/"
    assert sorted(c.iter_urls()) == [base + "calc/index.html", base + "calc/main.html",
                                     base + "write/w%201.html"]
    page = c.get(base + "calc/main.html")
    assert page.links == [base + "write/w%201.html", base + "calc/", base + "calc/missing.html",
                          "http://ext.test/e"]
    assert c.get(base + "calc/").url == base + "calc/index.html"  # directory index
    assert c.get(base + "calc/missing.html") is None
    assert c.labels(page.url) == {"spreadsheet", "office", "dir:calc"}
    assert c.labels(base + "write/w%201.html") == {"dir:write"}
    assert c.describe()["internal_links"] == 4  # main -> w 1, calc/ ; index -> main ; w 1 -> main
    assert "Calc" == c.doc(page.url).title


def test_htmltree_opaque_does_not_leak(tmp_path):
    c = open_corpus(f"htmltree:{make_tree(tmp_path)}?opaque=1&labeldepth=1&host=Help.Test")
    urls = list(c.iter_urls())
    assert all(re.fullmatch(r"http://help\.test/p/[0-9a-f]{16}\.html", u) for u in urls)
    for url in urls:
        page = c.get(url)
        assert not re.search(rb"calc|write|<base", page.body.replace(b"<title>Calc", b"")), url
        assert set(extract_links(page.body, url)) == set(page.links)
        for link in page.links:  # every internal link leads to a served page
            if link.startswith("http://help.test/p/"):
                assert c.get(link) is not None
    main = next(u for u in urls if c.labels(u) >= {"spreadsheet"})
    assert "http://ext.test/e" in c.get(main).links
    assert sum(link.startswith("http://help.test/x/") for link in c.get(main).links) == 1
    assert c.get("http://help.test/en/text/calc/main.html") is None  # mirrored paths are gone


def test_htmltree_libreoffice_help():
    c = open_corpus(f"htmltree:{lo_help()}?opaque=1&labeldepth=1")
    assert len(c) == 2560  # + zh-CN/noscript.html outside text/ = the package's 2,561 pages
    modules = Counter(lab for u in c.iter_urls() for lab in c.labels(u))
    assert set(modules) == {f"dir:{m}" for m in ("scalc", "swriter", "simpress", "smath",
                            "schart", "sbasic", "sdatabase", "sdraw", "shared")}
    assert sum(modules.values()) == len(c)
    urls = set(c.iter_urls())
    inside = [(u, a) for u in urls for a in c.get(u).links if a in urls]
    non_self = sum(u != a for u, a in inside)
    assert abs(non_self - 10_783) <= 10  # data README: 10,783 (we count 10,787, see docs)
    page = c.get(c.seeds()[0])
    assert "帮助" in c.doc(page.url).title and b"zh-CN/text" not in page.body


# ---------------------------------------------------------------------------------------- warc
def make_warc(path: Path) -> Path:
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        records = [
            ("http://a.test/", "200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                          ("Server", "old/1.0"), ("Content-Length", "999")],
             '<html><title>A</title><a href="/b">b</a><a href="http://c.test/x#f">c</a></html>'),
            ("http://a.test/b", "301 Moved", [("Location", "http://a.test/")], ""),
            ("http://a.test/", "200 OK", [("Content-Type", "text/html")], "second copy"),
        ]
        for url, status, headers, body in records:
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(body.encode()), http_headers=http))
        writer.write_record(writer.create_warc_record("http://a.test/r", "request",
                                                      payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n")))
    return path


def test_warc_serves_recorded_responses(tmp_path):
    path = make_warc(tmp_path / "t.warc.gz")
    write(tmp_path / "t.warc.gz.labels.tsv", "http://a.test/\ttopic,x\n")
    c = open_corpus(f"warc:{path}")
    assert len(c) == 2 and c.hosts() == ["a.test"]
    a = c.get("http://A.TEST:80/")
    assert a.status == 200 and a.body.startswith(b"<html><title>A")  # the first record wins
    assert a.headers == {"Content-Type": "text/html; charset=utf-8", "Server": "old/1.0"}
    assert a.links == ["http://a.test/b", "http://c.test/x"]
    b = c.get("http://a.test/b")
    assert (b.status, b.headers["Location"], b.links) == (301, "http://a.test/", ["http://a.test/"])
    assert c.labels("http://a.test/") == {"topic", "x"} and c.labels("http://a.test/b") == set()
    write(tmp_path / "other.tsv", "http://a.test/b\tmoved\n")
    assert open_corpus(f"warc:{path}?labels={tmp_path / 'other.tsv'}").labels(
        "http://a.test/b") == {"moved"}


# -------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kind", ["wikispeedia", "webkb", "htmltree", "warc"])
def test_missing_path_is_a_one_line_error(tmp_path, kind):
    missing = tmp_path / "nope"
    with pytest.raises(CorpusError, match=re.escape(str(missing))) as err:
        open_corpus(f"{kind}:{missing}")
    assert "\n" not in str(err.value)


def test_wrong_layouts_are_one_line_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    for spec, words in [
        (f"wikispeedia:{tmp_path / 'empty'}", "plaintext_articles"),
        (f"webkb:{tmp_path / 'empty'}", "webkb"),
        (f"htmltree:{tmp_path / 'empty'}", "no .html"),
        (f"htmltree:{make_tree(tmp_path)}?labeldepth=x", "labeldepth"),
        (f"htmltree:{make_tree(tmp_path)}?hots=a", "unknown parameter"),
    ]:
        with pytest.raises(CorpusError, match=words) as err:
            open_corpus(spec)
        assert "\n" not in str(err.value)
    write(tmp_path / "bad.warc", "not a warc\n")
    with pytest.raises(CorpusError, match="bad.warc"):
        open_corpus(f"warc:{tmp_path / 'bad.warc'}")
    tree = make_tree(tmp_path)
    write(tree / "labels.tsv", "nofile.html\tx\n")
    with pytest.raises(CorpusError, match=r"labels.tsv:1"):
        open_corpus(f"htmltree:{tree}")


def test_broken_archive_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPICCRAWL_CACHE", str(tmp_path / "cache"))
    write(tmp_path / "kb" / "webkb-raw-8282pages.tar.xz", b"not an archive")
    with pytest.raises(CorpusError, match="webkb-raw-8282pages.tar.xz"):
        open_corpus(f"webkb:{tmp_path / 'kb'}")
    assert not list((tmp_path / "cache" / "extract").iterdir())  # no half-extracted directory
