"""Shared fixtures: a clean working directory per crawl and the third-party data folder."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


#: the environment variable naming the folder of third-party corpora (wikispeedia/, webkb/,
#: dmoz-samples/; docs/real-corpora.md); .ci/run sets it when CI has that folder
DATA_DIR_ENV = "TOPICCRAWL_DATA_DIR"


def pytest_configure(config):
    """The semantic prior's static models live in the tests' own cache (``.pytest_cache``), never the
    user's: ``TOPICCRAWL_SEMANTIC_ENABLED=auto`` (the default) turns the prior on for ``learned``
    crawls of English topics when the model is at hand, so the suite must not depend on whether the
    user's ``~/.cache`` holds it (docs/learned.md)."""
    os.environ["XDG_CACHE_HOME"] = str(config.cache.mkdir("xdg-cache"))


@pytest.fixture(scope="session", autouse=True)
def static_model_distilled():
    """The default model's static model, distilled into the tests' cache before any crawl (once per
    checkout, about a minute): a crawl under ``auto`` would otherwise distil it inside a test."""
    from topiccrawl.learning.semantic import DEFAULT_MODEL, load_encoder, static_at_hand

    if not static_at_hand(DEFAULT_MODEL):  # the test requirements install what it needs
        load_encoder(DEFAULT_MODEL, 1, "static", "", local_only=True)


def shared_data_dir() -> Path | None:
    """$TOPICCRAWL_DATA_DIR when it names a folder; None when unset or absent."""
    path = os.environ.get(DATA_DIR_ENV)
    return Path(path) if path and Path(path).is_dir() else None


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip(f"third-party data folder not given: set {DATA_DIR_ENV} to it (docs/real-corpora.md)")
    return path


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QuietHandler(BaseHTTPRequestHandler):
    """A ``BaseHTTPRequestHandler`` that logs nothing (a test server's requests are its own)."""

    def log_message(self, *args):
        pass


def reply(handler, status: int, body: bytes = b"", content_type: str | None = "text/html; charset=utf-8",
          headers: dict[str, str] | None = None) -> None:
    """Answer a ``BaseHTTPRequestHandler`` request: ``status``, Content-Type (none when None),
    the other ``headers``, Content-Length and ``body``."""
    handler.send_response(status)
    if content_type is not None:
        handler.send_header("Content-Type", content_type)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def loopback_server(handler, **attrs):
    """A real ``ThreadingHTTPServer`` of ``handler`` on a free loopback port, serving in a thread;
    ``attrs`` become attributes of the server (state the handler reads as ``self.server.x``)."""
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    for name, value in attrs.items():
        setattr(server, name, value)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def bin_path(name: str) -> str:
    """A console script of the running interpreter's environment (scrapy, scrapyd, ...)."""
    import sys

    return str(Path(sys.executable).parent / name)


def run_crawl(tmp_path: Path, spider: str = "focused", *, args: dict | None = None,
              settings: dict | None = None, timeout: float = 300, feed: bool = True):
    """Run ``scrapy crawl`` as a user would (a subprocess in the project), return (proc, out_dir)."""
    import subprocess

    out = tmp_path / "out"
    cmd = [bin_path("scrapy"), "crawl", spider]
    for k, v in (args or {}).items():
        cmd += ["-a", f"{k}={v}"]
    merged = {"TOPICCRAWL_OUTPUT_DIR": str(out), "TOPICCRAWL_PROGRESS_INTERVAL": "0", **(settings or {})}
    for k, v in merged.items():
        cmd += ["-s", f"{k}={v}"]
    if feed:
        cmd += ["-O", str(out / "pages.jsonl")]
    env = {**os.environ, "TOPICCRAWL_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    return proc, out


def memory_scheduler(strategy: str = "bestfirst", topic: str = "台风灾害", **settings):
    """An opened memory ``TopicScheduler`` of a focused spider (by default topic 台风灾害, a generated
    web), with no engine: tests drive ``enqueue_request`` and ``next_request`` themselves."""
    from scrapy.utils.test import get_crawler

    from topiccrawl.crawl.scheduler import TopicScheduler
    from topiccrawl.spiders.focused import FocusedSpider

    crawler = get_crawler(FocusedSpider, {
        "TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1", "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
        "TOPICCRAWL_STRATEGY": strategy, "TOPICCRAWL_PLOT_ENABLED": False, **settings})
    crawler.spider = crawler._create_spider(topic=topic)
    scheduler = TopicScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler
