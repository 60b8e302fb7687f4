"""Bad input is refused before the crawl starts: one line naming the problem, exit status 2, no
traceback, nothing written (``scrapy crawl`` as a user runs it)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPO, bin_path
from topiccrawl.crawl.runtime import check_output_dir
from topiccrawl.crawl.settings import ConfigError
from topiccrawl.weblab.corpus import CorpusError, check_spec
from topiccrawl.weblab.faults import FaultSpecError, parse_faults


def _scrapy_crawl(tmp_path, spider, *opts, out=None):
    out = out or tmp_path / "out"
    cmd = [bin_path("scrapy"), "crawl", spider, *opts, "-s", f"TOPICCRAWL_OUTPUT_DIR={out}"]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120), out


CASES = [
    ("focused", ["-s", "TOPICCRAWL_WEB=generated:zh-disaster?pages=abc"], "parameter pages='abc' must be an integer"),
    ("focused", ["-s", "TOPICCRAWL_WEB=generated:zh-disaster?pages=5"], "pages=5 out of range"),
    ("focused", ["-s", "TOPICCRAWL_WEB_FAULTS=5xx@abc"], "rate of 5xx: 'abc' is not a number"),
    ("focused", ["-s", "TOPICCRAWL_WEB_FAULTS=5xx@0.1,reset@0.1,5xx@0.2"], "'5xx' given twice"),
    ("focused", ["-a", "seeds=www.example.com/news"], "'www.example.com/news' is not an http(s) URL"),
    ("focused", ["-a", "seeds=http://a.example/,javascript:alert(1)"], "'javascript:alert(1)' is not an http(s) URL"),
    # what no download can follow (a port that is no number, credentials in it): a traceback before
    ("focused", ["-a", "seeds=http://a.example:abc/"], "'http://a.example:abc/' is not an http(s) URL a crawl can fetch"),
    ("focused", ["-a", "examples=http://u:p@a.example/"], "'http://u:***@a.example/' is not an http(s) URL a crawl can"),
    ("focused", ["-a", "seeds=truth:5", "-s", "TOPICCRAWL_WEB=live"], "truth:N needs an offline web"),
    ("focused", ["-a", "examples="], "spider argument examples is empty: give URL,URL,…, truth:N or audit:PATH, or leave it out"),
    ("focused", ["-a", "seeds= "], "spider argument seeds is empty: give URL,URL,…, truth:N, or leave it out"),
    # commas and nothing else (two unset variables): the crawl ran without seeds and exited 0
    ("focused", ["-a", "seeds=, "], "spider argument seeds is empty: give URL,URL,…, truth:N, or leave it out"),
    ("dwdbrm", ["-a", "seeds=,"], "spider argument seeds is empty: give URL,URL,…, truth:N, or leave it out"),
    ("focused", ["-a", "examples=,,"], "spider argument examples is empty: give URL,URL,…, truth:N or audit:PATH"),
    ("focused", ["-a", "examples=ftp://x.example/"], "(expected URL,URL,…, truth:N or audit:PATH)"),
    ("focused", ["-s", "TOPICCRAWL_WEB=live"], "focused: no seed pages"),
    ("focused", ["-a", "strategy=learned", "-s", "TOPICCRAWL_LEARNED_ASSOCIATION=on"],
     "setting TOPICCRAWL_LEARNED_ASSOCIATION='on': expected one of auto, off, anchor"),
    ("focused", ["-a", "strategy=learned", "-s", "TOPICCRAWL_LEARNED_EPSILON=2"], "TOPICCRAWL_LEARNED_EPSILON"),
    ("focused", ["-a", "strategy=learned", "-s", "TOPICCRAWL_LEARNED_EPSILN=0.1"],
     "unknown setting TOPICCRAWL_LEARNED_EPSILN; did you mean TOPICCRAWL_LEARNED_EPSILON?"),
    # a switch spelt otherwise than 1/0, true/false, yes/no, on/off: TOPICCRAWL_ENABLED's was a traceback
    ("focused", ["-s", "TOPICCRAWL_ENABLED=maybe"], "setting TOPICCRAWL_ENABLED='maybe': expected 1/0, true/false, yes/no"),
    ("focused", ["-s", "TOPICCRAWL_PLOT_ENABLED=maybe"], "setting TOPICCRAWL_PLOT_ENABLED='maybe': expected 1/0, true/"),
    # values that passed every check: nan (nan < 0 is False) stalled a crawl; a threshold too large for
    # the garbage collector was a traceback; a negative link count kept all links but the worst
    ("focused", ["-s", "TOPICCRAWL_DISPATCH_MAX_WAIT=nan"], "setting TOPICCRAWL_DISPATCH_MAX_WAIT='nan' is not a valid"),
    ("focused", ["-s", "TOPICCRAWL_GC_THRESHOLD=99999999999999999999"], "TOPICCRAWL_GC_THRESHOLD must be >= 0"),
    ("focused", ["-s", "TOPICCRAWL_MAX_LINKS_PER_PAGE=-1"], "TOPICCRAWL_MAX_LINKS_PER_PAGE must be >= 0"),
    ("focused", ["-s", "TOPICCRAWL_CHECKPOINTS=-5,0,100"], "TOPICCRAWL_CHECKPOINTS=-5,0,100: page counts must be >= 1"),
    ("focused", ["-a", "topic_node=Geography.Storms"], "topic node 'Geography.Storms' (-a topic_node, TOPICCRAWL_TOPIC"),
    ("focused", ["-s", "TOPICCRAWL_WEB_PROXY=notaurl"], "TOPICCRAWL_WEB_PROXY='notaurl': expected the URL of a running"),
    # the live web went direct without a word, where a user may have meant a proxy to the internet
    ("focused", ["-s", "TOPICCRAWL_WEB=live", "-s", "TOPICCRAWL_WEB_PROXY=http://127.0.0.1:3128",
                 "-a", "seeds=http://a.example/"], "TOPICCRAWL_WEB=live does not use it (for a proxy to the live web"),
    ("focused", ["-s", "TOPICCRAWL_WEB=live", "-s", "TOPICCRAWL_WEB_FAULTS=5xx@0.5", "-a", "seeds=http://a.example/"],
     "TOPICCRAWL_WEB_FAULTS='5xx@0.5' injects faults into an offline web; TOPICCRAWL_WEB=live does not use it"),
    ("focsued", [], "unknown spider 'focsued'; did you mean focused? (the spiders: backward, dwdbrm, focused,"),  # a traceback
    # the site queue ran under the focused spider (6 pages, exit 0), and a page queue under the site
    # finder (an ERROR line, nothing crawled, exit 0)
    ("focused", ["-a", "strategy=sitefinder"], "the focused spider runs no strategy 'sitefinder'; expected one of: bfs,"),
    ("sitefinder", ["-a", "strategy=bfs"], "the sitefinder spider runs no strategy 'bfs'; expected one of: sitefinder"),
    # "error: : a folder, not a topic file" (the empty path read as the current folder)
    ("focused", ["-a", "topic="], "the topic is empty: give a .toml path or one of: "),
    ("focused", ["-a", "max_pages=-5"], "TOPICCRAWL_MAX_PAGES (-a max_pages) must be >= 0"),  # named the setting only
    # no site could be judged relevant: every verdict "irrelevant", exit 0
    ("sitefinder", ["-s", "TOPICCRAWL_SITES_NUM_EXP_PAGES=2"],
     "setting TOPICCRAWL_SITES_NUM_EXP_PAGES='2' is below TOPICCRAWL_SITES_NUM_REL_PAGES=3: no site could find"),
    # the default search backend on the live web: a DNS failure, retried, for every search call, exit 0
    ("dwdbrm", ["-s", "TOPICCRAWL_WEB=live", "-a", "seeds=http://a.example/"],
     "search backend local is the offline web's engine (search.topiccrawl.test), not on the live web"),
    ("sitefinder", ["-s", "TOPICCRAWL_WEB=live"],
     "search backend local is the offline web's engine (search.topiccrawl.test), not on the live web"),
    ("focused", ["-s", "TOPICCRAWL_NO_SUCH_THING=1"], "unknown setting TOPICCRAWL_NO_SUCH_THING (docs/settings.md"),
    ("dwdbrm", ["-a", "pages=10"], "dwdbrm: no seed pages"),
    ("focused", ["-a", "max_page=50"], "unknown spider argument max_page for focused; expected one of: examples, "),
    ("wl", ["-a", "max_page=50", "-a", "seed=http://a.example/"], "unknown spider arguments max_page, seed for wl"),
    ("dwdbrm", ["-a", "seeds=truth:3", "-a", "page=10"], "unknown spider argument page for dwdbrm; expected one of: "),
    # a real corpus named without its folder, or a folder of another corpus: a traceback (exit 1) before
    ("focused", ["-s", "TOPICCRAWL_WEB=webkb"], "webkb: no directory given (e.g. webkb:/path/to/folder)"),
    ("focused", ["-s", f"TOPICCRAWL_WEB=webkb:{REPO / 'docs'}"], f"webkb: {REPO / 'docs'} has no webkb (nor data/webkb"),
    ("focused", ["-s", "TOPICCRAWL_WEB=wikispeedia:"], "wikispeedia: no directory given"),
    ("focused", ["-s", "TOPICCRAWL_WEB=htmltree"], "htmltree: (no directory given) is not a directory"),
    ("focused", ["-s", "TOPICCRAWL_WEB=warc:"], "warc: (no file given) is not a file"),
    # a topic tree's mistakes (a misspelt scorer, a tree spec or folder that is not one): a traceback before
    ("focused", ["-a", "scorer=tdsc", "-a", "topic_tree=wikispeedia:/nonexistent", "-a", "topic_node=X"],
     "unknown scorer 'tdsc' (expected one of: vsm, tdcs, tdctkw, tdkw)"),
    ("focused", ["-a", "scorer=tdcs", "-a", "topic_tree=wikipedia:/x", "-a", "topic_node=X"], "bad topic tree 'wikipedia:/x'"),
    ("focused", ["-a", "scorer=tdcs", "-a", "topic_tree=wikispeedia:/nonexistent", "-a", "topic_node=X"],
     "wikispeedia: /nonexistent is not a directory"),
]


@pytest.mark.parametrize("spider,opts,message", CASES, ids=[" ".join(c[1]) for c in CASES])
def test_bad_input_is_one_line_exit_2(tmp_path, spider, opts, message):
    proc, out = _scrapy_crawl(tmp_path, spider, *opts)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, last
    assert proc.stderr.strip() == last  # the only line: no Scrapy start-up lines before it
    assert not out.exists()  # refused before the crawl: nothing written, no lab started


def test_every_switch_takes_the_same_spellings():
    # yes/no and on/off were refused by the crawl's own switches (Scrapy's getbool) while the
    # strategies' options and TOPICCRAWL_SEMANTIC_ENABLED took them
    from scrapy.settings import Settings

    from topiccrawl.crawl.settings import TopicCrawlConfig, topiccrawl_enabled

    for on, off in (("yes", "no"), ("ON", "Off"), ("true", "False"), ("1", "0"), (True, False)):
        cfg = TopicCrawlConfig.from_settings(Settings({"TOPICCRAWL_PLOT_ENABLED": off,
                                                       "TOPICCRAWL_AUDIT_ENABLED": on}))
        assert (cfg.plot_enabled, cfg.audit_enabled) == (False, True)
        assert topiccrawl_enabled(Settings({"TOPICCRAWL_ENABLED": on})) is True
        assert topiccrawl_enabled(Settings({"TOPICCRAWL_ENABLED": off})) is False
        cfg = TopicCrawlConfig.from_settings(Settings({"TOPICCRAWL_CLASSIFIER": on, "TOPICCRAWL_SEMANTIC_ENABLED": off}))
        assert (cfg.classifier, cfg.semantic_mode) == ("on", "off")  # `true` was refused by the classifier's
    assert topiccrawl_enabled(Settings()) is True
    # empty keeps the default (the semantic prior's turned it off, the crawl's switches refused it)
    cfg = TopicCrawlConfig.from_settings(Settings({"TOPICCRAWL_PLOT_ENABLED": "", "TOPICCRAWL_SEMANTIC_ENABLED": "",
                                                   "TOPICCRAWL_FEED_FLUSH_ENABLED": ""}))
    assert (cfg.plot_enabled, cfg.semantic_mode, cfg.feed_flush_enabled) == (True, "auto", True)
    assert TopicCrawlConfig.from_settings(Settings({"TOPICCRAWL_CLASSIFIER": ""})).classifier == "auto"
    assert topiccrawl_enabled(Settings({"TOPICCRAWL_ENABLED": ""})) is True


def test_choice_settings_are_read_in_any_case():
    # TOPICCRAWL_STORE=Redis was refused ("expected memory or redis") while strategy options were
    # lower-cased; every setting naming one of a few choices is read alike
    from scrapy.settings import Settings

    from topiccrawl.crawl.addon import scheduler_for
    from topiccrawl.crawl.settings import CHOICE_FIELDS, TopicCrawlConfig

    cfg = TopicCrawlConfig.from_settings(Settings({"TOPICCRAWL_STORE": "Redis", "TOPICCRAWL_DISPATCH": " EAGER",
                                                   "TOPICCRAWL_CLASSIFIER_ESTIMATE": "AUC",
                                                   "TOPICCRAWL_SEMANTIC_ENCODER": "Static"}),
                                         overrides={"strategy": "Learned"})
    assert (cfg.store, cfg.dispatch, cfg.classifier_estimate, cfg.semantic_encoder, cfg.strategy) == (
        "redis", "eager", "auc", "static", "learned")
    for name in CHOICE_FIELDS:  # each a str field whose default is one of its choices, in lower case
        default = getattr(TopicCrawlConfig, name)
        assert isinstance(default, str) and default == default.lower(), name
    assert scheduler_for("redis", object) != scheduler_for("memory", object)


def test_the_store_setting_in_capitals_builds_the_redis_scheduler():
    from scrapy.utils.test import get_crawler

    from topiccrawl.spiders.focused import FocusedSpider

    crawler = get_crawler(FocusedSpider, {"TOPICCRAWL_STORE": "Redis", "ADDONS": {"topiccrawl.crawl.addon.TopicCrawlAddon": 0}})
    assert "redis" in crawler.settings["SCHEDULER"].lower()


def test_unknown_argument_message_lists_the_known_ones(tmp_path):
    proc, _ = _scrapy_crawl(tmp_path, "focused", "-a", "max_page=50")
    known = proc.stderr.strip().splitlines()[-1].split("expected one of: ")[1].split(", ")
    assert {"max_pages", "seeds", "examples", "topic", "strategy"} <= set(known)


def test_unwritable_output_directory_and_feed_are_refused_before_the_crawl(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    proc, _ = _scrapy_crawl(tmp_path, "focused", out=blocker / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"error: output directory {blocker / 'out'} is not writable: Not a directory"
    proc, out = _scrapy_crawl(tmp_path, "focused", "-O", str(blocker / "pages.jsonl"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"feed {blocker / 'pages.jsonl'}" in proc.stderr.strip().splitlines()[-1]
    assert not out.exists() and blocker.read_text(encoding="utf-8") == "not a folder"


def test_a_spider_argument_starting_with_underscore_passes(tmp_path):
    """Scrapyd adds ``-a _job=ID``; the check must let it through (the crawl then fails on the
    unwritable output directory, which shows that the argument check passed)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    proc, _ = _scrapy_crawl(tmp_path, "focused", "-a", "_job=abc123", out=blocker / "o")
    assert proc.returncode == 2 and "output directory" in proc.stderr.strip().splitlines()[-1]


