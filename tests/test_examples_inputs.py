"""Example pages a crawl cannot use (docs/learned.md, "Topics from example pages"): one clear line
and no traceback, a crawl that stops when its examples give a topic without words nothing to
score by, an ``examples_dir`` whose unreadable entries are skipped by name, and a JOBDIR resume
that keeps its examples. Real ``scrapy crawl`` runs against a real HTTP server on loopback (live
mode, the loopback host allowed) or the generated offline web."""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import REPO, loopback_server, reply, run_crawl

TEXT = {
    "ex1": "volcano lava magma eruption crater basalt volcano lava",
    "ex2": "volcano magma eruption caldera lava dome volcano crater",
    "ex3": "lava flows from the volcano crater after the eruption magma",
}
ORDINARY = "the city council met on tuesday to discuss the budget for roads and schools"


def _page(title: str, text: str, links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{u}">{u.strip("/")}</a> ' for u in links)
    return f"<html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>".encode()


class _Site(BaseHTTPRequestHandler):
    """/p0 … /p19 ordinary pages linking on, /ex1 … /ex3 volcano pages, /data.json JSON, /blank a page
    without text, /to-ex1 and /to-json redirects to /ex1 and /data.json, else 404."""

    def do_GET(self):
        path = self.path
        ctype, body = "text/html; charset=utf-8", None
        if path.startswith("/p") and path[2:].isdigit() and int(path[2:]) < 20:
            n = int(path[2:])
            body = _page(f"page {n}", ORDINARY + " volcano" * (n % 3), [f"/p{(n + 1) % 20}", f"/p{(n + 7) % 20}"])
        elif path.startswith("/ex") and path[3:] in ("1", "2", "3"):
            body = _page(f"example {path[3:]}", TEXT["ex" + path[3:]], ["/p1"])
        elif path == "/data.json":
            ctype, body = "application/json", json.dumps({"text": TEXT["ex1"]}).encode()
        elif path == "/slow":  # answers when the test releases it (a server that takes its time)
            self.server.asked.set()
            self.server.release.wait(30)
            body = _page("slow", TEXT["ex3"], ["/p1"])
        elif path in ("/to-ex1", "/to-json"):  # a redirect to an example, to JSON
            reply(self, 302, content_type=None, headers={"Location": "/ex1" if path == "/to-ex1" else "/data.json"})
            return
        elif path == "/blank":
            body = b"<html><head></head><body><script>render()</script></body></html>"
        if body is None:
            reply(self, 404, content_type=None)
        else:
            reply(self, 200, body, ctype)

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    with loopback_server(_Site) as server:
        yield f"http://127.0.0.1:{server.server_port}"


LIVE = {"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "127.0.0.1", "TOPICCRAWL_PLOT_ENABLED": "false",
        "RETRY_TIMES": "0", "DOWNLOAD_TIMEOUT": "5", "CONCURRENT_REQUESTS": "1"}


def _topic(tmp_path, site: str, *lines: str):
    path = tmp_path / "volcano.toml"
    path.write_text("\n".join(['name = "volcano"', 'language = "en"', f'seeds = ["{site}/p0"]', *lines]) + "\n",
                    encoding="utf-8")
    return path


def _stats(out):
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))


def test_a_crawl_stopped_before_its_first_page_leaves_an_earlier_crawls_files_as_they_were(tmp_path):
    """Stopped before its first page (no topic words), the crawl writes nothing: an earlier crawl's
    feed, stats, harvest CSV, plot and audit sheet in the same folder stay as they were."""
    web = {"TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1"}
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "max_pages": 20}, settings=web)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    assert {"pages.jsonl", "stats.json", "harvest.csv", "harvest.png", "audit.csv"} <= set(before)
    topic = tmp_path / "nothing.toml"
    topic.write_text('name = "nothing"\nlanguage = "zh"\nexamples = ["http://www.example-missing.cn/nope.html"]\n',
                     encoding="utf-8")
    proc, out = run_crawl(tmp_path, args={"topic": str(topic)}, settings=web)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "Spider closed (no_topic_words)" in proc.stderr
    assert f"stopped before any page (no_topic_words): nothing written to {out}" in proc.stderr
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before


