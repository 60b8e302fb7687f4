"""``python -m topiccrawl.weblab`` and ``scrapy serveweb`` as subprocesses: start, serve, stop,
one-line errors and ``--labels-out``."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from topiccrawl.weblab.api import READY, write_labels
from topiccrawl.weblab.corpus import MemoryCorpus, Page

ROOT = Path(__file__).resolve().parents[1]
READER = ["--reader", "fixture=tests.test_server:open_fixture"]
SCRAPY = ("import sys\nfrom scrapy.cmdline import execute\n"
          "from scrapy.utils.project import get_project_settings\n"
          "s = get_project_settings(); s.set('COMMANDS_MODULE', 'topiccrawl.crawl.commands')\n"
          "execute(['scrapy', 'serveweb', *sys.argv[1:]], s)\n")


@pytest.fixture
def env(tmp_path):
    return dict(os.environ, PYTHONPATH=str(ROOT), TOPICCRAWL_CACHE=str(tmp_path / "cache"))


def lab_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "topiccrawl.weblab", *args]


def scrapy_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", SCRAPY, *args]


def run(cmd: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def wait_ready(proc: subprocess.Popen, timeout: float = 60) -> dict:
    deadline, lines = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith(READY):
                return dict(kv.split("=", 1) for kv in line[len(READY):].split())
    proc.kill()
    raise AssertionError(f"no ready line; output: {''.join(lines)} {proc.stderr.read()}")


def serve_and_stop(cmd: list[str], env: dict, cwd: Path, sig: int) -> tuple[dict, bytes, int, str, str]:
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = wait_ready(proc)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": ready["proxy"]}))
        body = opener.open("http://a.test/news/1.html", timeout=10).read()
    finally:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    return ready, body, proc.returncode, out, err


def test_module_cli_serves_and_stops_cleanly_on_ctrl_c(env, tmp_path):
    ready, body, code, out, err = serve_and_stop(lab_cmd("fixture:", "--port", "0", *READER),
                                                 env, tmp_path, signal.SIGINT)
    assert b"storm surge warning" in body
    assert ready["pages"] == "205" and ready["search"] == ready["proxy"] + "/search"
    assert code == 0 and "Traceback" not in err
    assert "stopped" in out


def test_scrapy_serveweb_outside_a_project(env, tmp_path):
    ready, body, code, out, err = serve_and_stop(scrapy_cmd("fixture:", "--port", "0", *READER),
                                                 env, tmp_path, signal.SIGTERM)
    assert b"storm surge warning" in body
    assert code == 0 and "Traceback" not in err


@pytest.mark.parametrize("make", [lab_cmd, scrapy_cmd])
@pytest.mark.parametrize("args, message", [
    (["nosuch:thing"], "error: unknown corpus kind 'nosuch'"),
    (["fixture:", "--faults", "5xx@0.1,bogus@0.1"], "error: unknown fault 'bogus'"),
    (["fixture:", "--labels-out", "/nonexistent/dir/labels.tsv"], "error: [Errno 2]"),
])
def test_bad_input_is_a_one_line_error_with_exit_2(env, tmp_path, make, args, message):
    done = run(make(*args, *READER), env, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message)
    assert len(done.stderr.strip().splitlines()) == 1


def test_labels_out_writes_every_page(env, tmp_path):
    target = tmp_path / "labels.tsv"
    done = run(lab_cmd("fixture:", "--labels-out", str(target), *READER), env, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 205
    assert "http://a.test/\tdisaster" in lines
    assert "http://b.test/\t" in lines


def test_labels_out_to_a_reader_that_stops_early_is_quiet(env, tmp_path):
    """``--labels-out - | head -2``: the labels went on into a closed pipe, "error: [Errno 32] Broken
    pipe", exit 2."""
    proc = subprocess.Popen(lab_cmd("fixture:", "--labels-out", "-", *READER), env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    first = proc.stdout.read(64)
    proc.stdout.close()  # as head does after its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and err == "" and first


def test_write_labels_sorts_labels(tmp_path):
    corpus = MemoryCorpus([Page("http://x.test/a"), Page("http://x.test/b")],
                          {"http://x.test/a": {"storm", "flood"}})
    assert write_labels(corpus, str(tmp_path / "l.tsv")) == 2
    assert (tmp_path / "l.tsv").read_text() == "http://x.test/a\tflood,storm\nhttp://x.test/b\t\n"


def test_help_has_no_heading_made_of_an_option_text(env):
    # Scrapy's help formatter makes a line ending in ":" a heading: --access-log's help, wrapped after
    # "FILE:", printed "Append One Line Per Request …" underlined with "=" in the options
    proc = subprocess.run(scrapy_cmd("--help"), env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--access-log" in proc.stdout, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    headings = [lines[i - 1].strip() for i, line in enumerate(lines) if i and set(line.strip()) == {"="}]
    assert headings and set(headings) <= {"Usage", "Options", "Global Options"}, headings