def test_output_dir_check_leaves_no_folder_behind(tmp_path):
    target = tmp_path / "x" / "y" / "z"
    check_output_dir(target)
    assert not (tmp_path / "x").exists()
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not writable"):
        check_output_dir(tmp_path / "f" / "sub")


def test_fault_spec_refuses_a_repeated_kind_or_option():
    for spec in ("5xx@0.1,5xx@0.2", "latency=0.1@0.1,latency=0.2@0.2", "seed=1,5xx@0.1,seed=2", "heal=1,HEAL=2"):
        with pytest.raises(FaultSpecError, match="given twice"):
            parse_faults(spec)
    assert parse_faults("5xx@0.1,reset@0.1,seed=3,heal=1").heal == 1


def test_corpus_spec_check_needs_no_corpus():
    for spec, message in (("generated:zh-disaster?pages=abc", "must be an integer"),
                          ("generated:zh-disaster?seed=1.5", "must be an integer"),
                          ("generated:nope", "unknown generated preset"),
                          ("generated:zh-disaster?page=2000", "unknown parameter")):
        with pytest.raises(CorpusError, match=message):
            check_spec(spec)
    assert check_spec("generated:zh-disaster?pages=50000000").params == {"pages": "50000000"}


def test_url_lists_are_read_once_and_refused_in_one_line():
    from topiccrawl.crawl.errors import ConfigError
    from topiccrawl.crawl.settings import UrlList, parse_url_list

    assert parse_url_list("seeds", " http://a.test/x , https://[::1]:8080/y ") == UrlList(
        ("http://a.test/x", "https://[::1]:8080/y"))
    assert parse_url_list("examples", "truth:5") == UrlList(truth=5)
    assert parse_url_list("seeds", "") == parse_url_list("seeds", None) == UrlList()
    for bad, said in (("truth:0", "whole number"), ("truth:²", "whole number"), ("http://[x", r"not an http\(s\) URL"),
                      ("a.test/x", r"not an http\(s\) URL")):
        with pytest.raises(ConfigError, match=said):
            parse_url_list("seeds", bad)
    with pytest.raises(ConfigError, match="offline web"):
        parse_url_list("examples", "truth:3", offline=False)