def test_an_examples_dir_without_a_page_is_refused_before_the_crawl(tmp_path, site):
    """A topic whose only examples are an ``examples_dir`` without a usable saved page: one line
    naming the folder and why, before the crawl starts (nothing written)."""
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "notes.txt").write_text("volcano lava", encoding="utf-8")
    topic = _topic(tmp_path, site, 'examples_dir = "saved"')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic)}, settings=LIVE)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: {topic}: no [words] table, and examples_dir {folder} holds no saved page to learn them from "
        "(saved: no *.html, *.htm, *.xhtml file in it)")
    assert not out.exists()
    (folder / "empty.html").write_bytes(b"")  # a page of that name, but empty: named with its reason
    proc, out = run_crawl(tmp_path, args={"topic": str(topic)}, settings=LIVE)
    assert proc.returncode == 2 and "(empty.html: empty)" in proc.stderr.strip().splitlines()[-1], proc.stderr[-3000:]
    assert not out.exists()
    # with example URLs beside the folder the crawl may still learn from those: it starts
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "examples": f"{site}/ex1,{site}/ex2", "max_pages": 3},
                          settings=LIVE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "empty.html not used: empty" in proc.stderr and "topic words derived from 2 example pages" in proc.stderr


def test_examples_that_give_no_words_stop_the_crawl_with_one_line(tmp_path, site):
    topic = _topic(tmp_path, site, f'examples = ["{site}/data.json", "{site}/missing", "{site}/blank"]')
    job = tmp_path / "job"
    proc, out = run_crawl(tmp_path / "a", args={"topic": str(topic), "strategy": "learned"},
                          settings={**LIVE, "JOBDIR": str(job)})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert f"example page {site}/missing could not be fetched: HTTP status 404" in proc.stderr
    assert f"example page {site}/data.json is not an HTML page (Content-Type application/json): not used" in proc.stderr
    assert f"example page {site}/blank has no text: not used" in proc.stderr
    assert "no topic words: no example page could be used (1 failed, 1 not HTML, 1 without text)" in proc.stderr
    assert "Spider closed (no_topic_words)" in proc.stderr
    assert not (out / "stats.json").exists() and not (out / "pages.jsonl").exists()  # nothing written
    # resumed with no examples at all: it stops again, one line, nothing to score by
    proc, _ = run_crawl(tmp_path / "again", args={"topic": str(topic), "strategy": "learned"},
                        settings={**LIVE, "JOBDIR": str(job)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "no topic words" in proc.stderr
    # its JOBDIR, resumed with examples that work, takes them: the crawl goes on from the start
    examples = ",".join(f"{site}/ex{i}" for i in (1, 2, 3))
    proc, out = run_crawl(tmp_path / "b", args={"topic": str(topic), "strategy": "learned", "examples": examples,
                                                "max_pages": 4}, settings={**LIVE, "JOBDIR": str(job)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "topic words derived from 3 example pages" in proc.stderr and "examples given now differ" not in proc.stderr
    stats = _stats(out)
    assert stats["topiccrawl/dp"] == 4
    # the example counts are those of the pages gathered this time, not added to the first attempt's
    assert stats["topiccrawl/examples/fetched"] == 3 and "topiccrawl/examples/failed" not in stats, stats


def test_an_example_that_is_also_the_background_gives_no_words_and_says_why(tmp_path, site):
    topic = _topic(tmp_path, site, f'examples = ["{site}/p0"]')  # the seed: examples and background the same
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned"}, settings=LIVE)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "no topic words: no word sets the 1 example page apart from the background pages" in proc.stderr
    assert "Traceback" not in proc.stderr
    # no background page at all (the seed failed): the examples share no word; it said the background
    topic = _topic(tmp_path, site, f'examples = ["{site}/ex1", "{site}/p3"]')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "seeds": f"{site}/nope"},
                          settings=LIVE)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert ("no topic words: no word is in two of the 2 example pages, and no background page (a seed, a "
            "counter-example) could be used to set them apart from") in proc.stderr, proc.stderr[-3000:]


def test_examples_dir_skips_what_it_cannot_read_by_name(tmp_path, site):
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "good.html").write_bytes(_page("volcano", TEXT["ex1"], []))
    (folder / "sub.html").mkdir()
    os.symlink(folder / "nowhere.html", folder / "broken.html")
    (folder / "binary.htm").write_bytes(bytes(range(256)) * 4)
    (folder / "empty.html").write_bytes(b"  \n")
    (folder / "big.HTML").write_bytes(_page("volcano", TEXT["ex2"] * 200, []))
    (folder / "notes.txt").write_text(TEXT["ex3"], encoding="utf-8")  # not a saved page: not looked at
    topic = _topic(tmp_path, site, 'examples_dir = "saved"')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 5},
                          settings={**LIVE, "DOWNLOAD_MAXSIZE": "5000"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    for name, reason in [("sub.html", "not a file"), ("broken.html", "a broken link"),
                         ("binary.htm", "not HTML (a PDF or binary data)"), ("empty.html", "empty"),
                         ("big.HTML", "bytes, over the 5,000 of DOWNLOAD_MAXSIZE")]:
        line = next((x for x in lines if f"examples_dir: {folder / name} not used: " in x), "")
        assert reason in line, (name, line)
    stats = _stats(out)
    assert stats["topiccrawl/examples/read"] == 1 and stats["topiccrawl/examples/skipped"] == 5
    assert "volcano" in stats["topiccrawl/examples/words"]
    assert stats["topiccrawl/dp"] == 5
    # the topic file named by a relative path, as the docs do (-a topic=typhoons.toml): a saved page's
    # relative path could not be made a file URL, and start() failed with a traceback (exit 0)
    from conftest import REPO

    proc, out = run_crawl(tmp_path / "relative", args={"topic": os.path.relpath(topic, REPO), "strategy": "learned",
                                                       "max_pages": 5}, settings={**LIVE, "DOWNLOAD_MAXSIZE": "5000"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert _stats(out)["topiccrawl/examples/read"] == 1 and _stats(out)["topiccrawl/dp"] == 5


def test_an_examples_dir_without_saved_pages_is_named(tmp_path, site):
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "notes.txt").write_text(TEXT["ex3"], encoding="utf-8")  # not a saved page
    topic = _topic(tmp_path, site, 'beta = 0.3', 'examples_dir = "saved"', "[words]", "volcano = 1.0")
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 3}, settings=LIVE)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = next((x for x in proc.stderr.splitlines() if f"examples_dir: {folder} not used: " in x), "")
    assert "WARNING" in line and "no *.html, *.htm, *.xhtml file in it" in line, line
    stats = _stats(out)
    assert stats["topiccrawl/examples/skipped"] == 1 and "topiccrawl/examples/read" not in stats
    assert stats["topiccrawl/dp"] == 3  # the topic's words go on alone


