"""TOPICCRAWL_BLAS_THREADS: the BLAS libraries of numpy and scipy limited for the whole process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

PROBE = """
import json, sys
from threadpoolctl import threadpool_info
from topiccrawl.learning.threads import limit_blas_threads
before = limit_blas_threads(int(sys.argv[1]))
after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after}))
"""


def _probe(threads: int) -> dict:
    # a default of 2 threads whatever the machine's cores, so a limit of 1 is visible
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(threads)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stdout)


def test_every_blas_library_is_limited_and_zero_leaves_the_default():
    limited = _probe(1)
    assert limited["before"] and set(limited["before"].values()) == {2}  # numpy's and scipy's OpenBLAS
    assert limited["after"] and set(limited["after"]) == {1}
    kept = _probe(0)
    assert set(kept["after"]) == {2}


def test_a_negative_count_is_a_config_error():
    with pytest.raises(ConfigError, match="TOPICCRAWL_BLAS_THREADS"):
        TopicCrawlConfig(blas_threads=-1).validate()
