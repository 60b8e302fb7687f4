"""A real ``redis-server`` per test on a free loopback port (``redis_server``; ``redis_server_auth``
with ``requirepass``). Import the fixtures into a test module:
``from redis_fixture import redis_server, redis_server_auth  # noqa: F401``.

No persistence (``--save "" --appendonly no``), a temporary working directory, killed after the
test. A missing ``redis-server`` fails the test: it is part of the project's setup (README).

For tests with several ``scrapy crawl`` workers: ``start_worker`` runs one in the background, and
``StartGate`` (or the ``start_gate`` fixture) lets them begin fetching together, so a worker whose
process starts late on a loaded machine still gets its share.
"""

from __future__ import annotations

import os
import shutil
import socket
import socketserver
import subprocess
import threading
import time
from dataclasses import dataclass

import pytest

from conftest import REPO, bin_path, free_port

PASSWORD = "s3cret-pw"


@dataclass
class RedisServer:
    port: int
    password: str | None
    proc: subprocess.Popen

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, decode_responses=True)


def _start(tmp_path, password: str | None = None):
    binary = shutil.which("redis-server", path=f"{os.environ.get('PATH', '')}:/usr/bin:/usr/sbin")
    if binary is None:
        pytest.fail("redis-server is not installed: run the project's setup (README, 'Setup'; "
                    "apt-get install redis-server) — the Redis store tests need a real server")
    import redis

    port = free_port()
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "",
           "--appendonly", "no", "--protected-mode", "no"]
    if password:
        cmd += ["--requirepass", password]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    server = RedisServer(port, password, proc)
    deadline = time.monotonic() + 10
    while True:
        try:
            server.client().ping()
            return server
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"redis-server did not answer PING on port {port}")
            time.sleep(0.05)


def _stop(server: RedisServer) -> None:
    server.proc.kill()
    server.proc.wait(10)


@pytest.fixture
def redis_server(tmp_path):
    (tmp_path / "redis").mkdir()
    server = _start(tmp_path / "redis")
    yield server
    _stop(server)


@pytest.fixture
def redis_server_auth(tmp_path):
    (tmp_path / "redis-auth").mkdir()
    server = _start(tmp_path / "redis-auth", PASSWORD)
    yield server
    _stop(server)


def start_worker(tmp_path, name: str, spider: str, args: list[str], settings: dict) -> subprocess.Popen:
    """One ``scrapy crawl`` worker in the background (feed and outputs in ``tmp_path/name``, log in
    ``tmp_path/name.log``); the returned process carries ``out`` and ``log``."""
    out = tmp_path / name
    cmd = [bin_path("scrapy"), "crawl", spider, *args, "-O", str(out / "pages.jsonl")]
    for k, v in {**settings, "TOPICCRAWL_OUTPUT_DIR": str(out)}.items():
        cmd += ["-s", f"{k}={v}"]
    log = (tmp_path / f"{name}.log").open("w")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "TOPICCRAWL_CACHE": str(tmp_path / "cache")})
    proc.out, proc.log = out, tmp_path / f"{name}.log"
    return proc


class StartGate:
    """A loopback TCP forwarder to ``upstream`` (``host:port`` or ``http://host:port``) that holds
    every connection until it opens: workers started one after the other begin fetching at the
    same moment, whatever the skew of their process start-up. A context manager (or the
    ``start_gate`` fixture, which closes its gates after the test)::

        with StartGate(lab.proxy_url) as gate:
            workers = [start_worker(... proxy=gate.url ...) for ...]
            gate.open_when(workers, "Spider opened")
            ...wait for the workers...
    """

    def __init__(self, upstream: str):
        host, port = upstream.split("//")[-1].rstrip("/").rsplit(":", 1)
        self.upstream, self.opened, self._closed = (host, int(port)), threading.Event(), False
        gate = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                gate.opened.wait(120)
                with socket.create_connection(gate.upstream) as up:
                    back = threading.Thread(target=_pipe, args=(up, self.request), daemon=True)
                    back.start()
                    _pipe(self.request, up)
                    back.join(120)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def open_when(self, procs, text: str, timeout: float = 120) -> None:
        """Open once every worker's log contains ``text`` (fail if one exits or the time runs out)."""
        deadline = time.monotonic() + timeout
        while not all(text in p.log.read_text() for p in procs):
            for p in procs:
                if p.poll() is not None:
                    pytest.fail(f"{p.log.name} exited ({p.returncode}) before {text!r}: "
                                f"{p.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {text!r} in every worker's log after {timeout} s")
            time.sleep(0.1)
        self.opened.set()

    def __enter__(self) -> StartGate:
        return self

    def close(self) -> None:
        """Open (held connections go on), stop accepting; closing twice is harmless."""
        self.opened.set()
        if not self._closed:
            self._closed = True
            self.server.shutdown()
            self.server.server_close()

    def __exit__(self, *exc) -> None:
        self.close()


@pytest.fixture
def start_gate():
    """``start_gate(upstream)`` makes a :class:`StartGate`; every gate is closed after the test."""
    gates = []

    def make(upstream: str) -> StartGate:
        gates.append(StartGate(upstream))
        return gates[-1]

    yield make
    for gate in gates:
        gate.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` closes, then half-close ``dst``."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass

