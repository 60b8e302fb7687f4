"""The semantic prior (docs/learned.md, "A semantic prior"): the pure cache and mix on plain data,
the real sentence encoder, and a crawl whose relevant links share no word with the topic."""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest

from conftest import loopback_server, run_crawl
from topiccrawl.learning.distill import bert_token_vectors
from topiccrawl.learning.semantic import (
    DEFAULT_MODEL,
    SemanticError,
    SemanticPrior,
    is_static_model,
    load_encoder,
    model_path,
    static_at_hand,
    static_folder,
    topic_text,
)

RAIL = ["Steam locomotive", "Freight wagon", "Signal box", "Diesel multiple unit", "Level crossing", "Tram depot"]
OTHER = ["Abraham Lincoln", "Baroque painting", "Volcano", "Tennis", "Chocolate cake", "Jazz saxophone"]


class CountingEncoder:
    """Unit vectors of word counts over a fixed vocabulary; records every batch it was given."""

    VOCAB = ("rail", "train", "cake", "war")

    def __init__(self):
        self.batches: list[list[str]] = []

    def __call__(self, texts):
        self.batches.append(list(texts))
        rows = np.array([[t.lower().split().count(w) for w in self.VOCAB] for t in texts], dtype=float) + 1e-9
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_topic_text_is_the_description_then_the_words_by_weight():
    assert topic_text("Railways", {"train": 0.5, "railway": 1.0, "rail": 0.5}) == "Railways: railway, rail, train"
    assert topic_text("", {"a": 1.0}) == "a"
    assert topic_text("Only a description", {}) == "Only a description"


def test_scores_are_cosines_floored_at_zero_and_each_text_is_encoded_once():
    enc = CountingEncoder()
    prior = SemanticPrior(enc, "rail train", weight=0.5)
    first = prior.scores(["rail", "cake", "rail train", "rail"])
    assert first[0] == pytest.approx(2 ** -0.5) and first[2] == pytest.approx(1.0)
    assert first[1] == pytest.approx(0.0, abs=1e-6) and first == [*first[:3], first[0]]
    # one batch for the topic, one for the page's distinct unseen texts; then only the new one
    assert enc.batches[1:] == [["rail", "cake", "rail train"]]
    prior.scores(["cake", "war"])
    assert enc.batches[2:] == [["war"]] and prior.encoded == 4
    assert prior.mix(0.2, 1.0) == pytest.approx(0.6)


def test_title_rank_mixes_the_title_closeness_only_into_pages_with_the_words():
    from topiccrawl.learning.focus import title_rank

    assert title_rank(0.8, 0.2, 0.5) == pytest.approx(0.5)
    assert title_rank(0.8, 0.2, 0.0) == pytest.approx(0.8) and title_rank(0.8, 0.2, 1.0) == pytest.approx(0.2)
    assert title_rank(0.0, 0.9, 0.5) == 0.0  # no topic word: never a pseudo-positive


def test_ranking_by_the_title_needs_the_prior():
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    with pytest.raises(ConfigError, match="RANK=semantic needs the semantic prior"):
        TopicCrawlConfig(classifier_rank="semantic").validate()
    with pytest.raises(ConfigError, match="expected auto, relevance, full, semantic or title"):
        TopicCrawlConfig(classifier_rank="words").validate()
    TopicCrawlConfig(classifier_rank="semantic", semantic_enabled=True).validate()
    TopicCrawlConfig(classifier_rank="auto").validate()  # the default: semantic only with the prior
    TopicCrawlConfig(classifier_rank="title").validate()  # the title's topic words need no encoder


@pytest.mark.parametrize("rank,expected", [("auto", "relevance"), ("title", "title"), ("relevance", "relevance")])
def test_a_chinese_topic_keeps_r_p_by_default(rank, expected):
    """``auto`` without the prior ranks by the title's topic words, except on a Chinese topic, where
    that failed its check (docs/learned.md); the crawl reports the rule as ``classifier/rank``."""
    from scrapy.utils.test import get_crawler

    from topiccrawl.crawl.runtime import TopicCrawl
    from topiccrawl.spiders.focused import FocusedSpider

    crawler = get_crawler(FocusedSpider, {
        "TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1", "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
        "TOPICCRAWL_CLASSIFIER": "on", "TOPICCRAWL_CLASSIFIER_RANK": rank, "TOPICCRAWL_PLOT_ENABLED": False})
    crawler.spider = crawler._create_spider(topic="台风灾害")
    assert TopicCrawl.for_crawler(crawler).learning_stats()["classifier/rank"] == expected


def test_the_cache_forgets_the_least_recently_used_text():
    enc = CountingEncoder()
    prior = SemanticPrior(enc, "rail", weight=0.5, cache_size=2)
    prior.scores(["rail", "cake"])
    prior.scores(["rail"])  # used again: "cake" is now the least recently used
    prior.scores(["war"])  # "cake" forgotten
    assert prior.scores(["rail", "war", "cake"]) == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)  # more than the cache holds
    assert enc.batches[1:] == [["rail", "cake"], ["war"], ["cake"]]


