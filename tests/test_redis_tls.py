"""TOPICCRAWL_REDIS_URL with TLS (``rediss://``) against a real redis-server speaking only TLS,
with a throw-away CA and server certificate made by ``openssl`` for 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from conftest import free_port, run_crawl
from topiccrawl.redis.connection import RedisStoreError, connect

WEB = "generated:zh-disaster?pages=5000&seed=11"


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def tls_redis(tmp_path):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test certificates")
    d = tmp_path / "tls"
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=topiccrawl test CA",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
             "-out", "server.csr", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "1", "-extfile", "san.cnf", "-out", "server.pem", cwd=d)
    port = free_port()
    binary = shutil.which("redis-server", path="/usr/bin:/usr/local/bin:/usr/sbin")
    if binary is None:
        pytest.fail("redis-server is not installed: run scripts/install-test-deps.sh (README)")
    proc = subprocess.Popen([binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                             "--tls-cert-file", str(d / "server.pem"), "--tls-key-file", str(d / "server.key"),
                             "--tls-ca-cert-file", str(d / "ca.pem"), "--tls-auth-clients", "no",
                             "--save", "", "--appendonly", "no", "--dir", str(d)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=required&ssl_ca_certs={d / 'ca.pem'}"
    deadline = time.monotonic() + 10
    while True:
        try:
            connect(url, timeout=2).close()
            break
        except RedisStoreError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("redis-server with TLS did not answer")
            time.sleep(0.1)
    yield url, port
    proc.kill()
    proc.wait(10)


def test_rediss_url_verifies_the_server_and_plain_redis_is_refused(tls_redis):
    url, port = tls_redis
    assert connect(url).ping()
    with pytest.raises(RedisStoreError, match="cannot reach Redis"):
        connect(f"redis://127.0.0.1:{port}/0", timeout=2)  # plain TCP to a TLS-only port
    with pytest.raises(RedisStoreError, match="cannot reach Redis"):
        connect(f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=required", timeout=2)  # CA not trusted


def test_a_crawl_runs_over_tls(tmp_path, tls_redis):
    url, _ = tls_redis
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "strategy": "bestfirst", "max_pages": 30},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": url,
                                    "TOPICCRAWL_CRAWL_ID": "tls", "TOPICCRAWL_PLOT_ENABLED": "false"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/global/dp"] == 30 and stats["finish_reason"] == "topiccrawl_max_pages"
    client = connect(url)
    assert int(client.hget("topiccrawl:tls:stats", "dp")) == 30