def test_truth_examples_need_the_topics_labels_and_stand_alone(tmp_path):
    topic = tmp_path / "nolabels.toml"
    topic.write_text('name = "nolabels"\nlanguage = "zh"\n', encoding="utf-8")
    settings = {"TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1"}
    proc, _ = run_crawl(tmp_path / "a", args={"topic": str(topic), "examples": "truth:5"}, settings=settings)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "examples=truth:5: picks truly relevant pages by the topic's evaluation labels, and" in proc.stderr
    proc, _ = run_crawl(tmp_path / "b", args={"topic": "台风灾害", "examples": "truth:5,http://a.example.cn/"},
                        settings=settings)
    assert proc.returncode == 2 and "truth:N stands alone; it cannot be mixed with URLs" in proc.stderr


def test_an_example_that_is_also_a_counter_example_is_refused_before_the_crawl(tmp_path, site):
    """-a examples naming a page the topic file gives as a counter-example: one line, exit 2 (the
    page was used both ways, and the page classifier's refits failed with no word of why)."""
    topic = _topic(tmp_path, site, f'counter_examples = ["{site}/ex2"]')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned",
                                          "examples": f"{site}/ex1,{site}/ex2"}, settings=LIVE)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: -a examples: {site}/ex2 is a counter-example of topic {topic} (counter_examples): "
                      "a page is an example or a counter-example, not both"], proc.stderr[-2000:]
    assert not out.exists()
    # the same page with a fragment is that page: in the topic file, and on the command line
    topic = _topic(tmp_path, site, f'examples = ["{site}/ex1", "{site}/ex3"]', f'counter_examples = ["{site}/ex1#top"]')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned"}, settings=LIVE)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"'{site}/ex1' is in both 'examples' and 'counter_examples'" in proc.stderr, proc.stderr[-3000:]
    topic = _topic(tmp_path, site, f'counter_examples = ["{site}/ex2#part"]')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned",
                                          "examples": f"{site}/ex1,{site}/ex2"}, settings=LIVE)
    assert proc.returncode == 2 and f"{site}/ex2 is a counter-example of topic" in proc.stderr, proc.stderr[-3000:]


