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
