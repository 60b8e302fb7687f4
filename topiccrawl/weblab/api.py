"""Python API of the offline web lab: run a lab server in a subprocess, fetch and search through it.

    with WebLab("generated:zh-disaster?pages=2000", faults="5xx@0.02,seed=7") as lab:
        status, headers, body = lab.fetch(lab.info["seeds"][0])
        hits = lab.search("台风 预警")

The subprocess is ``python -m topiccrawl.weblab SPEC --port N ... --parent-pid PID``; :class:`WebLab`
waits for its ready line and stops it with SIGTERM. It dies with the process that started it, also
after a kill -9 (``--parent-pid``: Linux's parent-death signal, and the end of its stdin pipe), and
runs in its own session, so a Ctrl-C in the terminal reaches the crawler only: the crawler finishes
its requests through the lab, then stops it. Crawlers use :attr:`WebLab.proxy_url` as their HTTP proxy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import IO

from topiccrawl.weblab.corpus import Corpus, open_corpus

READY = "topiccrawl-weblab ready "


class WebLabError(RuntimeError):
    """The lab server did not start, or it answered an API call with an error (one line)."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def write_labels(corpus: str | Corpus, path: str) -> int:
    """Write ``url<TAB>label,label...`` for every page of ``corpus`` (a spec or a Corpus) to
    ``path`` (``-`` for stdout), streamed; return the number of lines. Labels are sorted."""
    corpus = open_corpus(corpus) if isinstance(corpus, str) else corpus
    out: IO[str] = sys.stdout if path == "-" else open(path, "w", encoding="utf-8")
    try:
        count = 0
        for count, url in enumerate(corpus.iter_urls(), 1):  # noqa: B007 (returned after the loop)
            out.write(f"{url}\t{','.join(sorted(corpus.labels(url)))}\n")
        return count
    finally:
        if out is not sys.stdout:
            out.close()


class WebLab:
    """A lab server subprocess; see the module docstring.

    ``readers`` registers extra corpus kinds in the subprocess (``{"kind": "module:function"}``,
    passed as ``--reader kind=module:function``); ``search_limit`` bounds the search index.
    """

    def __init__(self, spec: str, port: int = 0, faults: str | None = None, bind: str = "127.0.0.1",
                 startup_timeout: float = 120, search_limit: int | None = None,
                 readers: dict[str, str] | None = None):
        self.spec, self.port, self.faults, self.bind = spec, port, faults, bind
        self.startup_timeout, self.search_limit, self.readers = startup_timeout, search_limit, readers or {}
        self.proxy_url = self.search_url = ""
        self.pages = 0
        self.proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None
        self._direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "topiccrawl.weblab", self.spec, "--port", str(self.port), "--bind", self.bind]
        if self.faults:
            cmd += ["--faults", self.faults]
        if self.search_limit is not None:
            cmd += ["--search-limit", str(self.search_limit)]
        for kind, target in self.readers.items():
            cmd += ["--reader", f"{kind}={target}"]
        return cmd

    def start(self) -> WebLab:
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        self._log = tempfile.TemporaryFile()
        # stdin: a pipe only this process writes to, closed by the kernel when it dies
        self.proc = subprocess.Popen([*self.command(), "--parent-pid", str(os.getpid())], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            output = self.output()
            # whole lines only: the last one may still be on its way
            ready = [ln for ln in output.split("\n")[:-1] if ln.startswith(READY)]
            if ready:
                fields = dict(kv.split("=", 1) for kv in ready[0][len(READY):].split())
                self.proxy_url, self.search_url = fields["proxy"], fields["search"]
                self.pages = int(fields["pages"])
                return self
            if self.proc.poll() is not None:
                lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
                self.stop()
                raise WebLabError(f"web lab {self.spec!r} failed to start: "
                                  f"{lines[-1] if lines else f'exit code {self.proc.returncode}'}")
            if time.monotonic() > deadline:
                self.stop()
                raise WebLabError(f"web lab {self.spec!r} not ready after {self.startup_timeout:g} s")
            time.sleep(0.05)

    def output(self) -> str:
        """Everything the subprocess printed so far (stdout and stderr)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> WebLab:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def info(self) -> dict:
        """The server's ``/_lab/info`` (fetched on every access: it includes live counters)."""
        return self._get_json(self.search_url.rsplit("/", 1)[0] + "/_lab/info")

    def fetch(self, url: str, method: str = "GET", timeout: float = 30) -> tuple[int, dict, bytes]:
        """``(status, headers, body)`` of ``url`` through the proxy; redirects are not followed."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": self.proxy_url}), _NoRedirect)
        try:
            with opener.open(urllib.request.Request(url, method=method), timeout=timeout) as resp:
                return resp.status, dict(resp.headers.items()), resp.read()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, dict(err.headers.items()), err.read()

    def search(self, q: str, pageno: int = 1, timeout: float = 600) -> dict:
        """The SearXNG-shaped JSON answer of the lab's search engine."""
        query = urllib.parse.urlencode({"q": q, "format": "json", "pageno": pageno})
        return self._get_json(f"{self.search_url}?{query}", timeout)

    def _get_json(self, url: str, timeout: float = 30) -> dict:
        try:
            with self._direct.open(url, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            with err:
                message = json.loads(err.read() or b"{}").get("error", err.reason)
            raise WebLabError(f"{url}: HTTP {err.code}: {message}") from None