def test_one_page_given_as_several_examples_is_used_once_and_each_is_named_as_given(tmp_path, site):
    """Examples that are one page (a fragment, a redirect to another example) were each used, so
    one page counted as several ("derived from 3 example pages" of one), and a word of it met the
    rule of two examples; a redirected example's warning named where it led, not the URL given."""
    topic = _topic(tmp_path, site, "examples = [" + ", ".join(
        f'"{site}/{path}"' for path in ("ex1", "ex1#top", "to-ex1", "ex2", "to-json")) + "]")
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 3},
                          settings=LIVE, feed=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/examples/fetched"] == 2 and stats["topiccrawl/examples/duplicate"] == 1
    assert stats["topiccrawl/classifier/examples"] == 2
    assert "topic words derived from 2 example pages" in proc.stderr
    assert (f"example page {site}/to-ex1 (redirected to {site}/ex1) is the page of example {site}/ex1 as well: "
            "not used twice") in proc.stderr, proc.stderr[-3000:]
    assert f"example page {site}/to-json (redirected to {site}/data.json) is not an HTML page" in proc.stderr
    # on the command line too: the same page with a fragment was fetched twice, "redirected" to itself
    proc, out = run_crawl(tmp_path / "cli", args={"topic": str(topic), "strategy": "learned", "max_pages": 3,
                                                  "examples": f"{site}/ex1,{site}/ex1#top,{site}/ex2"},
                          settings=LIVE, feed=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/examples/fetched"] == 2 and "topiccrawl/examples/duplicate" not in stats
    assert "redirected to" not in proc.stderr
    # an example redirected to a counter-example's page: the one given first keeps it, though the
    # counter-example answers first here (one request at a time; the redirect queues behind it)
    topic = _topic(tmp_path, site, f'examples = ["{site}/to-ex1", "{site}/ex2"]', f'counter_examples = ["{site}/ex1"]')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 3},
                          settings=LIVE, feed=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/classifier/examples"] == 2 and stats["topiccrawl/examples/duplicate"] == 1
    assert (f"counter-example page {site}/ex1 is the page of example {site}/to-ex1 (redirected to {site}/ex1) as "
            "well: not used twice") in proc.stderr, proc.stderr[-3000:]


def test_a_page_saved_in_examples_dir_and_given_by_its_url_is_one_example(tmp_path, site):
    """Pages were told apart by URL only: a page saved in ``examples_dir`` (here the server's own
    bytes, as ``curl -o`` saves it) and also given by its URL counted as two examples, and a word of
    it met the rule of two examples; a page saved twice under two names too."""
    import urllib.request

    folder = tmp_path / "saved"
    folder.mkdir()
    with urllib.request.urlopen(f"{site}/ex1") as answer:
        saved = answer.read()
    (folder / "ex1.html").write_bytes(saved)
    (folder / "ex1-copy.html").write_bytes(saved)
    topic = _topic(tmp_path, site, 'examples_dir = "saved"', f'examples = ["{site}/ex1", "{site}/ex2"]')
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 3},
                          settings=LIVE, feed=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/classifier/examples"] == 2, stats  # ex1 once, ex2
    assert stats["topiccrawl/examples/read"] == 1 and stats["topiccrawl/examples/fetched"] == 1
    assert stats["topiccrawl/examples/duplicate"] == 2
    assert "topic words derived from 2 example pages" in proc.stderr, proc.stderr[-3000:]
    assert (f"examples_dir: {folder / 'ex1.html'} is the page of {folder / 'ex1-copy.html'} as well: not used "
            "twice") in proc.stderr, proc.stderr[-3000:]
    assert (f"example page {site}/ex1 is the page saved as {folder / 'ex1-copy.html'} as well: not used "
            "twice") in proc.stderr, proc.stderr[-3000:]


def test_words_derived_beside_the_topics_own_are_said_to_be_unused(tmp_path, site):
    """A topic with words of its own scores pages by them; the words derived from its examples were
    shown as if the crawl used them ("copy them into a topic file")."""
    topic = _topic(tmp_path, site, 'beta = 0.3', f'examples = ["{site}/ex1", "{site}/ex2"]', "[words]", "volcano = 1.0")
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 3},
                          settings=LIVE, feed=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert ("topic words derived from 2 example pages (not used: the topic has words of its own; copy them into a "
            "topic file to crawl by them)") in proc.stderr, proc.stderr[-3000:]


