"""Tokenisation, charset decoding and HTML extraction."""

from __future__ import annotations

from topiccrawl.scoring.text import (
    Anchor,
    Extracted,
    add_words,
    decode_html,
    detect_language,
    extract,
    has_cjk,
    tokenize,
)

# -- tokenizer -------------------------------------------------------------------------------


def test_chinese_tokens_without_stopwords_and_punctuation():
    assert tokenize("气象部门发布了暴雨预警。") == ["气象部门", "发布", "暴雨", "预警"]


def test_digits_next_to_chinese_are_split_off():
    assert tokenize("第11号台风") == ["第", "11", "号", "台风"]


def test_english_tokens_lowercase_without_stopwords_or_single_letters():
    assert tokenize("The Hurricane's eye-wall, a 2005 storm & U.S. winds") == [
        "hurricane", "eye-wall", "2005", "storm", "winds"]


def test_latin_tokens_are_lower_cased_one_by_one_where_the_text_would_differ():
    # İ lower-cases to two characters and Σ to ς or σ depending on what follows: the token keeps
    # the form it has alone (the same terms whether the text or each token is lower-cased)
    assert tokenize("İzmir ODOS ΟΔΟΣ.Α Straße ÆSIR") == ["i̇zmir", "odos", "οδος", "straße", "æsir"]
    assert tokenize("ΣΟΦΙΑ ΟΔΟΣ " * 30) == ["σοφια", "οδος"] * 30
    assert tokenize("NAÏVE Café " * 30) == ["naïve", "café"] * 30


def test_extracted_text_has_whitespace_runs_as_one_space():
    page = ("<html><head><title>\n A\u3000 title\t</title><meta name=description content=' x \n y '>"
            "</head><body><p>one\u00a0\u00a0two\u2003three</p><a href='/b'> lab\n el </a></body></html>")
    ex = extract(page.encode(), "http://h.example/", "text/html; charset=utf-8")
    assert ex.title == "A title" and ex.description == "x y"
    assert ex.text.startswith("one two three") and ex.anchors[0].text == "lab el"


def test_mixed_text_and_language_detection():
    assert tokenize("GB18030编码的台风新闻") == ["gb18030", "编码", "台风", "新闻"]
    assert detect_language("台风“海葵”在福建登陆 Typhoon") == "zh"
    assert detect_language("Typhoon Haikui made landfall 台风") == "en"
    assert has_cjk("a台") and not has_cjk("abc")


def test_add_words_keeps_topic_words_whole():
    assert tokenize("防洪排涝指挥所") != ["防洪排涝指挥所"]
    add_words(["防洪排涝指挥所", "latin words are ignored"])
    assert tokenize("防洪排涝指挥所") == ["防洪排涝指挥所"]


def test_add_words_never_splits_a_word_jieba_knows_better():
    # a common word registered at 2000, below jieba's own frequency (不是 46,856), split into stop
    # words: words derived from example pages and copied into a topic file were refused
    import jieba

    assert tokenize("台风不是小事，有人受伤") == ["台风", "不是", "小事", "有人", "受伤"]
    own = jieba.get_FREQ("不是")
    add_words(["不是", "有人"])
    assert jieba.get_FREQ("不是") == own and jieba.get_FREQ("有人") >= 2000
    assert tokenize("台风不是小事，有人受伤") == ["台风", "不是", "小事", "有人", "受伤"]


# -- decoding --------------------------------------------------------------------------------

ZH = "<html><head><title>暴雨预警</title></head><body><p>今天夜间有暴雨，请注意防范。</p></body></html>"


def test_gbk_with_correct_header_and_with_meta_only():
    body = ZH.encode("gbk")
    assert decode_html(body, "text/html; charset=GBK") == ZH
    with_meta = ZH.replace("<head>", '<head><meta charset="gb2312">').encode("gbk")
    assert "暴雨预警" in decode_html(with_meta, "text/html")


def test_gbk_body_with_wrong_utf8_header_is_redecoded():
    body = ZH.encode("gbk")
    assert "\ufffd" in body.decode("utf-8", "replace")
    assert decode_html(body, "text/html; charset=utf-8") == ZH
    assert decode_html(body, None) == ZH  # no header, no meta: sniffed


def test_gb18030_four_byte_characters():
    text = "<p>𠀀𡃁 鿿 € 暴雨</p>"
    assert decode_html(text.encode("gb18030"), "text/html; charset=gb18030") == text
    assert decode_html(text.encode("gb18030"), "text/html; charset=gbk") == text


