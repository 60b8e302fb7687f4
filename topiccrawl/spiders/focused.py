"""The generic focused spider: ``scrapy crawl focused -a topic=台风灾害 -a strategy=bestfirst``."""

from __future__ import annotations

import os
from collections import Counter

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from w3lib.url import canonicalize_url

from topiccrawl.crawl.feeds import NO_TOPIC_WORDS
from topiccrawl.crawl.meta import EXAMPLE_META, LOCAL_META, META_KEY
from topiccrawl.crawl.runtime import TopicCrawl, html_page
from topiccrawl.learning.examples import example_files, folder_digest
from topiccrawl.scoring.text import document_terms, extract
from topiccrawl.scoring.topic import distinct_pages

#: a stat that is 1 while the example pages' verdict is awaited (a JOBDIR saved then carries it)
EXAMPLES_PENDING = "topiccrawl/examples_pending"


class FocusedSpider(scrapy.Spider):
    """Fetch seeds, score every page (R(P)) and link (R(l)), let the scheduler's strategy choose.

    Spider arguments (each overrides the ``TOPICCRAWL_*`` setting of the same name):
    ``topic`` (a shipped topic name or a .toml path), ``strategy`` (bfs, bestfirst, oracle),
    ``max_pages`` (the DP budget), ``link_threshold``, ``seeds`` (comma-separated URLs, or
    ``truth:N`` on an offline web: N truly relevant pages as the starting points), ``examples``
    (comma-separated URLs of pages about the topic, ``truth:N``, or ``audit:PATH``: the pages a
    labelled audit.csv calls on topic, those it calls off topic as counter-examples; also ``examples`` /
    ``examples_dir`` / ``counter_examples`` in the topic file): fetched before the seeds, they
    train the page classifier and, for a topic without words, give its words. They count as
    fetches (``topiccrawl/examples/*``), not as found pages, and their links are not followed
    (list an example as a seed too to crawl from it).
    """

    name = "focused"
    #: ∂ of eq. 5: the anchor weighs more than the WL paper's 0.3 (chosen on the development topics,
    #: docs/learned.md "The anchor weight ∂ of the focused spider"); ``-s`` still overrides it
    custom_settings = {"TOPICCRAWL_ANCHOR_WEIGHT": 0.7}
    #: which queue the crawl needs; the add-on (topiccrawl.crawl.addon) picks the scheduler by it
    topiccrawl_queue = "frontier"
    #: without -a seeds or topic seeds an offline crawl starts from the web's entry pages; a live
    #: crawl is refused by ``scrapy crawl`` (one line, exit 2)
    topiccrawl_seeds = "web"
    #: the spider scores its pages, so TOPICCRAWL_CLASSIFIER=auto may give a crawl of words the page
    #: classifier to report with (topiccrawl.crawl.runtime.REPORTING_STRATEGIES)
    topiccrawl_page_classifier = True

    def __init__(self, *args, seeds: str | None = None, examples: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.seed_arg = seeds
        self.examples_arg = examples
        self._waiting = 0  # example (and background) requests not answered yet
        self._past_examples = False  # start() went on past the examples' wait
        self._examples_done: Deferred | None = None
        #: fetched example and background pages waiting for the last one: (request index, kind, terms,
        #: the URLs an example links to, the page it led to (canonical URL), its URL as given)
        self._fetched: list[tuple[int, str, list[str], list[str], str, str]] = []
        #: this run's example pages not used, by why (failed, not_html, no_text, skipped, duplicate)
        self._unused: Counter[str] = Counter()
        #: the text of each page saved in examples_dir (:func:`_text_key`) -> its file: a fetched
        #: example with the same text is the same page
        self._saved: dict[str, str] = {}

    @property
    def tc(self) -> TopicCrawl:
        return TopicCrawl.for_crawler(self.crawler)

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._request_dropped, signal=signals.request_dropped)
        return spider

    async def start(self):
        if self._refused():  # a Redis worker refused at open fetches nothing and stops when idle
            return
        for request in self._example_requests():
            yield request
        if self._examples_done is not None:  # the seeds wait for the examples' verdict
            await maybe_deferred_to_future(self._examples_done)
        self._past_examples = True  # a stop before this line (Ctrl-C cancels start()) used none of them
        if self._examples_done is not None:
            self.crawler.stats.set_value(EXAMPLES_PENDING, 0)
        if self._refused():  # Redis was lost while the examples were fetched: the worker stops
            return
        try:
            learned = self._learn_from_examples()
        except Exception as exc:  # a Redis worker's shared association: Redis gone, not yet noticed
            down = getattr(self.crawler.engine.scheduler, "redis_down", None)
            if down is None or not down(exc):
                raise
            return
        if not learned:
            raise CloseSpider(NO_TOPIC_WORDS)  # the engine closes the crawl with this reason
        seeds = self.tc.seed_arg(self.seed_arg)
        if not seeds:
            self.logger.error(
                "topic %r has no seed URLs: add seeds to the topic file or pass -a seeds=URL,URL",
                self.tc.topic.name,
            )
            return
        for url in seeds:
            yield scrapy.Request(url, callback=self.parse, errback=self.seed_failed,
                                 meta={META_KEY: {"score": 1.0, "depth": 0}})

    def seed_failed(self, failure):
        """A seed that could not be fetched (retries spent): one warning saying why, counted in
        ``topiccrawl/seeds_failed``; a request a topiccrawl middleware refused has its own line."""
        value = failure.value
        if isinstance(value, IgnoreRequest) and not isinstance(value, HttpError):
            if "robots.txt" not in str(value):  # refused by a topiccrawl middleware, which said why
                return
            why = "its site's robots.txt disallows it (ROBOTSTXT_OBEY=True)"
        else:
            why = _failure_reason(failure)
        self.crawler.stats.inc_value("topiccrawl/seeds_failed")
        self.logger.warning("seed %s could not be fetched: %s", failure.request.url, why)

    def parse(self, response):
        if not html_page(response):  # a PDF, an image, JSON, a feed: not a page (docs/scoring.md)
            self.crawler.stats.inc_value("topiccrawl/non_html")
            meta = response.meta.get(META_KEY) or {}
            if not meta.get("depth") and not meta.get("parent"):  # a seed: it was dropped without a word
                self.crawler.stats.inc_value("topiccrawl/seeds_not_html")
                self.logger.warning("seed %s is not an HTML page (Content-Type %s): no link of it followed",
                                    response.request.url,
                                    (response.headers.get(b"Content-Type") or b"none").decode("latin-1"))
            return
        if self.tc.budget_spent:  # in flight when the budget ran out: keep it for a resume
            self.crawler.engine.scheduler.requeue(response.request)
            return
        meta = response.meta.get(META_KEY) or {}
        depth = int(meta.get("depth", 0))
        item, links = self.tc.process_page(response, depth, meta.get("parent"), meta.get("anchor", ""))
        # TOPICCRAWL_DISPATCH_PAGE_LINKS = "together" (or "after-seeds", a page beyond the seeds): no queued
        # link leaves until the last of these reaches the scheduler (marked), so a free slot takes the best
        # of all of them (docs/dispatch.md)
        held = bool(links) and self.tc.open_links(response.url, depth)
        # links first, the item last: the item counts the page (and, on Redis, ends its lease), so
        # by then every link of the page is in the frontier — a worker killed right after loses none
        last = len(links) - 1
        for i, link in enumerate(links):
            info = {"score": link.score, "depth": depth + 1, "parent": response.url,
                    "anchor": link.anchor, "potential": link.potential}
            if held and i == last:
                info["ends_page"] = True
            yield scrapy.Request(link.url, callback=self.parse, meta={META_KEY: info})
        yield item

    # -- example pages ------------------------------------------------------------------------
    def _example_requests(self) -> list[scrapy.Request]:
        tc = self.tc
        topic = tc.topic
        examples, counter_examples = tc.example_urls(self.examples_arg)
        sources = {"examples": examples, "counter_examples": counter_examples,
                   "examples_dir": os.path.abspath(topic.examples_dir) if topic.examples_dir else "",
                   "examples_dir_pages": folder_digest(topic.examples_dir) if topic.examples_dir else None}
        stopped = self.crawler.stats.get_value(EXAMPLES_PENDING)  # a JOBDIR saved in the examples' phase
        if tc.focus is not None and tc.focus.n_examples and not tc.metrics.dp and (stopped or not tc.topic.words):
            # a JOBDIR saved when the examples gave a topic without words none (the crawl stopped
            # before its seeds), or before their verdict (examples_dir's pages were read, the
            # URLs not all answered): the examples given now are gathered instead
            tc.forget_examples()
        if tc.focus is not None and tc.focus.n_examples:  # a JOBDIR resume restored them
            old = tc.example_sources or {}  # a key a JOBDIR of an older release lacks is not compared
            if old.get("examples"):  # saved before a page given twice (a fragment) was given once
                old = {**old, "examples": distinct_pages(old["examples"])}
            changed = [k for k, v in sources.items() if k in old and old[k] != v]
            if "examples_dir" in changed and "examples_dir_pages" in old and "examples_dir_pages" not in changed:
                changed.remove("examples_dir")  # the same pages, the folder named from elsewhere (../saved)
            if not self.examples_arg:  # none on the command line now: only what the file gives is compared
                changed = [k for k in changed if k not in ("examples", "counter_examples")
                           or not set(sources[k]) <= set(old[k] or ())]
            if not changed:
                self.logger.info("JOBDIR: the crawl resumes with the %s it started with", _example_pages(tc.focus.n_examples))
            else:
                what = ("the pages saved in examples_dir changed since" if changed == ["examples_dir_pages"]
                        else "the examples given now differ")
                self.logger.warning("JOBDIR: the crawl resumes with the %s it started with; %s and are not used (a "
                                    "new JOBDIR starts a crawl with them)", _example_pages(tc.focus.n_examples), what)
            return []
        if self.crawler.stats.get_value("topiccrawl/resumes"):
            # a resume whose run before stopped before its examples were used gathers them again: the
            # example counts carried from that attempt would count them twice (docs/learned.md)
            stats = self.crawler.stats
            stats.set_stats({k: v for k, v in stats.get_stats().items() if not k.startswith("topiccrawl/examples/")})
        tc.example_sources = sources
        if topic.examples_dir:
            usable, skipped = example_files(topic.examples_dir, self.crawler.settings.getint("DOWNLOAD_MAXSIZE"))
            for path, body in usable:
                terms = document_terms(extract(body, path.resolve().as_uri(), "text/html"))
                key = _text_key(terms)
                if not terms:
                    skipped.append((path, "no text"))
                elif key in self._saved:  # one page saved twice is one example
                    self._not_used("duplicate", "example", "examples_dir: %s is the page of %s as well: not used twice",
                                   path, self._saved[key])
                else:
                    self._saved[key] = str(path)
                    tc.add_example(terms)
                    self.crawler.stats.inc_value("topiccrawl/examples/read")
            for path, reason in skipped:
                self._not_used("skipped", "example", "examples_dir: %s not used: %s", path, reason)
        urls = [(u, False) for u in examples] + [(u, True) for u in counter_examples]
        requests = [scrapy.Request(url, callback=self.parse_example, errback=self.example_failed, dont_filter=True,
                                   meta={META_KEY: {"score": 2.0, "depth": 0}, "counter_example": counter,
                                         LOCAL_META: True, EXAMPLE_META: i})
                    for i, (url, counter) in enumerate(urls)]
        has_examples = any(not counter for _, counter in urls) or (tc.focus is not None and tc.focus.n_examples)
        if has_examples and tc.config.examples_background == "seeds":
            # the seed pages, as ordinary pages of this web, are the background the words are
            # derived against (docs/learned.md); fetched again later as seeds, then they count
            requests += [scrapy.Request(url, callback=self.parse_example, errback=self.example_failed,
                                        dont_filter=True, meta={META_KEY: {"score": 2.0, "depth": 0}, "background": True,
                                                                LOCAL_META: True, EXAMPLE_META: len(urls) + i})
                         for i, url in enumerate(tc.seed_arg(self.seed_arg))]
        if requests:
            self._waiting = len(requests)
            self._examples_done = Deferred()
            self.crawler.stats.set_value(EXAMPLES_PENDING, 1)  # saved with JOBDIR: see above
        return requests

    @property
    def awaiting_examples(self) -> bool:
        """Example pages were asked for and their verdict is not reached: no page can be judged
        yet (the topic's words may come from them), so the schedulers hand out nothing but the
        example requests meanwhile (a JOBDIR resume's restored queue, a Redis crawl's shared one)."""
        return self._examples_done is not None and not self._past_examples

    @property
    def stopped_in_examples(self) -> bool:
        """Example pages were asked for, the crawl has not gone on past them and no page is counted
        (a JOBDIR resume restores pages counted before): stopped now (Ctrl-C, a timeout), it has
        nothing to write (:func:`~topiccrawl.crawl.feeds.writes_nothing`)."""
        return self.awaiting_examples and not self.tc.metrics.dp

    def closed(self, reason: str) -> None:
        """A crawl stopped (Ctrl-C, a timeout) while its example pages were still fetched: say that
        it used none of them, and that a resume fetches them again."""
        if self._examples_done is None or self._past_examples:  # none asked for, or their verdict reached
            return
        resume = "; a JOBDIR resume fetches them again" if self.crawler.settings.get("JOBDIR") else ""
        counted = " and counted no page" if not self.tc.metrics.dp else ""
        self.logger.warning("the crawl stopped (%s) before its example pages were all fetched: it used none of "
                            "them%s%s", reason, counted, resume)

    def parse_example(self, response):
        """An example page (it trains the classifier) or a background page; no item, no links.
        Kept until every example request has settled, then handed over in the order the examples
        were given (:meth:`_learn_from_examples`), not the order they arrived in."""
        kind = _kind(response.meta)
        name = _given(response.request, response.url)
        if html_page(response):
            ex, terms = self.tc.page_terms(response)
            index = response.meta.get(EXAMPLE_META, len(self._fetched))
            if not terms:
                self._not_used("no_text", kind, "%s page %s has no text: not used", kind, name)
            elif kind == "background":
                self._fetched.append((index, kind, terms, [], "", name))
                self.crawler.stats.inc_value("topiccrawl/examples/background")
            else:  # counted as fetched when used (the page it led to may be another example's)
                links = [] if kind == "counter-example" else [a.url for a in ex.anchors]
                self._fetched.append((index, kind, terms, links, canonicalize_url(response.url), name))
        else:
            self._not_used("not_html", kind, "%s page %s is not an HTML page (Content-Type %s): not used", kind,
                           name, (response.headers.get(b"Content-Type") or b"none").decode("latin-1"))
        self._example_settled()
        return []

    def _not_used(self, why: str, kind: str, message: str, *args) -> None:
        """An example, counter-example or background page that is not used: counted
        (``topiccrawl/examples/<why>``, ``…/background_<why>``; this run's examples apart, for the
        stop's message) and named in a warning."""
        self.crawler.stats.inc_value(f"topiccrawl/examples/{'background_' if kind == 'background' else ''}{why}")
        if kind == "example":
            self._unused[why] += 1
        self.logger.warning(message, *args)

    def example_failed(self, failure):
        kind = _kind(failure.request.meta)
        self._not_used("failed", kind, "%s page %s could not be fetched: %s", kind, _given(failure.request),
                       _failure_reason(failure))
        self._example_settled()

    def _refused(self) -> bool:
        """A Redis worker refused by its crawl, or that lost Redis (the scheduler's ``refused``)."""
        return bool(getattr(self.crawler.engine.scheduler, "refused", None))

    def _request_dropped(self, request, spider=None) -> None:
        """An example or background request the scheduler dropped (a Redis worker refused, or that
        lost Redis) never answers: it settles, so the wait for the examples ends."""
        if EXAMPLE_META in request.meta and request.meta.get(LOCAL_META):
            self._example_settled()

    def _example_settled(self) -> None:
        self._waiting -= 1
        if self._waiting <= 0 and self._examples_done is not None and not self._examples_done.called:
            self._examples_done.callback(None)

    def _learn_from_examples(self) -> bool:
        tc = self.tc
        # the order given (topic file, -a examples, the truth:N pick), whatever order the pages
        # arrived in: with a few examples the classifier's folds, and so its estimates, depend on it
        used: dict[str, tuple[str, str]] = {}  # page (canonical URL after redirects) -> (kind, URL as given)
        for _, kind, terms, links, page, name in sorted(self._fetched, key=lambda f: f[0]):
            if kind == "background":
                tc.add_background(terms)
            elif page in used:  # one page is one example: the first given keeps it, whatever answered first
                self._not_used("duplicate", kind, "%s page %s is the page of %s %s as well: not used twice", kind,
                               name, *used[page])
            elif (saved := self._saved.get(_text_key(terms))) is not None:  # saved in examples_dir, given by URL too
                self._not_used("duplicate", kind, "%s page %s is the page saved as %s as well: not used twice", kind,
                               name, saved)
            else:
                used[page] = (kind, name)
                tc.add_example(terms, counter=kind == "counter-example", links=links)
                self.crawler.stats.inc_value("topiccrawl/examples/fetched")
        self._fetched = []
        if tc.example_links:
            self.crawler.stats.set_value("topiccrawl/examples/links", len(tc.example_links))
        if tc.focus is not None and tc.focus.n_examples:
            own = bool(tc.topic.words)  # the topic's words score the pages; derived ones are only shown
            words = tc.learn_words()
            tc.examples_to_frontier()
            if words:
                from topiccrawl.learning.examples import format_words_toml

                toml = format_words_toml(words, beta=tc.topic.beta)  # β: what this crawl judged pages by
                self.crawler.stats.set_value("topiccrawl/examples/words", toml)
                use = ("not used: the topic has words of its own; copy them into a topic file to crawl by them"
                       if own else "copy them into a topic file")
                self.logger.info("topic words derived from %s (%s):\n%s", _example_pages(tc.focus.n_examples), use, toml)
            elif self.crawler.stats.get_value("topiccrawl/resumes") and tc.topic.words:
                restored = self.crawler.stats.get_value("topiccrawl/examples/words")
                if restored:
                    self.logger.info("topic words derived from %s (restored from JOBDIR):\n%s",
                                     _example_pages(tc.focus.n_examples), restored)
        if tc.topic.words or tc.config.scorer != "vsm" or tc.config.topic_tree:
            return True
        # a topic without words of its own, and none derived: nothing to score a page by
        used = tc.focus.n_examples if tc.focus is not None else 0
        if used and not tc.background_pages:  # nothing to tell them apart from: a word of two of them would do
            why = (f"no word is in two of the {used} example pages, and no background page (a seed, a "
                   "counter-example) could be used to set them apart from" if used > 1 else
                   "the example page has no word to use")
        elif used:
            why = (f"no word sets the {used} example page{'s' if used > 1 else ''} apart from the background pages "
                   "(the seeds and counter-examples; with two examples or more a word must be in two of them)")
        else:
            counts = [(self._unused[k], what) for k, what in (("failed", "failed"), ("not_html", "not HTML"),
                                                               ("no_text", "without text"),
                                                               ("skipped", "skipped in examples_dir"))]
            why = "no example page could be used"
            if any(n for n, _ in counts):
                why += " (" + ", ".join(f"{n} {what}" for n, what in counts if n) + ")"
        message = (f"topic {tc.topic.path or tc.topic.name}: no topic words: {why}; give other example pages, "
                   "or a [words] table in the topic file")
        self.logger.error("%s", message)
        self.crawler.stats.set_value("topiccrawl/error", message)
        return False


