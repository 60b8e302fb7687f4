"""Scrapyd jobs keep their outputs, and secrets stay out of logs and errors.

* Scrapyd runs every job with the spider argument ``_job=<job id>`` (before 1.5 it also set
  ``SCRAPY_JOB``, in 1.4 ``SCRAPYD_JOB``, in the job's environment) in its own working directory; two jobs of one spider
  used to share (and overwrite) ``out/<spider>``. With ``TOPICCRAWL_OUTPUT_DIR`` left at its
  default each job now writes ``out/<spider>/<job id>``, and the log names the absolute path. The
  jobs run as Scrapyd 1.6 runs them: ``scrapy crawl … -a _job=<id>`` in a working directory of
  their own with ``SCRAPY_SETTINGS_MODULE`` set; tests/test_scrapyd.py runs one through a real
  Scrapyd.
* The Redis URL (with its password) can come from a file (``TOPICCRAWL_REDIS_URL_FILE``) or the
  environment variable ``TOPICCRAWL_REDIS_URL`` instead of ``-s``/``setting=`` (visible in ``ps``
  and in Scrapyd's log); whatever the form of the password (``:pw@``, ``?password=``), it never
  appears in the crawl's log or error lines. Real ``redis-server`` with ``requirepass``.
"""

from __future__ import annotations

import json
import os
import subprocess

from conftest import REPO, bin_path, run_crawl
from redis_fixture import PASSWORD, redis_server_auth  # noqa: F401

WEB = "generated:zh-disaster?pages=2000&seed=4"