def test_bom_wins_and_latin1_is_not_taken_for_gbk():
    assert decode_html("\ufeff<p>暴雨</p>".encode("utf-8"), "text/html; charset=gbk") == "<p>暴雨</p>"
    assert decode_html("<p>café crème</p>".encode("latin-1"), None) == "<p>café crème</p>"


ZH_T = "<html><head><title>火山噴發與岩漿災害報導</title></head><body><p>岩漿從火山口流出，火山灰瀰漫天空。</p></body></html>"


def test_big5_without_declaration_or_with_a_wrong_header_is_not_taken_for_gbk():
    # GB18030 decodes these Big5 bytes without an error (as mojibake): validity alone cannot choose
    body = ZH_T.encode("big5")
    assert body.decode("gb18030") != ZH_T
    assert decode_html(body, None) == ZH_T
    assert decode_html(body, "text/html; charset=utf-8") == ZH_T
    assert decode_html(ZH.encode("gbk"), None) == ZH  # Simplified GBK still sniffed as GB18030


def test_windows_1252_punctuation_is_not_taken_for_gbk():
    text = "<html><head><title>The volcano’s eruption: Hawai’i’s lava</title></head><body><p>Pele’s lava flows.</p></body></html>"
    body = text.encode("cp1252")
    assert body.decode("gb18030") != text  # 0x92 followed by a letter is a valid GB18030 pair
    assert decode_html(body, None) == text


# -- extraction ------------------------------------------------------------------------------

PAGE = """<!DOCTYPE html><html><head>
<title> 台风“海葵”登陆福建 </title>
<base href="http://news.example.cn/weather/2023/">
<meta name="Keywords" content="台风, 风暴潮，暴雨；海葵">
<meta name="description" content="  第11号台风\n登陆福建 ">
<script>document.write("<a href='/from-script'>x</a>")</script>
<style>p { color: red }</style>
</head><body>
<div class="top-nav"><a href="/">首页</a> <a href="#top">顶部</a> <a href="javascript:void(0)">菜单</a></div>
<article><p>今天凌晨，第11号台风在福建沿海登陆，带来强降雨和<a href="storm.html#part2">风暴潮预警</a>，
气象部门提醒市民注意防范。</p>
<p><a href="mailto:desk@example.cn">来信</a> <a href="http://other.example.org/台风 ">外链</a>
<a href=" //cdn.example.org/img "><img src="a.png" alt="卫星云图"></a></p></article>
<footer>版权所有 新闻网</footer>
</body></html>"""


def test_extract_title_meta_text_and_language():
    ex = extract(PAGE.encode("utf-8"), "http://news.example.cn/index.html", "text/html; charset=utf-8")
    assert ex.title == "台风“海葵”登陆福建"
    assert ex.keywords == ["台风", "风暴潮", "暴雨", "海葵"]
    assert ex.description == "第11号台风 登陆福建"
    assert ex.language == "zh"
    assert "第11号台风在福建沿海登陆" in ex.text and "风暴潮预警" in ex.text
    for boilerplate in ("首页", "版权所有", "from-script", "color"):
        assert boilerplate not in ex.text


def test_extract_anchors_resolved_against_base_href_with_context():
    ex = extract(PAGE.encode("utf-8"), "http://news.example.cn/index.html", "text/html")
    urls = [a.url for a in ex.anchors]
    assert urls == [
        "http://news.example.cn/",                      # nav links are still links
        "http://news.example.cn/weather/2023/storm.html",  # base href, fragment removed
        "http://other.example.org/%E5%8F%B0%E9%A3%8E",   # percent-encoded like Scrapy requests
        "http://cdn.example.org/img",                   # protocol-relative
    ]
    storm = ex.anchors[1]
    assert storm.text == "风暴潮预警"
    # ±10 terms of the text around the link, across element boundaries, anchor text excluded
    before = tokenize("首页 顶部 菜单 今天凌晨，第11号台风在福建沿海登陆，带来强降雨和")[-10:]
    after = tokenize("，气象部门提醒市民注意防范。 来信 外链 卫星云图 版权所有 新闻网")[:10]
    assert len(before) == len(after) == 10
    assert storm.context == " ".join(before + after)
    assert ex.anchors[3].text == "卫星云图"  # image alt text
    short = extract(PAGE.encode("utf-8"), "http://news.example.cn/", "text/html", context_words=2)
    assert short.anchors[1].context == "带来 强降雨 气象部门 提醒"