def test_bad_weight_or_empty_topic_is_one_line():
    with pytest.raises(SemanticError, match="TOPICCRAWL_SEMANTIC_WEIGHT=1.5"):
        SemanticPrior(CountingEncoder(), "rail", weight=1.5)
    with pytest.raises(SemanticError, match="description or words"):
        SemanticPrior(CountingEncoder(), "  ", weight=0.5)


def test_the_default_model_is_found_offline_and_ranks_by_meaning():
    assert model_path(DEFAULT_MODEL) != DEFAULT_MODEL  # the installed offline copy's folder
    prior = SemanticPrior(load_encoder(), topic_text("Railways", {"railway": 1.0, "train": 0.8}), weight=0.7)
    rail, other = prior.scores(RAIL), prior.scores(OTHER)
    assert min(rail) > max(other), (rail, other)


@pytest.fixture(scope="module")
def static_cache(tmp_path_factory):
    """A cache folder holding the static model distilled from the default model (distilled once here,
    with numpy: the default model is a BERT encoder)."""
    cache = tmp_path_factory.mktemp("semantic-cache")
    load_encoder(DEFAULT_MODEL, 1, "static", str(cache))
    return cache


def test_the_static_model_is_distilled_once_into_the_cache_and_ranks_by_meaning(static_cache):
    folder = static_folder(DEFAULT_MODEL, static_cache)
    assert is_static_model(str(folder)) and [p.name for p in static_cache.iterdir()] == [folder.name]
    made = (folder / "model.safetensors").stat().st_mtime_ns
    load_encoder.cache_clear()  # a new process: loaded from the cache, not distilled again
    encode = load_encoder(DEFAULT_MODEL, 1, "static", str(static_cache))
    assert (folder / "model.safetensors").stat().st_mtime_ns == made
    assert encode([]).shape == (0, 256)
    vectors = encode(["Steam locomotive", ""])
    assert vectors.shape == (2, 256) and np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 0.0], abs=1e-5)
    prior = SemanticPrior(encode, topic_text("Railways", {"railway": 1.0, "train": 0.8}), weight=0.7)
    rail, other = prior.scores(RAIL), prior.scores(OTHER)
    assert min(rail) > max(other), (rail, other)
    # a folder holding a static model is used as it is
    assert load_encoder(str(folder), 1, "static", "/nonexistent")(["Steam locomotive"]) == pytest.approx(vectors[:1])


def test_the_numpy_forward_pass_is_the_transformers(static_cache):
    torch = pytest.importorskip("torch")  # the test requirements install it; the distillation does not need it
    from safetensors.numpy import load_file
    from transformers import AutoModel

    folder = model_path(DEFAULT_MODEL)
    config = json.loads(open(os.path.join(folder, "config.json"), encoding="utf-8").read())
    ids = np.array([0, 100, 999, 1996, 7592, 12345, 30521], dtype=np.int64)
    mine = bert_token_vectors(load_file(os.path.join(folder, "model.safetensors")), config, ids, 101, 102, batch=3)
    model = AutoModel.from_pretrained(folder).eval()
    with torch.inference_mode():
        x = torch.tensor([[101, int(i), 102] for i in ids])
        theirs = model(input_ids=x, attention_mask=torch.ones_like(x),
                       token_type_ids=torch.zeros_like(x)).last_hidden_state.mean(1).numpy()
    assert np.abs(mine - theirs).max() < 1e-4 < np.abs(theirs).max()


def test_the_static_model_distilled_with_numpy_is_model2vecs(static_cache):
    pytest.importorskip("torch")
    from model2vec import StaticModel
    from model2vec.distill import distill

    ours = StaticModel.from_pretrained(str(static_folder(DEFAULT_MODEL, static_cache)))  # distilled without torch
    theirs = distill(model_name=model_path(DEFAULT_MODEL), pca_dims=256, device="cpu")
    ov, tv = ours.tokenizer.get_vocab(), theirs.tokenizer.get_vocab()
    common = sorted(set(ov) & set(tv))
    assert len(common) == len(tv) > 29_000  # every token of model2vec's vocabulary
    a = ours.embedding[[ov[t] for t in common]].astype(np.float64)
    b = theirs.embedding[[tv[t] for t in common]].astype(np.float64)
    norms_a, norms_b = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    assert ((a * b).sum(1) / (norms_a * norms_b)).min() > 0.999  # the same vector for every token
    assert norms_a / norms_b == pytest.approx(1.0, abs=0.01)  # and the same SIF weight
    texts = RAIL + OTHER + ["Railways: railway, train", "Ünïcödé text", "日本語"]
    ea, eb = ours.encode(texts), theirs.encode(texts)
    assert (ea * eb).sum(1) / (np.linalg.norm(ea, axis=1) * np.linalg.norm(eb, axis=1)) == pytest.approx(1.0, abs=1e-3)