def test_a_resume_keeps_its_examples_and_says_so_when_given_others(tmp_path, site):
    topic = _topic(tmp_path, site, f'examples = ["{site}/ex1", "{site}/ex2", "{site}/ex3"]')
    job = tmp_path / "job"
    args = {"topic": str(topic), "strategy": "learned"}
    first, out1 = run_crawl(tmp_path / "a", args={**args, "max_pages": 3}, settings={**LIVE, "JOBDIR": str(job)})
    assert first.returncode == 0, first.stderr[-3000:]
    before = _stats(out1)
    assert before["topiccrawl/examples/fetched"] == 3 and before["topiccrawl/dp"] == 3
    same, _ = run_crawl(tmp_path / "same", args={**args, "max_pages": 4}, settings={**LIVE, "JOBDIR": str(job)})
    assert same.returncode == 0 and "resumed" in same.stderr and "examples given now differ" not in same.stderr
    second, out2 = run_crawl(tmp_path / "b", args={**args, "max_pages": 6, "examples": f"{site}/ex1"},
                             settings={**LIVE, "JOBDIR": str(job)})
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed" in second.stderr
    assert "the crawl resumes with the 3 example pages it started with; the examples given now differ" in second.stderr
    assert "topic words derived from 3 example pages (restored from JOBDIR)" in second.stderr
    after = _stats(out2)
    assert after["topiccrawl/dp"] == 6
    assert after["topiccrawl/examples/fetched"] == 3  # carried over, not fetched again
    assert after["topiccrawl/examples/words"] == before["topiccrawl/examples/words"]


def test_a_topic_without_words_resumes_without_its_examples_given_again(tmp_path, site):
    # no words, no examples in the file (-a examples gives them), a counter-example in it
    topic = _topic(tmp_path, site, f'counter_examples = ["{site}/p3"]')
    job = tmp_path / "job"
    examples = ",".join(f"{site}/ex{i}" for i in (1, 2, 3))
    first, out1 = run_crawl(tmp_path / "a", args={"topic": str(topic), "strategy": "learned", "examples": examples,
                                                  "max_pages": 3}, settings={**LIVE, "JOBDIR": str(job)})
    assert first.returncode == 0, first.stderr[-3000:]
    second, out2 = run_crawl(tmp_path / "b", args={"topic": str(topic), "strategy": "learned", "max_pages": 5},
                             settings={**LIVE, "JOBDIR": str(job)})
    assert second.returncode == 0, second.stderr[-3000:]
    assert "topic words derived from 3 example pages (restored from JOBDIR)" in second.stderr
    # no examples given now: nothing "differs" (the resume said so, as if other examples were given)
    assert "the crawl resumes with the 3 example pages it started with" in second.stderr
    assert "examples given now differ" not in second.stderr
    assert _stats(out2)["topiccrawl/dp"] == 5
    assert _stats(out2)["topiccrawl/examples/words"] == _stats(out1)["topiccrawl/examples/words"]
    # without a JOBDIR to resume, the same command is still one line before the crawl
    fresh, _ = run_crawl(tmp_path / "c", args={"topic": str(topic), "strategy": "learned"}, settings=LIVE)
    assert fresh.returncode == 2 and "no [words] table" in fresh.stderr and "Traceback" not in fresh.stderr
    # a JOBDIR whose examples gave no words, resumed without examples: it stops again, one line
    other = tmp_path / "job2"
    stopped, _ = run_crawl(tmp_path / "d", args={"topic": str(topic), "strategy": "learned",
                                                 "examples": f"{site}/data.json"}, settings={**LIVE, "JOBDIR": str(other)})
    assert stopped.returncode == 2, stopped.stderr[-3000:]
    again, _ = run_crawl(tmp_path / "e", args={"topic": str(topic), "strategy": "learned"},
                         settings={**LIVE, "JOBDIR": str(other)})
    assert again.returncode == 2 and "Traceback" not in again.stderr, again.stderr[-3000:]
    assert "no topic words" in again.stderr