def test_extract_english_page_separates_blocks():
    body = (b"<html><body><h1>Hurricane Katrina</h1><p>Storm surge</p><p>Levee failures</p>"
            b"<ul class='menu'><li><a href='/wiki/Main'>Main page</a></li></ul></body></html>")
    ex = extract(body, "http://en.wikispeedia.test/wiki/Hurricane_Katrina")
    assert ex.title == "Hurricane Katrina"  # no <title>: first <h1>
    assert ex.text == "Hurricane Katrina Storm surge Levee failures"
    assert ex.language == "en"
    assert ex.anchors == [Anchor("http://en.wikispeedia.test/wiki/Main", "Main page",
                                 "hurricane katrina storm surge levee failures")]


def test_extract_gbk_page_with_wrong_header():
    ex = extract(PAGE.encode("gb18030"), "http://news.example.cn/", "text/html; charset=utf-8")
    assert ex.title == "台风“海葵”登陆福建" and len(ex.anchors) == 4


def test_malformed_html_does_not_crash():
    body = b"<html><body><p>Storm <b>warning<p>flood <a href='/x'>news <div></span></table>"
    ex = extract(body, "http://a.example/dir/page")
    assert "Storm warning" in ex.text and "flood" in ex.text
    assert [a.url for a in ex.anchors] == ["http://a.example/x"]
    assert extract(b"<<<>>> <a href=http://[::1/>bad ipv6</a>", "http://a.example/").anchors == []


def test_empty_and_non_html_bodies_give_empty_extracted():
    assert extract(b"", "http://a.example/") == Extracted()
    assert extract(b"  \n ", "http://a.example/") == Extracted()
    assert extract(b"<!-- nothing -->", "http://a.example/") == Extracted()
    assert extract(b"<p>text</p>", "http://a.example/x.pdf", "application/pdf") == Extracted()
    assert extract(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "http://a.example/a.png") == Extracted()
    assert extract(b"%PDF-1.4\n%\xe2\xe3", "http://a.example/a") == Extracted()


def test_xml_declaration_and_control_characters():
    body = b'<?xml version="1.0" encoding="utf-8"?><html><body><p>Flood\x00 warning</p></body></html>'
    assert extract(body, "http://a.example/", "application/xhtml+xml").text == "Flood warning"


# -- faster paths that must give the same result as the plain ones ------------------------------

_PIECES = ["The", "storm's", "eye-wall", "snake_case", "a", "of", "2005", "U.S.", "Café", "naïve", "–", "x-", "'quoted'",
           "台风", "颱風來襲", "气象部门发布了暴雨预警", "5号台风", "ΟΔΟΣ", "\u00a0", "\n", "__init__", "it’s"]


def _random_text(rng, words: int) -> str:
    return "".join(rng.choice(_PIECES) + rng.choice([" ", " ", "", ", ", "\n", "_"]) for _ in range(words))


def test_latin_fast_path_gives_the_word_branch_tokens():
    import random

    from topiccrawl.scoring.text import _TOKEN_RE, STOPWORDS

    rng = random.Random(3)
    latin = [p for p in _PIECES if not has_cjk(p) and p != "ΟΔΟΣ"]  # Σ takes the token-by-token path
    for _ in range(300):
        text = "".join(rng.choice(latin) + rng.choice([" ", "", "_", "-", "'"]) for _ in range(rng.randrange(1, 40)))
        reference = [t for t in _TOKEN_RE.findall(text.lower()) if len(t) > 1 and t not in STOPWORDS]
        assert tokenize(text) == reference


def test_context_terms_from_part_of_a_long_text_are_the_whole_texts():
    import random

    from topiccrawl.scoring.text import _edge_terms

    rng = random.Random(5)
    for _ in range(300):
        text = _random_text(rng, rng.choice([3, 30, 300]))
        terms = tokenize(text)
        for n in (1, 3, 10):
            assert _edge_terms(text, n, last=False) == terms[:n]
            assert _edge_terms(text, n, last=True) == terms[-n:]