def test_static_encoder_errors_are_one_line(tmp_path, static_cache):
    (tmp_path / "empty").mkdir()  # a folder without a model: model2vec's own distillation fails on it
    with pytest.raises(SemanticError, match=r"TOPICCRAWL_SEMANTIC_MODEL=.* cannot be distilled") as err:
        load_encoder(str(tmp_path / "empty"), 1, "static", str(tmp_path / "cache"))
    assert "\n" not in str(err.value) and not any((tmp_path / "cache").iterdir())  # nothing half-written
    with pytest.raises(SemanticError, match=r"TOPICCRAWL_SEMANTIC_MODEL=.*/missing': no such folder"):
        load_encoder(str(tmp_path / "missing"), 1, "static", str(tmp_path / "cache"))
    broken = static_folder(DEFAULT_MODEL, tmp_path / "broken")
    broken.mkdir(parents=True)
    (broken / "config.json").write_text('{"model_type": "model2vec"}', encoding="utf-8")
    with pytest.raises(SemanticError, match="cannot be loaded.*delete the folder"):
        load_encoder(DEFAULT_MODEL, 1, "static", str(tmp_path / "broken"))
    with pytest.raises(SemanticError, match="TOPICCRAWL_SEMANTIC_ENCODER='bert'"):
        load_encoder(DEFAULT_MODEL, 1, "bert")


def test_a_folder_that_holds_no_model_is_one_line(tmp_path):
    with pytest.raises(SemanticError, match=r"TOPICCRAWL_SEMANTIC_MODEL=.* cannot be loaded") as err:
        load_encoder(str(tmp_path))
    assert "\n" not in str(err.value)


# -- a crawl ----------------------------------------------------------------------------------------

TOPIC = """\
name = "railways"
language = "en"
description = "Railways"
beta = 0.2
[words]
railway = 1.0
train = 0.8
"""


def _send_page(handler: BaseHTTPRequestHandler, title: str, body: str) -> None:
    data = f"<html><head><title>{title}</title></head><body>{body}</body></html>".encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html; charset=utf-8")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _railway_crawl(tmp_path, web, strategy: str, max_pages: int, settings: dict, timeout: int = 300):
    """A crawl of the railways topic from ``web``'s ``/seed`` on loopback, one request at a time."""
    topic = tmp_path / "railways.toml"
    topic.write_text(TOPIC, encoding="utf-8")
    return run_crawl(tmp_path, args={"topic": str(topic), "strategy": strategy, "max_pages": max_pages,
                                     "seeds": f"http://127.0.0.1:{web.server_port}/seed"},
                     settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "127.0.0.1",
                               "TOPICCRAWL_PLOT_ENABLED": "false", "CONCURRENT_REQUESTS": "1", **settings},
                     timeout=timeout)


class _Recorded(BaseHTTPRequestHandler):
    """A loopback web that records the paths asked for (robots.txt: 404); ``page(path)`` gives a
    page's title and body."""

    def do_GET(self):
        self.server.hits.append(self.path)
        if self.path == "/robots.txt":
            self.send_response(404)
            self.end_headers()
            return
        _send_page(self, *self.page(self.path))

    def page(self, path: str) -> tuple[str, str]:
        raise NotImplementedError

    def log_message(self, *args):
        pass


class _Web(_Recorded):
    """``/seed`` links to six pages with unrelated anchors, then six with railway anchors; no anchor
    holds a topic word, so by the words alone every link ties and the first queued goes first."""

    def page(self, path: str) -> tuple[str, str]:
        if path == "/seed":
            anchors = [(f"/o{i}", t) for i, t in enumerate(OTHER)] + [(f"/r{i}", t) for i, t in enumerate(RAIL)]
            return "Index", "<p>index</p>" + "".join(f'<p><a href="{u}">{t}</a></p>' for u, t in anchors)
        return "Index", f"<p>page {path}</p>"


@pytest.mark.parametrize("enabled,encoder,terms", [(True, "transformer", "both"), (True, "static", "both"),
                                                   (False, "transformer", "both"), (True, "transformer", "anchor"),
                                                   (True, "transformer", "holder")])