def test_a_resume_says_so_when_the_pages_of_its_examples_dir_changed(tmp_path, site):
    folder = tmp_path / "saved"
    folder.mkdir()
    for name in ("ex1", "ex2"):
        (folder / f"{name}.html").write_bytes(_page("volcano", TEXT[name], []))
    topic = _topic(tmp_path, site, 'examples_dir = "saved"')
    job = tmp_path / "job"
    args = {"topic": str(topic), "strategy": "learned"}
    first, out1 = run_crawl(tmp_path / "a", args={**args, "max_pages": 3}, settings={**LIVE, "JOBDIR": str(job)})
    assert first.returncode == 0, first.stderr[-3000:]
    assert _stats(out1)["topiccrawl/examples/read"] == 2
    # the same topic named by a relative path (examples_dir is then another spelling of the folder:
    # the resume warned that the examples differed)
    relative = {**args, "topic": os.path.relpath(topic, REPO), "max_pages": 4}
    same, _ = run_crawl(tmp_path / "same", args=relative, settings={**LIVE, "JOBDIR": str(job)})
    assert same.returncode == 0 and "resumed" in same.stderr and "not used (a new JOBDIR" not in same.stderr
    assert "the crawl resumes with the 2 example pages it started with" in same.stderr, same.stderr[-3000:]
    # the same folder name, other pages in it
    (folder / "ex2.html").write_bytes(_page("volcano", TEXT["ex3"], []))
    changed, out2 = run_crawl(tmp_path / "b", args={**args, "max_pages": 5}, settings={**LIVE, "JOBDIR": str(job)})
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert ("the crawl resumes with the 2 example pages it started with; the pages saved in examples_dir "
            "changed since and are not used") in changed.stderr
    assert _stats(out2)["topiccrawl/dp"] == 5


def test_an_audit_that_labels_no_page_on_topic_says_so_for_a_topic_without_words(tmp_path, site):
    audit = tmp_path / "audit.csv"
    audit.write_text(f"order,url,title,label\n1,{site}/p1,page 1,0\n2,{site}/p2,page 2,0\n", encoding="utf-8")
    topic = _topic(tmp_path, site)
    proc, _ = run_crawl(tmp_path, args={"topic": str(topic), "examples": f"audit:{audit}"}, settings=LIVE)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "labels no page on topic (1), only off topic (0)" in proc.stderr


def test_a_crawl_learning_from_the_audit_in_its_own_folder_resumes_with_the_same_command(tmp_path, site):
    """``-a examples=audit:OUT`` with OUT the crawl's own output folder: its close set the labelled
    audit aside (audit.1.csv) as it wrote its own, and the same command, resumed, stopped with "no
    labelled page"; the folder's newest labelled audit gives the examples now."""
    from topiccrawl.crawl.audit import audit_file

    out = tmp_path / "out"
    out.mkdir()
    (out / "audit.csv").write_text(f"order,url,title,label\n1,{site}/ex1,,1\n2,{site}/p3,,0\n3,{site}/ex2,,1\n",
                                   encoding="utf-8")
    topic = _topic(tmp_path, site)
    args = {"topic": str(topic), "strategy": "learned", "examples": f"audit:{out}"}
    settings = {**LIVE, "JOBDIR": str(tmp_path / "job")}
    first, _ = run_crawl(tmp_path, args={**args, "max_pages": 3}, settings=settings, feed=False)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (out / "audit.1.csv").is_file() and audit_file(out) == out / "audit.1.csv"
    again, _ = run_crawl(tmp_path, args={**args, "max_pages": 5}, settings=settings, feed=False)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr[-3000:]
    assert "resumed" in again.stderr and "examples given now differ" not in again.stderr, again.stderr[-3000:]
    assert f"examples from the audit {out / 'audit.1.csv'}: 2 page(s) labelled on topic, 1 off topic" in again.stderr
    assert "the folder's audit.csv has no label (a later crawl, or this one before a resume, wrote it)" in again.stderr
    assert _stats(out)["topiccrawl/dp"] == 5
    # a file named is read as named: one line, as before
    named, _ = run_crawl(tmp_path / "named", args={**args, "examples": f"audit:{out / 'audit.csv'}"}, settings=LIVE)
    assert named.returncode == 2 and "no labelled page" in named.stderr and "Traceback" not in named.stderr


