"""A real ``redis-server`` per test on a free loopback port (``redis_server``; ``redis_server_auth``
with ``requirepass``). Import the fixtures into a test module:
``from redis_fixture import redis_server, redis_server_auth  # noqa: F401``.

No persistence (``--save "" --appendonly no``), a temporary working directory, killed after the
test. A missing ``redis-server`` fails the test: it is part of the project's setup (README).
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