def test_links_with_an_absolute_path_join_as_urljoin_does():
    from urllib.parse import urljoin

    from topiccrawl.scoring.text import _link

    bases = ["http://h.test/a/b.html?q=1#f", "https://H.test:8443/x/", "http://h.test", "HTTP://h.test/;p?x"]
    hrefs = ["/", "/a/../b/./c", "/p;params?q=2#frag", "/..", "/%7Euser/x y", "/a//b", "/\\evil", "/ü/ß"]
    for base in bases:
        origin = (base.split(":")[0].lower(), base.split("/")[2])
        for href in hrefs:
            assert _link(base, href, origin) == _link(base, href) == _link(urljoin(base, "/"), href)
            assert _link(base, href, origin) is not None


def _token_by_token(text: str) -> list[str]:
    """The tokenizer's rule, one ``_TOKEN_RE`` match at a time (the loop the fast paths replace)."""
    from topiccrawl.learning.normalize import to_simplified
    from topiccrawl.scoring.text import _CJK_RE, _TOKEN_RE, STOPWORDS, _cut

    out = []
    for run in _TOKEN_RE.findall(to_simplified(text)):
        if _CJK_RE.match(run):
            out += [t for t in (_cut(run) if len(run) > 1 else (run,)) if t not in STOPWORDS]
        elif len(run.lower()) > 1 and run.lower() not in STOPWORDS:
            out.append(run.lower())
    return out


def test_mixed_chinese_and_latin_text_gives_the_token_by_token_terms():
    import random

    rng = random.Random(7)
    pieces = [*_PIECES, "台风", "颱風", "暴雨", "5号", "İzmir", "ΟΔΟΣ", "的"]
    for _ in range(300):
        text = "".join(rng.choice(pieces) + rng.choice([" ", "", "_", "-", "'", "，"])
                       for _ in range(rng.randrange(1, 40)))
        assert tokenize(text + "台") == _token_by_token(text + "台")  # one CJK character: the mixed path


def test_main_text_is_the_bodys_text_nodes_in_order():
    # read during the anchors' walk: an anchor's own text, not the title or alt its label falls back to
    page = ("<html><head><title>t</title></head><body>lead <b>bold</b>tail"
            "<a href='/a'>link <i>inner</i></a>after<a href='/b' title='only a title'></a>"
            "<area href='/c' alt='map'>x<p>para<a name='n'>named</a>end</p><!-- note -->post"
            "<a href='/d'><img alt='pic'></a>last</body></html>")
    ex = extract(page.encode(), "http://h.example/", "text/html; charset=utf-8")
    assert ex.text == "lead bold tail link inner after x para named end post last"
    assert [a.text for a in ex.anchors] == ["link inner", "only a title", "map", "pic"]


def test_unsqueezed_main_text_gives_the_same_terms_language_and_boilerplate_choice():
    # extract(squeeze=False), the crawl's way: the text keeps the page's whitespace, nothing else changes
    from topiccrawl.scoring.text import document_terms
    plain = ("<html><head><title>t</title></head><body>" + "\n" * 3000 + "<p>台风 登陆\t\t福建</p>" * 40
             + "<p>Typhoon   landfall</p>" + "<a href='/a'> link\n\n text </a> after</body></html>")
    boiler = ("<html><body><nav>menu <a href='/m'>Menu</a></nav><div class='menu-page'>"
              + "<p>the   whole\n\npage</p>" * 30 + "</div><p>x</p></body></html>")
    for page in (plain, boiler):
        squeezed = extract(page.encode(), "http://h.example/", "text/html; charset=utf-8")
        raw = extract(page.encode(), "http://h.example/", "text/html; charset=utf-8", squeeze=False)
        assert " ".join(raw.text.split()) == squeezed.text
        assert document_terms(raw) == document_terms(squeezed)
        assert (raw.title, raw.keywords, raw.description, raw.language, raw.anchors) == (
            squeezed.title, squeezed.keywords, squeezed.description, squeezed.language, squeezed.anchors)
    raw = extract(plain.encode(), "http://h.example/", "text/html; charset=utf-8", squeeze=False)
    assert raw.text.startswith("\n" * 100) and not extract(plain.encode(), "http://h.example/").text.startswith("\n")
    # the language is read from the squeezed text: 3,000 newlines are not a sample of it
    assert raw.language == "zh"
    # the menu class held the page, so its text is the main text in both modes
    assert "the whole page" in extract(boiler.encode(), "http://h.example/", squeeze=False).text