def _ctrl_c_in_examples(tmp_path, examples: list[str], *lines: str, answer_in_stop: bool):
    """``learned`` with JOBDIR on the test site, the topic's ``examples`` those paths (and ``lines``),
    stopped with Ctrl-C once ``/slow`` is asked for; ``answer_in_stop``: it answers during the stop
    (else it is still held). Returns the finished process (checked: exit 0, no traceback) and its log."""
    import signal
    import subprocess
    import threading

    from conftest import REPO, bin_path

    with loopback_server(_Site, asked=threading.Event(), release=threading.Event()) as server:
        site = f"http://127.0.0.1:{server.server_port}"
        urls = ", ".join(f'"{site}/{path}"' for path in examples)
        topic = _topic(tmp_path, site, f"examples = [{urls}]", *lines)
        cmd = [bin_path("scrapy"), "crawl", "focused", "-a", f"topic={topic}", "-a", "strategy=learned",
               "-a", "max_pages=5", "-s", f"TOPICCRAWL_OUTPUT_DIR={tmp_path / 'out'}",
               "-s", f"JOBDIR={tmp_path / 'job'}", *(x for k, v in LIVE.items() for x in ("-s", f"{k}={v}"))]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TOPICCRAWL_CACHE": str(tmp_path / "cache")})
        try:
            assert server.asked.wait(60), "the slow example was never asked for"
            proc.send_signal(signal.SIGINT)
            if answer_in_stop:
                threading.Timer(1.0, server.release.set).start()  # the fetch in flight answers during the stop
            _, err = proc.communicate(timeout=60)
        finally:
            server.release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    return proc, err


def test_a_crawl_stopped_while_its_examples_are_fetched_says_it_used_none(tmp_path):
    """Ctrl-C while an example page is still on its way: the crawl stops (after the fetch in flight)
    and its log says that it used none of the examples and counted no page, and that a resume fetches
    them again (it said nothing of them); it writes no output file, so an earlier crawl's in its
    folder stay as they were (its stats.json and harvest.csv were written over). The resume fetches
    each example once: the example requests the stop left queued in JOBDIR are not fetched beside
    them (they were, and the examples were learned from twice, or before the last had answered)."""
    import threading

    earlier = tmp_path / "out"
    earlier.mkdir()
    for name in ("stats.json", "harvest.csv", "audit.csv"):
        (earlier / name).write_text(f"an earlier crawl's {name}\n", encoding="utf-8")
    proc, err = _ctrl_c_in_examples(tmp_path, ["ex1", "slow", "ex2"], answer_in_stop=True)
    assert ("the crawl stopped (shutdown) before its example pages were all fetched: it used none of them and counted "
            "no page; a JOBDIR resume fetches them again") in err, err[-3000:]
    assert f"stopped before any page (shutdown): nothing written to {earlier}" in err, err[-3000:]
    assert sorted(p.name for p in earlier.iterdir()) == ["audit.csv", "harvest.csv", "stats.json"]
    assert all(p.read_text(encoding="utf-8") == f"an earlier crawl's {p.name}\n" for p in earlier.iterdir())
    # as the line says: the resume fetches the examples again and crawls
    with loopback_server(_Site, asked=threading.Event(), release=threading.Event()) as server:
        server.release.set()
        site = f"http://127.0.0.1:{server.server_port}"
        topic = _topic(tmp_path, site, f'examples = ["{site}/ex1", "{site}/slow", "{site}/ex2"]')
        proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 5},
                              settings={**LIVE, "JOBDIR": str(tmp_path / "job")}, feed=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/examples/fetched"] == 3 and stats["topiccrawl/examples/background"] == 1
    assert stats["topiccrawl/classifier/examples"] == 3 and stats["topiccrawl/dp"] == 5
    assert "topic words derived from 3 example pages" in proc.stderr
    assert "before its example pages were all fetched" not in proc.stderr


def test_a_crawl_stopped_after_reading_its_examples_dir_gathers_every_example_when_resumed(tmp_path):
    """A topic with words, an ``examples_dir`` and example URLs, stopped (Ctrl-C) while a URL is on
    its way: the saved pages had been read, and the resume took them for the examples it started
    with and never fetched the URLs; it gathers them all again now."""
    import threading

    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "ex2.html").write_bytes(_page("volcano", TEXT["ex2"], []))
    lines = ['examples_dir = "saved"', "beta = 0.3", "[words]", "volcano = 1.0", "lava = 0.8"]
    # the slow example is still held at the stop: it fails then
    proc, err = _ctrl_c_in_examples(tmp_path, ["ex1", "slow"], *lines, answer_in_stop=False)
    assert "before its example pages were all fetched: it used none of them and counted no page" in err
    with loopback_server(_Site, asked=threading.Event(), release=threading.Event()) as server:
        server.release.set()
        site = f"http://127.0.0.1:{server.server_port}"
        topic = _topic(tmp_path, site, f'examples = ["{site}/ex1", "{site}/slow"]', *lines)
        proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "max_pages": 5},
                              settings={**LIVE, "JOBDIR": str(tmp_path / "job")}, feed=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resumes with the 1 example page it started with" not in proc.stderr
    stats = _stats(out)
    assert stats["topiccrawl/examples/read"] == 1 and stats["topiccrawl/examples/fetched"] == 2
    assert stats["topiccrawl/classifier/examples"] == 3 and stats["topiccrawl/dp"] == 5


