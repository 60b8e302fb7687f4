"""TOPICCRAWL_GC_THRESHOLD: the garbage collector's young generation raised for the whole process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO
from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

PROBE = """
import gc, json, sys
from topiccrawl.crawl.runtime import raise_gc_threshold
gc.set_threshold(700, 10, 10)
if sys.argv[2] == "off":
    gc.disable()
first = raise_gc_threshold(int(sys.argv[1]))
again = raise_gc_threshold(int(sys.argv[1]))
print(json.dumps({"first": first, "again": again, "after": gc.get_threshold()}))
"""


def _probe(threshold: int, collector: str = "on") -> dict:
    # in a process of its own: the threshold is the process's
    proc = subprocess.run([sys.executable, "-c", PROBE, str(threshold), collector], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stdout)


def test_the_young_generation_is_raised_once_and_the_older_ones_are_kept():
    raised = _probe(10000)
    assert raised["first"] == 700 and raised["again"] is None
    assert raised["after"] == [10000, 10, 10]


def test_zero_a_lower_threshold_or_a_disabled_collector_change_nothing():
    assert _probe(0) == {"first": None, "again": None, "after": [700, 10, 10]}
    assert _probe(500) == {"first": None, "again": None, "after": [700, 10, 10]}
    assert _probe(10000, "off") == {"first": None, "again": None, "after": [700, 10, 10]}


def test_a_negative_threshold_is_a_config_error():
    with pytest.raises(ConfigError, match="TOPICCRAWL_GC_THRESHOLD"):
        TopicCrawlConfig(gc_threshold=-1).validate()
