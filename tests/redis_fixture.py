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
import re
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


def assert_lost_in_one_line(worker: subprocess.Popen, url: str, reasons=("redis_lost",)) -> str:
    """A worker stopped as a lost Redis stops it: exit 1, no traceback, one ERROR line naming
    ``url``, a finish reason of ``reasons``; returns its log."""
    log = worker.log.read_text()
    assert worker.returncode == 1 and "Traceback" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and f"lost Redis at {url} (" in errors[0], errors
    assert any(f"Spider closed ({reason})" in log for reason in reasons), log[-3000:]
    return log


def lose_redis_when(server: RedisServer, worker: subprocess.Popen, ready, timeout: float = 180, before=None,
                    reasons=("redis_lost",)) -> str:
    """Kill ``server`` (Redis goes away mid-crawl) once ``ready()`` holds, the worker still running
    (``before()`` first, e.g. a Ctrl-C); let the worker stop by itself (killed after 120 s) and check
    it stopped in one line (:func:`assert_lost_in_one_line`); returns its log."""
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert time.monotonic() < deadline and worker.poll() is None, worker.log.read_text()[-3000:]
            time.sleep(0.05)
        if before is not None:
            before()
        server.proc.kill()
        server.proc.wait(10)
        worker.wait(120)
    finally:
        if worker.poll() is None:
            worker.kill()
    return assert_lost_in_one_line(worker, server.url, reasons)


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


class RedisCut:
    """A loopback TCP forwarder to a Redis server that lets the first ``whole`` connections through
    whole (``scrapy crawl``'s check that Redis answers) and then cuts: with ``handshake=True`` a
    later connection is forwarded until its first command that is not part of a client's
    handshake (PING, HELLO, CLIENT, AUTH, SELECT) and closed there, without it reaching Redis;
    with ``marker``, until its first command holding those bytes instead (every later command
    holding them is cut again, whatever connection carries it); with ``handshake=False`` a later
    connection is closed at once. Redis seen gone at a chosen moment of a worker, without a race
    against it."""

    HANDSHAKE = {b"PING", b"HELLO", b"CLIENT", b"AUTH", b"SELECT"}

    def __init__(self, port: int, whole: int = 1, handshake: bool = True, marker: bytes | None = None):
        self.upstream, self.whole, self.handshake, self.marker = ("127.0.0.1", port), whole, handshake, marker
        self.connections, self.cut, self._lock = 0, 0, threading.Lock()
        cut = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                with cut._lock:
                    cut.connections += 1
                    whole = cut.connections <= cut.whole
                if not whole and not cut.handshake:
                    cut.cut += 1
                    return  # closed by the server when handle returns
                with socket.create_connection(cut.upstream) as up:
                    back = threading.Thread(target=_pipe, args=(up, self.request), daemon=True)
                    back.start()
                    if whole:
                        _pipe(self.request, up)
                    else:
                        cut._until_command(self.request, up)
                    back.join(10)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def _until_command(self, client: socket.socket, up: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                names = {m.upper() for m in re.findall(rb"\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n", data)}
                if self.marker in data if self.marker is not None else names - self.HANDSHAKE:
                    self.cut += 1
                    break
                up.sendall(data)
        except OSError:
            pass
        for sock in (up, client):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def worker_lost(self, start) -> tuple[subprocess.Popen, str]:
        """Run the worker ``start(url)`` starts against this forwarder's URL until it stops (killed
        after 120 s), close the forwarder, check the worker stopped as a lost Redis stops it (one
        ERROR line naming the URL, ``redis_lost``, exit 1, no traceback, the cut reached) and
        return the worker and its log."""
        try:
            worker = start(self.url())
            try:
                worker.wait(120)
            finally:
                if worker.poll() is None:
                    worker.kill()
        finally:
            self.close()
        log = assert_lost_in_one_line(worker, self.url())
        assert self.cut >= 1
        return worker, log


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

