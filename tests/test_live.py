"""Live mode: private, loopback and link-local addresses are refused unless explicitly allowed."""

from __future__ import annotations

import json

import pytest

from conftest import run_crawl
from topiccrawl.middlewares import is_private_host


@pytest.mark.parametrize("host,private", [
    ("127.0.0.1", True), ("localhost", True), ("10.1.2.3", True), ("192.168.0.9", True),
    ("169.254.1.1", True), ("[::1]", True), ("0.0.0.0", True), ("foo.localhost", True),
    ("93.184.216.34", False), ("example.com", False), ("news.sina.com.cn", False),
])
def test_private_host_classification(host, private):
    assert is_private_host(host) is private


def test_live_crawl_refuses_loopback_seed(tmp_path):
    proc, out = run_crawl(
        tmp_path, args={"topic": "台风灾害", "seeds": "http://127.0.0.1:9/,http://localhost:9/x"},
        settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_PLOT_ENABLED": "false"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/refused_private"] == 4  # two seeds and their robots.txt
    assert stats.get("downloader/request_count", 0) == 0
    assert "refused private/loopback address" in proc.stderr