def _example_pages(n: int) -> str:
    """``"1 example page"``, ``"3 example pages"``."""
    return f"{n} example page{'s' if n != 1 else ''}"


def _text_key(terms: list[str]) -> str:
    """A page told by its text (its terms in order): a page saved in ``examples_dir`` and fetched from its URL."""
    import hashlib

    return hashlib.sha256("\0".join(terms).encode("utf-8", "surrogatepass")).hexdigest()


def _given(request, final: str | None = None) -> str:
    """An example's URL as given, and where its redirects led when they did (``final``: the URL
    that answered, else the last one asked for)."""
    given = (request.meta.get("redirect_urls") or [request.url])[0]
    final = final or request.url
    return given if given == final else f"{given} (redirected to {final})"


def _kind(meta: dict) -> str:
    """What a request of the example phase fetches: ``background``, ``counter-example`` or ``example``."""
    if meta.get("background", False):
        return "background"
    return "counter-example" if meta.get("counter_example", False) else "example"


def _failure_reason(failure) -> str:
    """Why a request failed, in one line: an HttpError's status (not Scrapy's wording), else the
    exception's own message (its type when it has none)."""
    value = failure.value
    response = getattr(value, "response", None)
    if isinstance(value, HttpError) and response is not None:
        return f"HTTP status {response.status}"
    return str(value) or type(value).__name__
