"""Shared fixtures: a clean working directory per crawl and the shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path | None:
    """../shared/data (where CI has it) or $TOPICCRAWL_SHARED_DATA; None when absent."""
    for cand in (os.environ.get("TOPICCRAWL_SHARED_DATA"), REPO.parent / "shared" / "data", "/work/shared/data"):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return None


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is not present (set TOPICCRAWL_SHARED_DATA to its path)")
    return path


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