def test_the_prior_fetches_the_links_close_in_meaning_first(tmp_path, enabled, encoder, terms, static_cache,
                                                            monkeypatch):
    """TOPICCRAWL_SEMANTIC_TERMS=holder leaves the anchors unmixed: every link of the one holder ties."""
    cache = static_cache
    if encoder == "static":  # distilled and loaded without torch, by the command's check as by the crawl
        cache = tmp_path / "cache"  # empty: the crawl distils the model itself
        (tmp_path / "block" / "torch").mkdir(parents=True)
        (tmp_path / "block" / "torch" / "__init__.py").write_text('raise ImportError("torch blocked")\n')
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "block"),
                                                                        os.environ.get("PYTHONPATH")])))
    with loopback_server(_Web, hits=[]) as web:
        proc, out = _railway_crawl(tmp_path, web, "bestfirst", 7, {
            "TOPICCRAWL_SEMANTIC_ENABLED": str(enabled), "TOPICCRAWL_SEMANTIC_ENCODER": encoder,
            "TOPICCRAWL_SEMANTIC_TERMS": terms, "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(cache)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        pages = [p for p in web.hits if p not in ("/robots.txt", "/seed")]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert len(pages) >= 6, pages
    assert {p[:2] for p in pages[:6]} == ({"/r"} if enabled and terms != "holder" else {"/o"}), pages
    # the title ("Index" on every page) and, unless only the holder term takes the prior, 12 anchors
    assert stats.get("topiccrawl/semantic/encoded", 0) == (0 if not enabled else 1 if terms == "holder" else 13)
    assert stats["topiccrawl/semantic/enabled"] == int(enabled)
    if encoder == "static":
        assert is_static_model(str(static_folder(DEFAULT_MODEL, cache)))


class _HolderWeb(_Recorded):
    """``/seed`` links to ``/a`` (title "Volcano") and ``/b`` (title "Steam locomotive") with the anchor
    "railway"; each links to three pages with the anchor "more". By the words alone the six tie and
    ``/a``'s go first; only the holder's title tells ``/b``'s apart."""

    def page(self, path: str) -> tuple[str, str]:
        links, title = [], "Note"
        if path == "/seed":
            links, title = [("/a", "railway"), ("/b", "railway")], "Index"
        elif path in ("/a", "/b"):
            links = [(f"{path}{i}", "more") for i in range(3)]
            title = "Volcano" if path == "/a" else "Steam locomotive"
        return title, "<p>page</p>" + "".join(f'<p><a href="{u}">{t}</a></p>' for u, t in links)


@pytest.mark.parametrize("terms", ["holder", "anchor"])
def test_the_holder_term_takes_the_prior_only_where_asked(tmp_path, terms, static_cache):
    with loopback_server(_HolderWeb, hits=[]) as web:
        proc, _ = _railway_crawl(tmp_path, web, "bestfirst", 9, {
            "TOPICCRAWL_SEMANTIC_ENABLED": "1", "TOPICCRAWL_SEMANTIC_ENCODER": "static",
            "TOPICCRAWL_SEMANTIC_TERMS": terms, "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        pages = [p for p in web.hits if len(p) == 3]  # /a0 ... /b2
    assert len(pages) == 6, web.hits
    a = [i for i, p in enumerate(pages) if p.startswith("/a")]
    b = [i for i, p in enumerate(pages) if p.startswith("/b")]
    if terms == "holder":  # /b's links go before /a's left (one of /a's may be on its way before /b is read)
        assert max(b) < max(a) and sum(i < min(b) for i in a) <= 1, pages
    else:
        assert max(a) < min(b), pages


@pytest.mark.parametrize("holder_pages", ["1", "0"])
def test_the_holder_term_takes_the_prior_for_the_first_pages_only(tmp_path, holder_pages, static_cache):
    """TOPICCRAWL_SEMANTIC_HOLDER_PAGES=1: only the seed's links take the holder title's closeness;
    /a's and /b's (parsed when a page is counted) tie by the words and /a's, queued first, go
    first. At 0 (the whole crawl) /b's "Steam locomotive" lifts its links as without the setting."""
    with loopback_server(_HolderWeb, hits=[]) as web:
        proc, out = _railway_crawl(tmp_path, web, "bestfirst", 9, {
            "TOPICCRAWL_SEMANTIC_ENABLED": "1", "TOPICCRAWL_SEMANTIC_ENCODER": "static",
            "TOPICCRAWL_SEMANTIC_TERMS": "holder", "TOPICCRAWL_SEMANTIC_HOLDER_PAGES": holder_pages,
            "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        pages = [p for p in web.hits if len(p) == 3]  # /a0 ... /b2
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert len(pages) == 6, web.hits
    a = [i for i, p in enumerate(pages) if p.startswith("/a")]
    b = [i for i, p in enumerate(pages) if p.startswith("/b")]
    if holder_pages == "1":
        assert max(a) < min(b), pages
        assert stats["topiccrawl/semantic/holder_pages"] == 1
    else:
        assert max(b) < max(a) and sum(i < min(b) for i in a) <= 1, pages
        assert "topiccrawl/semantic/holder_pages" not in stats


def test_the_holder_pages_setting_is_checked():
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    with pytest.raises(ConfigError, match="TOPICCRAWL_SEMANTIC_HOLDER_PAGES=-1: expected 0"):
        TopicCrawlConfig(semantic_holder_pages=-1).validate()
    TopicCrawlConfig(semantic_holder_pages=60).validate()


def test_the_prior_terms_setting_is_checked():
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    with pytest.raises(ConfigError, match="TOPICCRAWL_SEMANTIC_TERMS='title': expected auto, both, anchor or holder"):
        TopicCrawlConfig(semantic_terms="title").validate()
    for terms in ("auto", "both", "anchor", "holder"):
        TopicCrawlConfig(semantic_terms=terms).validate()


def test_the_anchor_weight_is_the_prior_weight_unless_set_and_is_checked():
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    assert TopicCrawlConfig(semantic_weight=0.6).semantic_anchor_weight_resolved == 0.6
    assert TopicCrawlConfig(semantic_weight=0.6, semantic_anchor_weight=" 0.25").semantic_anchor_weight_resolved == 0.25
    for bad, message in (("x", "expected a number from 0 to 1, or empty"), ("1.5", "must lie in \\[0, 1\\]")):
        with pytest.raises(ConfigError, match=message):
            TopicCrawlConfig(semantic_anchor_weight=bad).validate()


@pytest.mark.parametrize("anchor_weight,first", [("0", "/o"), ("", "/r")])
def test_the_anchor_weight_sets_the_anchor_terms_share_of_the_prior(tmp_path, anchor_weight, first, static_cache):
    """Both terms take the prior; at an anchor weight of 0 the anchors are judged by the words alone
    (every link ties, the first queued goes first), left empty they take W = 0.7."""
    pages, _ = _both_terms_crawl(tmp_path, _Web, 7, static_cache, {"TOPICCRAWL_SEMANTIC_ANCHOR_WEIGHT": anchor_weight})
    assert len(pages) >= 6 and {p[:2] for p in pages[:6]} == {first}, pages


def _both_terms_crawl(tmp_path, handler, max_pages: int, static_cache, settings: dict, skip=("/robots.txt", "/seed"),
                      strategy: str = "bestfirst"):
    """A crawl (best-first unless ``strategy``) of ``handler``'s web with the static prior in both
    terms: the paths asked for (``skip`` aside) and the stats."""
    with loopback_server(handler, hits=[]) as web:
        proc, out = _railway_crawl(tmp_path, web, strategy, max_pages, {
            "TOPICCRAWL_SEMANTIC_ENABLED": "1", "TOPICCRAWL_SEMANTIC_ENCODER": "static",
            "TOPICCRAWL_SEMANTIC_TERMS": "both", "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache), **settings})
        assert proc.returncode == 0, proc.stderr[-3000:]
        pages = [p for p in web.hits if p not in skip]
    return pages, json.loads((out / "stats.json").read_text(encoding="utf-8"))


class _HubWeb(_Recorded):
    """``/seed`` links to ``/hub`` only; ``/hub`` holds the links of :class:`_Web`'s seed."""

    def page(self, path: str) -> tuple[str, str]:
        if path == "/seed":
            return "Index", '<p>index</p><p><a href="/hub">more</a></p>'
        return _Web.page(self, "/seed" if path == "/hub" else path)


def test_the_anchor_pages_setting_is_checked():
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    with pytest.raises(ConfigError, match="TOPICCRAWL_SEMANTIC_ANCHOR_PAGES=-1: expected 0"):
        TopicCrawlConfig(semantic_anchor_pages=-1).validate()
    TopicCrawlConfig(semantic_anchor_pages=250).validate()


@pytest.mark.parametrize("anchor_pages,first,encoded", [("1", "/o", 2), ("2", "/r", 14), ("0", "/r", 14)])
def test_the_anchor_term_takes_the_prior_for_the_first_pages_only(tmp_path, anchor_pages, first, encoded,
                                                                 static_cache):
    """TOPICCRAWL_SEMANTIC_ANCHOR_PAGES=1: the seed's anchor takes the prior, the hub's (the second
    page counted) do not: they tie by the words, and the first queued goes first; at 2, or 0 (the
    whole crawl), the hub's railway anchors go first. Its anchors are encoded only when they take
    the prior (the title "Index", the seed's "more", and the hub's 12)."""
    pages, stats = _both_terms_crawl(tmp_path, _HubWeb, 8, static_cache, {"TOPICCRAWL_SEMANTIC_ANCHOR_PAGES": anchor_pages},
                                     skip=("/robots.txt", "/seed", "/hub"))
    assert len(pages) >= 6 and {p[:2] for p in pages[:6]} == {first}, pages
    assert stats["topiccrawl/semantic/encoded"] == encoded


def test_rescoring_without_the_prior_needs_its_stop():
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    with pytest.raises(ConfigError, match="TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE needs TOPICCRAWL_SEMANTIC_ANCHOR_PAGES"):
        TopicCrawlConfig(semantic_anchor_rescore=True).validate()
    TopicCrawlConfig(semantic_anchor_rescore=True, semantic_anchor_pages=60).validate()


@pytest.mark.parametrize("rescore", [False, True])
def test_the_links_queued_under_the_anchors_prior_lose_it_when_it_stops(tmp_path, rescore, static_cache):
    """A learned crawl, the anchors' prior for the first 2 pages (the seed and the hub): the hub's
    railway anchors are queued above its others. With TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE, when the
    third page is parsed they lose the prior's part and tie with the others by the words, so the
    others (queued first) go first; without it the railway links keep their lead."""
    pages, stats = _both_terms_crawl(tmp_path, _HubWeb, 9, static_cache, {
        "TOPICCRAWL_SEMANTIC_ANCHOR_PAGES": "2", "TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE": str(rescore),
        "TOPICCRAWL_LEARNED_EPSILON": "0", "TOPICCRAWL_LEARNED_ASSOCIATION": "off"},
        skip=("/robots.txt", "/seed", "/hub"), strategy="learned")
    assert len(pages) >= 6 and pages[0].startswith("/r"), pages
    others = sum(p.startswith("/o") for p in pages[:6])
    if rescore:  # one railway link may be on its way before the third page is read
        assert others >= 4, pages
        assert stats["topiccrawl/semantic/anchor_rescored"] >= 4
    else:
        assert others == 0, pages
        assert "topiccrawl/semantic/anchor_rescored" not in stats


def test_a_jobdir_resume_keeps_the_prior_parts_to_take_out(tmp_path, static_cache):
    """Paused after the seed and the hub (both parsed under the anchors' prior), resumed: the first
    page the resumed crawl parses stops the prior and takes its parts, which came back with JOBDIR,
    out of the hub's queued links. (The order after that is not asserted: a resume queues the saved
    links again in their saved order, so the ties by the words no longer fall to the page's order.)"""
    job = tmp_path / "job"
    settings = {"TOPICCRAWL_SEMANTIC_ENABLED": "1", "TOPICCRAWL_SEMANTIC_ENCODER": "static",
                "TOPICCRAWL_SEMANTIC_TERMS": "both", "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache),
                "TOPICCRAWL_SEMANTIC_ANCHOR_PAGES": "2", "TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE": "1",
                "TOPICCRAWL_LEARNED_EPSILON": "0", "JOBDIR": str(job)}
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    with loopback_server(_HubWeb, hits=[]) as web:
        first, out1 = _railway_crawl(tmp_path / "a", web, "learned", 2, settings)
        second, out2 = _railway_crawl(tmp_path / "b", web, "learned", 9, settings)
    for proc in (first, second):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats1 = json.loads((out1 / "stats.json").read_text(encoding="utf-8"))
    stats2 = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert "topiccrawl/semantic/anchor_rescored" not in stats1 and stats1["item_scraped_count"] == 2
    assert stats2["topiccrawl/resumes"] == 1
    assert stats2["topiccrawl/semantic/anchor_rescored"] >= 4  # the hub's railway links at least
    lines = [line for line in second.stderr.splitlines() if "re-scored without it" in line]
    assert len(lines) == 1, lines


# -- TOPICCRAWL_SEMANTIC_ENABLED=auto (the default; docs/learned.md) ---------------------------------

def test_auto_is_for_learned_crawls_of_english_word_topics():
    from topiccrawl.crawl.settings import TopicCrawlConfig, semantic_auto_off

    learned = TopicCrawlConfig(strategy="learned")
    assert semantic_auto_off(learned, has_words=True, has_examples=False, language="en") == ""
    why = [semantic_auto_off(TopicCrawlConfig(strategy="bestfirst"), True, False, "en"),
           semantic_auto_off(learned, False, False, "en"), semantic_auto_off(learned, True, True, "en"),
           semantic_auto_off(learned, True, False, "zh"),
           semantic_auto_off(TopicCrawlConfig(strategy="learned", scorer="tdcs"), True, False, "en")]
    assert why == ["strategy bestfirst (auto is for learned)", "the topic has no words", "the topic has example pages",
                   "the topic's language is 'zh' (the default model is English)", "the topic is a category node"]
    for value, mode in (("auto", "auto"), ("1", "on"), ("True", "on"), ("0", "off"), ("false", "off")):
        assert TopicCrawlConfig(semantic_enabled=value).semantic_mode == mode
    from topiccrawl.crawl.settings import ConfigError

    with pytest.raises(ConfigError, match="TOPICCRAWL_SEMANTIC_ENABLED='maybe': expected auto, 1 or 0"):
        TopicCrawlConfig(semantic_enabled="maybe").validate()


def test_the_static_model_at_hand_is_looked_for_without_the_network(tmp_path, static_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # belt and braces: a lookup must not reach for the network
    assert static_at_hand(DEFAULT_MODEL, static_cache) == ""  # distilled already
    assert static_at_hand(DEFAULT_MODEL, tmp_path / "empty") == ""  # the offline copy's files: distillable
    assert static_at_hand(str(static_folder(DEFAULT_MODEL, static_cache)), tmp_path / "empty") == ""  # a static model
    why = static_at_hand("topiccrawl-tests/no-such-model", tmp_path / "empty")
    assert "neither distilled in the cache nor on this machine" in why and not any((tmp_path / "empty").glob("*"))
    with pytest.raises(SemanticError, match="no-such-model' is not on this machine"):
        load_encoder("topiccrawl-tests/no-such-model", 1, "static", str(tmp_path / "empty"), local_only=True)
    monkeypatch.setitem(sys.modules, "model2vec", None)  # not installed
    assert static_at_hand(DEFAULT_MODEL, static_cache).startswith("model2vec is not installed")


@pytest.mark.parametrize("strategy,model", [("learned", DEFAULT_MODEL), ("bestfirst", DEFAULT_MODEL),
                                            ("learned", "topiccrawl-tests/no-such-model")])
def test_auto_turns_the_static_prior_on_where_it_can(tmp_path, strategy, model, static_cache, monkeypatch):
    """No semantic setting but the model and its cache: a ``learned`` crawl of an English word topic
    takes the static prior in both terms for the first 60 pages, then re-scored out of the anchor
    term (the seed's title and its 12 anchors encoded, the railway anchors fetched first) and left
    out of the holder term; best-first, or a model not on this machine, crawls without it and the
    log says why."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with loopback_server(_Web, hits=[]) as web:
        proc, out = _railway_crawl(tmp_path, web, strategy, 7, {
            "TOPICCRAWL_SEMANTIC_MODEL": model, "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache)})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    on = strategy == "learned" and model == DEFAULT_MODEL
    assert stats["topiccrawl/semantic/enabled"] == int(on) and stats["item_scraped_count"] == 7
    if on:
        assert stats["topiccrawl/semantic/terms"] == "both" and stats["topiccrawl/semantic/encoded"] == 13
        assert stats["topiccrawl/semantic/anchor_pages"] == 60 and stats["topiccrawl/semantic/anchor_rescore"] == 1
        assert stats["topiccrawl/semantic/holder_pages"] == 60
        assert stats["topiccrawl/classifier/rank"] == "semantic"
        assert "Semantic prior: sentence-transformers/all-MiniLM-L6-v2 (static encoder)" in proc.stderr
        assert ("terms of R(l): both (the anchor term for the first 60 pages, then taken out of the links queued "
                "under it) (the holder term for the first 60 pages)") in proc.stderr
        pages = [p for p in web.hits if p not in ("/robots.txt", "/seed")]
        assert {p[:2] for p in pages[:6]} == {"/r"}, pages
    else:
        why = "strategy bestfirst" if strategy == "bestfirst" else "neither distilled in the cache nor on this machine"
        lines = [line for line in proc.stderr.splitlines() if "Semantic prior: off" in line]
        assert len(lines) == 1 and "TOPICCRAWL_SEMANTIC_ENABLED=auto: " in lines[0] and why in lines[0], lines
        assert "topiccrawl/semantic/encoded" not in stats


@pytest.mark.parametrize("started", ["off", "on"])
def test_a_jobdir_resume_keeps_what_auto_resolved_to_at_the_start(tmp_path, started, static_cache, monkeypatch):
    """``auto`` resolves the prior again in a resumed process, whose packages or cache may differ:
    a crawl that started without the prior resumes without it though the model is now at hand; one
    that started with it and resumes where the model is missing goes on without it, in one warning."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    job = tmp_path / "job"
    model = {"on": DEFAULT_MODEL, "off": "topiccrawl-tests/no-such-model"}
    other = "on" if started == "off" else "off"
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    with loopback_server(_Web, hits=[]) as web:
        first, out1 = _railway_crawl(tmp_path / "a", web, "learned", 4, {
            "TOPICCRAWL_SEMANTIC_MODEL": model[started], "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache),
            "JOBDIR": str(job)})
        second, out2 = _railway_crawl(tmp_path / "b", web, "learned", 7, {
            "TOPICCRAWL_SEMANTIC_MODEL": model[other], "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache),
            "JOBDIR": str(job)})
    for proc in (first, second):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats1 = json.loads((out1 / "stats.json").read_text(encoding="utf-8"))
    stats2 = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert stats1["topiccrawl/semantic/enabled"] == int(started == "on") and stats2["item_scraped_count"] == 7
    assert stats2["topiccrawl/semantic/enabled"] == 0  # off either way: as started, or no model here
    assert stats2["topiccrawl/classifier/rank"] == "title"
    assert "topiccrawl/semantic/encoded" not in stats2
    lines = [line for line in second.stderr.splitlines() if "Semantic prior" in line]
    if started == "off":
        assert any("Semantic prior: off, as when this crawl started" in line for line in lines), lines
    else:
        warned = [line for line in lines if " WARNING: " in line]
        assert len(warned) == 1 and "this crawl started with it (static encoder, terms of R(l): both)" in warned[0]


def test_a_jobdir_resume_keeps_the_terms_the_prior_started_with(tmp_path, static_cache, monkeypatch):
    """A crawl whose prior started on the holder term only (as ``auto`` resolved before the fifty-ninth
    session; here set by hand) resumes under ``auto`` on the holder term, not in both terms: the
    resumed process encodes none of the hub's anchors (its railway links do not go first) and says
    so in one line."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    job = tmp_path / "job"
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    common = {"TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache), "JOBDIR": str(job),
              "TOPICCRAWL_LEARNED_EPSILON": "0", "TOPICCRAWL_LEARNED_ASSOCIATION": "off"}
    with loopback_server(_HubWeb, hits=[]) as web:
        first, out1 = _railway_crawl(tmp_path / "a", web, "learned", 1, {**common, "TOPICCRAWL_SEMANTIC_TERMS": "holder"})
        second, out2 = _railway_crawl(tmp_path / "b", web, "learned", 8, common)
        pages = [p for p in web.hits if p not in ("/robots.txt", "/seed", "/hub")]
    for proc in (first, second):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    stats1 = json.loads((out1 / "stats.json").read_text(encoding="utf-8"))
    stats2 = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert stats1["topiccrawl/semantic/terms"] == "holder" and stats2["item_scraped_count"] == 8
    assert stats2["topiccrawl/semantic/terms"] == "holder" and "topiccrawl/semantic/anchor_pages" not in stats2
    # saved without a holder window (as before TOPICCRAWL_SEMANTIC_HOLDER_PAGES): the holder term all through
    assert "topiccrawl/semantic/holder_pages" not in stats2
    assert stats2["topiccrawl/semantic/encoded"] == 1  # the title ("Index" on every page) only
    assert len(pages) >= 6 and {p[:2] for p in pages[:6]} == {"/o"}, pages  # the hub's links tie: page order
    assert "Semantic prior: terms of R(l) as when this crawl started: holder" in second.stderr


@pytest.mark.parametrize("strategy", ["learned", "bestfirst"])
def test_the_anchors_closeness_reaches_the_link_model_of_a_learning_crawl_only(tmp_path, strategy, static_cache):
    """TOPICCRAWL_SEMANTIC_LINK_FEATURE with the prior on the holder term: a ``learned`` crawl encodes
    the 12 anchors too and hands each new link its closeness; best-first has no link model to take it."""
    with loopback_server(_Web, hits=[]) as web:
        proc, out = _railway_crawl(tmp_path, web, strategy, 7, {
            "TOPICCRAWL_SEMANTIC_ENABLED": "1", "TOPICCRAWL_SEMANTIC_ENCODER": "static",
            "TOPICCRAWL_SEMANTIC_TERMS": "holder", "TOPICCRAWL_SEMANTIC_LINK_FEATURE": "1",
            "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    learns = strategy == "learned"
    assert stats["topiccrawl/semantic/encoded"] == (13 if learns else 1)
    assert stats.get("topiccrawl/semantic/closeness_links", 0) == (12 if learns else 0)


def test_a_crawl_with_a_model_that_cannot_load_stops_with_one_line(tmp_path):
    proc, _ = run_crawl(tmp_path, args={"topic": "台风灾害", "max_pages": 5},
                        settings={"TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1",
                                  "TOPICCRAWL_SEMANTIC_ENABLED": "1", "TOPICCRAWL_SEMANTIC_MODEL": str(tmp_path)},
                        timeout=120)
    assert proc.returncode != 0
    assert "TOPICCRAWL_SEMANTIC_MODEL=" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]


# -- the title's closeness ranks the pseudo-positives (docs/learned.md) ------------------------------

DECOYS = ["Abraham Lincoln", "Baroque painting", "Volcano", "Tennis", "Chocolate cake", "Jazz saxophone",
          "Opera house", "Football club"]


class _PseudoWeb(BaseHTTPRequestHandler):
    """``/seed`` links to 8 decoys (titles far from railways, text holding the topic's words in exactly
    their weights' ratio: R(P) = 1), 8 railway pages (railway titles, R(P) a little lower) and 20
    pages without the topic's words; ``/z0`` (the last of those) links to two more of each kind,
    fetched last by a breadth-first crawl."""

    def do_GET(self):
        if self.path == "/robots.txt":
            self.send_response(404)
            self.end_headers()
            return
        path = self.path
        links: list[str] = []
        if path == "/seed":
            title, text = "Index", "index"
            links = [u for i in range(8) for u in (f"/d{i}", f"/r{i}")] + [f"/z{i}" for i in range(19, -1, -1)]
        elif path.startswith("/d"):
            title = DECOYS[int(path[2:]) % len(DECOYS)]
            text = "railway " * 5 + "train " * 4 + "president election senate congress ballot"
        elif path.startswith("/r"):
            title = RAIL[int(path[2:]) % len(RAIL)] + self.server.rail_suffix
            text = "railway railway train locomotive boiler wagon signal coupling"
        else:
            title, text = f"Note {path[2:]}", f"garden river bakery poem {path[2:]}"
            if path == "/z0":
                links = ["/d8", "/r8", "/d9", "/r9"]
        _send_page(self, title, f"<p>{text}</p>" + "".join(f'<p><a href="{u}">next</a></p>' for u in links))

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("rank,prior", [("relevance", True), ("semantic", True), ("auto", True), ("title", False),
                                        ("auto", False)])
def test_the_title_closeness_picks_the_pseudo_positives(tmp_path, rank, prior, static_cache):
    """The classifier's first fit (page 30) learns from the top 20 % of pages by R(P) (the decoys)
    or, with TOPICCRAWL_CLASSIFIER_RANK=semantic (the default ``auto`` with the prior on), by R(P)
    and the title's closeness (the railway pages); the four pages fetched after it get their P
    from that fit. ``title`` (``auto`` without the prior) needs a topic word in the title: the
    railway pages' titles end in "(railway)" for it (and only for it: the others rank by meaning,
    not by a shared word)."""
    by_words = rank == "title" or (rank == "auto" and not prior)
    with loopback_server(_PseudoWeb, rail_suffix=" (railway)" if by_words else "") as web:
        proc, out = _railway_crawl(tmp_path, web, "bfs", 41, {
            "TOPICCRAWL_CLASSIFIER": "on", "TOPICCRAWL_CLASSIFIER_SHARE": "0.2", "TOPICCRAWL_CLASSIFIER_RANK": rank,
            "TOPICCRAWL_SEMANTIC_ENABLED": str(prior), "TOPICCRAWL_SEMANTIC_ENCODER": "static",
            "TOPICCRAWL_SEMANTIC_CACHE_DIR": str(static_cache)}, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert len(items) == 41 and stats["topiccrawl/classifier/refits"] == 1
    assert stats["topiccrawl/classifier/rank"] == (rank if rank != "auto" else "semantic" if prior else "title")
    late = {it["url"].rsplit("/", 1)[1]: it["probability"] for it in items[-4:]}
    assert set(late) == {"d8", "d9", "r8", "r9"}, late
    rails, decoys = (late["r8"], late["r9"]), (late["d8"], late["d9"])
    if rank != "relevance":
        assert min(rails) > max(decoys), late
    else:
        assert min(decoys) > max(rails), late