def test_an_english_possessive_is_its_word():
    # "volcano's" must match the topic word "volcano"; other apostrophes and hyphens keep the word whole
    assert tokenize("The volcano's crater and Pele’s lava") == ["volcano", "crater", "pele", "lava"]
    assert tokenize("O'Sullivan, Hawai’i’s rock'n'roll, the storm's-eye wall") == [
        "o'sullivan", "hawai’i", "rock'n'roll", "storm's-eye", "wall"]
    assert tokenize("İstanbul's harbour") == [*tokenize("İstanbul"), "harbour"]  # the token-by-token path too
    assert tokenize("volcano's 火山") == ["volcano", "火山"]  # text with CJK takes the token pattern


def test_links_no_download_can_follow_are_dropped_and_the_others_kept():
    """A host with a space or a stray %, a port that is no number, credentials in the URL: Scrapy
    could only fail them, each with two tracebacks in the log (a live site's typos)."""
    hrefs = ["http://exa mple.com/x", "http://%zz/x", "http://user:pass@example.com/x", "http://example.com:abc/",
             "http://example.com:99999/", "http://[::1]:8080/v6", "http://例子.中国/a", "http://a_b.example.com/u",
             "/a b", "https://example.com:8443/ok"]
    page = "<html><body>" + "".join(f'<a href="{h}">link {i}</a> ' for i, h in enumerate(hrefs)) + "</body></html>"
    ex = extract(page.encode("utf-8"), "http://example.com/index.html", "text/html")
    assert [a.url for a in ex.anchors] == ["http://[::1]:8080/v6", "http://xn--fsqu00a.xn--fiqs8s/a",
                                          "http://a_b.example.com/u", "http://example.com/a%20b",
                                          "https://example.com:8443/ok"]


def test_a_page_whose_text_is_one_node_over_ten_megabytes_keeps_its_text():
    # libxml2's limit on one text node (10 MB) made such a page (under DOWNLOAD_MAXSIZE) parse as empty:
    # no title, no text, relevance 0, and "has no text: not used" as an example page
    from topiccrawl.scoring.text import extract

    body = b"<html><head><title>Typhoon</title></head><body>" + b"typhoon storm " * 760_000 + b"</body></html>"
    assert len(body) > 10_500_000
    page = extract(body, "http://x.test/", "text/html")
    assert page.title == "Typhoon" and page.text.count("typhoon") == 760_000


def test_deeply_nested_pages_of_any_size_are_extracted():
    # libxml2's limits lifted for every page made a page nested 1,000 deep raise RecursionError in the
    # walk (a spider error; an example page of it stalled the crawl); they are lifted only for markup
    # whose text may pass the 10 MB limit, and a walk too deep for that falls back to the limits
    from topiccrawl.scoring.text import extract

    deep = b"<html><body>" + b"<div>typhoon " * 1500 + b"</div>" * 1500 + b"</body></html>"
    assert extract(deep, "http://x.test/", "text/html").text.count("typhoon") >= 200
    huge = (b"<html><head><title>T</title></head><body>" + b"<div>storm " * 1500 + b"typhoon " * 1_300_000
            + b"</div>" * 1500 + b"</body></html>")
    page = extract(huge, "http://x.test/", "text/html")
    assert page.title == "T" and "storm" in page.text


def test_text_nested_deeper_than_libxml2s_default_limit_is_kept():
    # 300 unclosed <font> tags nest the rest of the page 300 deep: libxml2's default depth limit (256)
    # dropped everything after the 256th, so the page's topic text was lost
    from topiccrawl.scoring.text import extract

    body = (b"<html><head><title>T</title></head><body><p>intro</p>" + b"<font size=2>x " * 300
            + b"typhoon landfall <a href='/next'>next storm</a></body></html>")
    page = extract(body, "http://x.test/", "text/html")
    assert "typhoon landfall" in page.text and [a.url for a in page.anchors] == ["http://x.test/next"]
    # nested deeper than the walk follows too: the text within libxml2's default limit, as before
    deepest = b"<html><body><p>intro</p>" + b"<font>x " * 5000 + b"typhoon</body></html>"
    assert extract(deepest, "http://x.test/", "text/html").text.startswith("intro x x")


def test_a_chinese_page_over_ten_megabytes_of_utf8_keeps_its_text():
    # libxml2's limit counts UTF-8 bytes: 4 million CJK characters (12 MB) passed for small by a count of
    # characters, and parsed as empty
    from topiccrawl.scoring.text import extract

    body = ("<html><head><title>台风</title></head><body><p>" + "台" * 4_000_000 + "</p></body></html>").encode()
    page = extract(body, "http://x.test/", "text/html; charset=utf-8")
    assert page.title == "台风" and len(page.text) == 4_000_000