def _scrapyd_job(tmp_path, job: str, *extra: str, old_scrapyd: bool = False):
    """``scrapy crawl`` as Scrapyd 1.6 starts a job (``-a _job=<id>``); ``old_scrapyd``: the id in
    ``$SCRAPY_JOB`` only (what Scrapyd before 1.4 set in the environment)."""
    cwd = tmp_path / "scrapyd-workdir"
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_JOB", "SCRAPYD_JOB")}
    env.update({"SCRAPY_SETTINGS_MODULE": "topiccrawl.settings", "SCRAPY_PROJECT": "topiccrawl",
                "TOPICCRAWL_CACHE": str(tmp_path / "cache"),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    if old_scrapyd:
        env["SCRAPY_JOB"] = job
    cmd = [bin_path("scrapy"), "crawl", "focused", "-a", "max_pages=20", *(() if old_scrapyd else ("-a", f"_job={job}")),
           "-s", f"TOPICCRAWL_WEB={WEB}", "-s", "TOPICCRAWL_PLOT_ENABLED=false", *extra]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180), cwd


def test_two_scrapyd_jobs_keep_their_own_outputs(tmp_path):
    runs = {job: _scrapyd_job(tmp_path, job) for job in ("job-a1", "job-b2")}
    for job, (proc, cwd) in runs.items():
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = (cwd / "out" / "focused" / job).absolute()
        assert f"output directory: {out}" in proc.stderr
        stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
        assert stats["topiccrawl/dp"] == 20 and stats["start_time"]
        assert f"to {out}" in proc.stderr  # "wrote stats.json, harvest.csv to <absolute path>"
    first = json.loads((runs["job-a1"][1] / "out/focused/job-a1/stats.json").read_text(encoding="utf-8"))
    second = json.loads((runs["job-b2"][1] / "out/focused/job-b2/stats.json").read_text(encoding="utf-8"))
    assert first["start_time"] != second["start_time"]  # two files, neither replaced the other
    # an explicit TOPICCRAWL_OUTPUT_DIR is used as given (with %(job)s when the user wants it)
    proc, cwd = _scrapyd_job(tmp_path, "job-c3", "-s", "TOPICCRAWL_OUTPUT_DIR=mine/%(name)s-%(job)s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (cwd / "mine" / "focused-job-c3" / "stats.json").is_file()
    # the job id in the environment only, as older Scrapyd set it
    proc, cwd = _scrapyd_job(tmp_path, "job-d4", old_scrapyd=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (cwd / "out" / "focused" / "job-d4" / "stats.json").is_file()


def test_a_scrapyd_job_refused_for_bad_input_says_why_in_its_log(tmp_path):
    log = tmp_path / "logs" / "topiccrawl" / "focused" / "job-e5.log"  # where Scrapyd puts a job's log
    proc, _ = _scrapyd_job(tmp_path, "job-e5", "-a", "topic=/nonexistent/topic.toml", "-s", f"LOG_FILE={log}")
    assert proc.returncode == 2 and proc.stderr.strip() == "error: /nonexistent/topic.toml: no such topic file"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and lines[0].endswith(" ERROR: /nonexistent/topic.toml: no such topic file"), lines


def _redis_crawl(tmp_path, name, settings, env=None):
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        return run_crawl(tmp_path / name, args={"topic": "台风灾害", "strategy": "bfs", "max_pages": 15},
                         settings={"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false",
                                   "TOPICCRAWL_CRAWL_ID": name, "TOPICCRAWL_LEASE_SECONDS": "5",
                                   "TOPICCRAWL_IDLE_TIMEOUT": "5", **settings}, timeout=180)
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_redis_password_from_a_file_or_the_environment_never_printed(tmp_path, redis_server_auth):
    url = redis_server_auth.url  # redis://:PASSWORD@127.0.0.1:PORT/0
    secret_file = tmp_path / "redis-url"
    secret_file.write_text(url + "\n", encoding="utf-8")
    query_form = f"redis://127.0.0.1:{redis_server_auth.port}/0?password={PASSWORD}"
    for name, settings, env in (("file", {"TOPICCRAWL_REDIS_URL_FILE": str(secret_file)}, None),
                                ("env", {}, {"TOPICCRAWL_REDIS_URL": query_form}),
                                ("setting", {"TOPICCRAWL_REDIS_URL": url}, None)):
        proc, out = _redis_crawl(tmp_path, name, settings, env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
        assert stats["topiccrawl/global/dp"] > 0  # the crawl reached Redis with the password and counted pages
        assert PASSWORD not in proc.stderr, name
        assert PASSWORD not in (out / "stats.json").read_text(encoding="utf-8")


def test_redis_errors_mask_every_form_of_the_password(tmp_path, redis_server_auth):
    port = redis_server_auth.port
    for name, url in (("query", f"redis://127.0.0.1:{port}/0?password=wrong-pw-1"),
                      ("userinfo", f"redis://:wrong-pw-2@127.0.0.1:{port}/0"),
                      ("user", f"redis://admin:wrong%23pw-3@127.0.0.1:{port}/0")):
        proc, _ = _redis_crawl(tmp_path, name, {"TOPICCRAWL_REDIS_URL": url})
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        line = proc.stderr.strip().splitlines()[-1]
        assert line.startswith("error: Redis at ") and "***" in line, line
        assert "wrong-pw" not in proc.stderr and "wrong%23pw" not in proc.stderr, proc.stderr[-2000:]
    secret_file = tmp_path / "missing-url-file"
    proc, _ = _redis_crawl(tmp_path, "nofile", {"TOPICCRAWL_REDIS_URL_FILE": str(secret_file)})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(
        f"error: TOPICCRAWL_REDIS_URL_FILE='{secret_file}': cannot read it")


def test_redact_masks_every_form_of_a_password():
    from topiccrawl.crawl.errors import redact, redact_text

    cases = {
        "redis://:pw@h:6379/0": "redis://:***@h:6379/0",
        "redis://user:pw@h/0": "redis://user:***@h/0",
        "rediss://TOKEN@h:1/0": "rediss://***@h:1/0",
        "redis://h:6379/0?password=abc&db=1": "redis://h:6379/0?password=***&db=1",
        "unix://:pw@/run/redis.sock?db=0": "unix://:***@/run/redis.sock?db=0",
        "redis://:p#w/x?y@h:1/0": "redis://:***@h:1/0",  # unencoded #, / and ? inside the password
        "redis://u:p%40w@h/0?api_key=z": "redis://u:***@h/0?api_key=***",
        "redis://h/0?db=1": "redis://h/0?db=1",
    }
    for url, masked in cases.items():
        assert redact(url) == masked
    text = "cannot reach redis://:s3cret@10.0.0.5:6379/0 nor 'redis://h?password=s3cret'"
    assert "s3cret" not in redact_text(text) and redact_text(text).count("***") == 2


def test_feed_uri_credentials_are_masked_in_the_log(tmp_path):
    """A feed URI with a password (``-o ftp://user:PW@host/…``) that fails to store: Scrapy's
    error line names the URI, masked."""
    from conftest import free_port

    cmd = [bin_path("scrapy"), "crawl", "focused", "-a", "max_pages=3", "-s", f"TOPICCRAWL_WEB={WEB}",
           "-s", f"TOPICCRAWL_OUTPUT_DIR={tmp_path / 'out'}", "-s", "TOPICCRAWL_PLOT_ENABLED=false",
           "-o", f"ftp://feeder:ftp-s3cret@127.0.0.1:{free_port()}/pages.jsonl"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "TOPICCRAWL_CACHE": str(tmp_path / "cache")})
    assert "Error storing jsonl feed (3 items) in: ftp://feeder:***@127.0.0.1:" in proc.stderr, proc.stderr[-3000:]
    assert "ftp-s3cret" not in proc.stderr