def test_a_topic_tree_node_it_lacks_or_its_root_is_one_line(tmp_path):
    rdf = tmp_path / "content.rdf"
    body = "".join(f'<ExternalPage about="http://e{i}.test/"><d:Title>{t}</d:Title><d:Description>{t} pages'
                   f"</d:Description><topic>{n}</topic></ExternalPage>"
                   for i, (n, t) in enumerate([("Top/Science/Weather", "Storm watch"), ("Top/Sports/Tennis", "Tennis")]))
    rdf.write_text('<RDF xmlns:r="http://www.w3.org/TR/RDF/" xmlns:d="http://purl.org/dc/elements/1.0/" '
                   f'xmlns="http://dmoz.org/rdf/">{body}</RDF>', encoding="utf-8")
    for node, message in (("Science.Weather", "no node 'Science.Weather'"), ("Top", "is the root; pick a category below it")):
        proc, out = _scrapy_crawl(tmp_path, "focused", "-a", "scorer=tdcs", "-a", f"topic_tree=dmoz:{rdf}",
                                  "-a", f"topic_node={node}")
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert proc.stderr.strip().startswith("error: ") and message in proc.stderr and "\n" not in proc.stderr.strip()
        assert not out.exists()


def test_a_live_crawl_that_never_searches_needs_no_search_backend(tmp_path):
    """The check of the local backend on the live web refused `forward` (it follows links only) and a
    site finder given sites and no query to send."""
    from conftest import REPO

    rules = (REPO / "data" / "rules" / "bookstore-en.toml").read_text(encoding="utf-8")
    noq = tmp_path / "noq.toml"
    noq.write_text(rules[:rules.index("[queries]")] if "[queries]" in rules else rules, encoding="utf-8")
    for spider, opts in (("forward", ["-a", "seeds=http://127.0.0.1:9/p1.html", "-a", "pages=5"]),
                         ("sitefinder", ["-a", f"rules={noq}", "-a", "sites=http://127.0.0.1:9/",
                                         "-s", "TOPICCRAWL_SITES_SITE_QUERIES=0"])):
        proc, _ = _scrapy_crawl(tmp_path / spider, spider, "-s", "TOPICCRAWL_WEB=live", "-s", "RETRY_TIMES=0", *opts)
        assert "search backend local" not in proc.stderr and proc.returncode != 2, (spider, proc.stderr[-2000:])