class _LoggedSite(_Site):
    """The test site, logging each path asked for (``server.paths``)."""

    def do_GET(self):
        self.server.paths.append(self.path)
        super().do_GET()


def test_a_resume_after_a_kill_hands_out_no_queued_page_before_its_examples_verdict(tmp_path):
    """A topic of examples only, killed (kill -9) after counting pages and before any snapshot: the
    resume has its queue (the journal) but not the examples' words, so it gathers the examples
    again. Its queued pages wait for their verdict: they were handed out as soon as the start
    requests' wait ended, and counted with an empty topic (relevance 0) before any word existed."""
    import signal
    import subprocess
    import threading
    import time

    from conftest import REPO, bin_path

    with loopback_server(_LoggedSite, asked=threading.Event(), release=threading.Event(), paths=[]) as server:
        server.release.set()
        site = f"http://127.0.0.1:{server.server_port}"
        topic = _topic(tmp_path, site, f'examples = ["{site}/slow", "{site}/ex1"]')
        feed = tmp_path / "out" / "pages.jsonl"
        settings = {**LIVE, "CONCURRENT_REQUESTS": "4", "TOPICCRAWL_DISPATCH_MAX_WAIT": "0.3",
                    "TOPICCRAWL_CHECKPOINT_INTERVAL": "3600", "JOBDIR": str(tmp_path / "job"),
                    "TOPICCRAWL_OUTPUT_DIR": str(tmp_path / "out"), "TOPICCRAWL_PROGRESS_INTERVAL": "0"}

        def crawl(max_pages: int, delay: str) -> subprocess.Popen:
            cmd = [bin_path("scrapy"), "crawl", "focused", "-a", f"topic={topic}", "-a", "strategy=learned",
                   "-a", f"max_pages={max_pages}", "-O" if max_pages > 10 else "-o", str(feed),
                   *(x for k, v in {**settings, "DOWNLOAD_DELAY": delay}.items() for x in ("-s", f"{k}={v}"))]
            return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "TOPICCRAWL_CACHE": str(tmp_path / "cache")})

        first = crawl(40, "0.2")
        try:
            deadline = time.monotonic() + 90
            while not (feed.is_file() and len(feed.read_text(encoding="utf-8").splitlines()) >= 3):
                assert first.poll() is None and time.monotonic() < deadline, "the first run counted no 3 pages"
                time.sleep(0.05)
            first.send_signal(signal.SIGKILL)
        finally:
            first.kill()
            first.communicate()
        counted = [json.loads(line)["url"] for line in feed.read_text(encoding="utf-8").splitlines()]
        server.asked.clear()
        server.release.clear()
        start = len(server.paths)
        second = crawl(len(counted) + 4, "0")
        try:
            assert server.asked.wait(60), "the resume did not ask for its examples again"
            time.sleep(2.0)  # far beyond TOPICCRAWL_DISPATCH_MAX_WAIT
            held = [p for p in server.paths[start:] if p.startswith("/p") and p != "/p0"]  # /p0: the background
            server.release.set()
            _, err = second.communicate(timeout=120)
        finally:
            server.release.set()
            if second.poll() is None:
                second.kill()
    assert second.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "resumed" in err and "topic words derived from 2 example pages" in err, err[-3000:]
    assert held == [], f"queued pages fetched before the examples' verdict: {held}"
    lines = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines()]
    resumed = [item for item in lines if item["url"] not in counted]
    # each page of the resume that says "volcano" (/pN, N not a multiple of 3) is scored by the derived words
    volcanic = [item for item in resumed if int(item["url"].rsplit("/p", 1)[1]) % 3]
    assert len(resumed) == 4 and volcanic and all(item["relevance"] > 0 for item in volcanic), resumed
