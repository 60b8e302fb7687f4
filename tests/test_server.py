"""The web lab server over real loopback HTTP: proxying, lab endpoints and fault injection.

The served corpus is a MemoryCorpus built by :func:`open_fixture`, registered in the server
subprocess with ``--reader fixture=tests.test_server:open_fixture``.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import pytest

from topiccrawl.weblab.api import WebLab, WebLabError
from topiccrawl.weblab.corpus import MemoryCorpus, Page
from topiccrawl.weblab.faults import FaultSpecError, parse_faults

READER = {"fixture": "tests.test_server:open_fixture"}
HTML = {"Content-Type": "text/html; charset=utf-8"}
LAST_MODIFIED = "Mon, 01 Jan 2024 10:00:00 GMT"
FAULTS = ("latency=0.3-0.4@0.2,timeout=5@0.1,5xx@0.1,reset@0.1,truncate@0.1,"
          "badlength@0.1,drip=0.5@0.1,loop@0.1,seed=11")


def open_fixture(arg: str, params: dict) -> MemoryCorpus:
    pages = [
        Page("http://a.test/", 200, dict(HTML, **{"Last-Modified": LAST_MODIFIED}),
             "<html><head><title>首页 Home</title></head><body>台风 预警 "
             "<a href='http://a.test/news/1.html'>news</a></body></html>".encode(),
             ["http://a.test/news/1.html"]),
        Page("http://a.test/news/1.html", 200, HTML,
             b"<html><head><title>Storm news</title></head><body>storm surge warning</body></html>"),
        Page("http://a.test/old", 301, {"Location": "http://a.test/news/1.html"}, b""),
        Page("http://a.test/report.pdf", 200, {"Content-Type": "application/pdf"}, b"%PDF-1.4 fake"),
        Page("http://b.test/", 200, HTML, b"<html><body>b</body></html>"),
    ]
    pages += [Page(f"http://c.test/p{i}.html", 200, HTML,
                   f"<html><body>{'filler text ' * 40} page {i}</body></html>".encode())
              for i in range(200)]
    return MemoryCorpus(pages, {"http://a.test/": {"disaster"}},
                        robots={"a.test": "User-agent: *\nDisallow: /private/\n"}, name="fixture")


@pytest.fixture(scope="module")
def lab_env(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOPICCRAWL_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def lab(lab_env):
    with WebLab("fixture:", readers=READER) as running:
        yield running


@pytest.fixture(scope="module")
def faulty_lab(lab_env):
    with WebLab("fixture:", faults=FAULTS, readers=READER) as running:
        yield running


def port_of(lab: WebLab) -> int:
    return urlsplit(lab.proxy_url).port


def raw(lab: WebLab, request: str, timeout: float = 10) -> tuple[int, dict, bytes, str | None]:
    """Send one raw request to the proxy and read until EOF: (status, headers, body, error)."""
    data, error = b"", None
    with socket.create_connection(("127.0.0.1", port_of(lab)), timeout=timeout) as sock:
        sock.sendall(request.encode())
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            error = "reset"
        except TimeoutError:
            error = "timeout"
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0] else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return status, headers, body, error


def raw_get(lab: WebLab, url: str, timeout: float = 10):
    host = urlsplit(url).hostname
    return raw(lab, f"GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n", timeout)


# -- proxying ------------------------------------------------------------------------------------

def test_page_status_headers_and_body(lab):
    expected = open_fixture("", {}).get("http://a.test/")
    status, headers, body = lab.fetch("http://a.test/")
    assert status == 200
    assert body == expected.body
    assert int(headers["Content-Length"]) == len(expected.body)
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Last-Modified"] == LAST_MODIFIED


def test_head_has_length_but_no_body(lab):
    status, headers, body = lab.fetch("http://a.test/report.pdf", method="HEAD")
    assert (status, body) == (200, b"")
    assert int(headers["Content-Length"]) == len(b"%PDF-1.4 fake")
    assert headers["Content-Type"] == "application/pdf"


def test_redirect_is_served_not_followed(lab):
    status, headers, body = lab.fetch("http://a.test/old")
    assert status == 301
    assert headers["Location"] == "http://a.test/news/1.html"
    assert body == b""


def test_unknown_path_404_and_unknown_host_502(lab):
    status, _, _ = lab.fetch("http://a.test/nope.html")
    assert status == 404
    status, _, body = lab.fetch("http://elsewhere.test/")
    assert status == 502
    assert b"host not in corpus fixture: elsewhere.test" in body


def test_robots_txt_per_host(lab):
    status, headers, body = lab.fetch("http://a.test/robots.txt")
    assert status == 200 and body == b"User-agent: *\nDisallow: /private/\n"
    assert headers["Content-Type"].startswith("text/plain")
    assert lab.fetch("http://b.test/robots.txt")[0] == 404


def test_keep_alive_connection_serves_consecutive_requests(lab):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port_of(lab), timeout=10)
    bodies = []
    for url in ("http://a.test/", "http://a.test/news/1.html", "http://b.test/"):
        conn.request("GET", url)
        resp = conn.getresponse()
        bodies.append((resp.status, resp.read()))
    conn.close()
    corpus = open_fixture("", {})
    assert bodies == [(200, corpus.get(u).body) for u in
                      ("http://a.test/", "http://a.test/news/1.html", "http://b.test/")]


def test_connect_and_https_are_refused_clearly(lab):
    status, headers, body, _ = raw(lab, "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n")
    assert status == 501 and b"https is not replayed" in body
    assert lab.fetch("http://a.test/", method="POST")[0] == 405


def test_lab_endpoints(lab):
    info = lab.info
    assert info["pages"] == lab.pages == len(open_fixture("", {}))
    assert info["name"] == "fixture" and info["search_host"] == "search.topiccrawl.test"
    assert info["sample_size"] == lab.pages
    status, headers, body = lab.fetch(lab.search_url.replace("/search", "/_lab/seeds"))
    assert status == 200 and json.loads(body) == []
    assert headers["Content-Type"].startswith("application/json")


def test_search_host_through_the_proxy(lab):
    status, headers, body = lab.fetch("http://search.topiccrawl.test/search?q=storm&format=json")
    assert status == 200
    assert [r["url"] for r in json.loads(body)["results"]] == ["http://a.test/news/1.html"]


def test_start_failure_is_one_line(lab_env):
    with pytest.raises(WebLabError, match=r"failed to start: error: unknown corpus kind 'nosuch'") as err:
        WebLab("nosuch:x", startup_timeout=60).start()
    assert "\n" not in str(err.value)


# -- faults ----------------------------------------------------------------------------------------

def first_url_with(kind: str, latency: bool = False) -> tuple[str, object]:
    plan = parse_faults(FAULTS)
    for i in range(200):
        url = f"http://c.test/p{i}.html"
        fault = plan.decide(url)
        if fault.kind == kind and bool(fault.delay) == latency:
            return url, fault
    raise AssertionError(f"no fixture URL gets fault {kind}")


def full_body(url: str) -> bytes:
    return open_fixture("", {}).get(url).body


def test_fault_5xx_is_sticky(faulty_lab):
    url, fault = first_url_with("5xx")
    assert 500 <= fault.value <= 504
    assert [raw_get(faulty_lab, url)[0] for _ in range(2)] == [fault.value, fault.value]


def test_fault_reset(faulty_lab):
    url, _ = first_url_with("reset")
    status, _, body, error = raw_get(faulty_lab, url)
    assert (status, body, error) == (0, b"", "reset")


def test_fault_truncate(faulty_lab):
    url, _ = first_url_with("truncate")
    status, headers, body, error = raw_get(faulty_lab, url)
    expected = full_body(url)
    assert status == 200 and error is None
    assert int(headers["content-length"]) == len(expected)
    assert body == expected[: len(expected) // 2]


def test_fault_badlength(faulty_lab):
    url, _ = first_url_with("badlength")
    status, headers, body, _ = raw_get(faulty_lab, url)
    expected = full_body(url)
    assert status == 200 and body == expected
    assert int(headers["content-length"]) == len(expected) // 2


def test_fault_drip_delivers_the_whole_body_slowly(faulty_lab):
    url, _ = first_url_with("drip")
    started = time.monotonic()
    status, headers, body, error = raw_get(faulty_lab, url)
    assert (status, body, error) == (200, full_body(url), None)
    assert time.monotonic() - started >= 0.45  # 16 pauses of 0.5/16 s before the last byte


def test_fault_loop_redirects_in_a_cycle(faulty_lab):
    url, _ = first_url_with("loop")
    status, headers, _ = faulty_lab.fetch(url)
    assert status == 302 and headers["Location"] == url + "?_loop=1"
    assert faulty_lab.fetch(url + "?_loop=1")[1]["Location"] == url  # loop=2: A -> A?_loop=1 -> A
    plain, _ = first_url_with(None)
    assert parse_faults(FAULTS).loop_hop(plain + "?_loop=1") is None  # served as an unknown page


def test_fault_loop_length(lab_env):
    plan = parse_faults("loop=3@1")
    url = "http://c.test/p1.html"
    assert [plan.loop_next(url, k) for k in range(3)] == [url + "?_loop=1", url + "?_loop=2", url]
    assert parse_faults("loop=1@1").loop_next(url, 0) == url


def test_fault_timeout_never_answers(faulty_lab):
    url, _ = first_url_with("timeout")
    status, _, body, error = raw_get(faulty_lab, url, timeout=1.0)
    assert (status, body, error) == (0, b"", "timeout")


def test_fault_latency_delays_a_normal_answer(faulty_lab):
    url, fault = first_url_with(None, latency=True)
    assert 0.3 <= fault.delay <= 0.4
    started = time.monotonic()
    status, _, body, _ = raw_get(faulty_lab, url)
    assert (status, body) == (200, full_body(url))
    assert time.monotonic() - started >= 0.3


def test_faults_follow_the_seed_and_heal(lab_env):
    spec = "5xx=503@0.3,seed=5,heal=1"
    urls = [f"http://c.test/p{i}.html" for i in range(60)]
    planned = {u for u in urls if parse_faults(spec).decide(u).kind == "5xx"}
    assert planned and planned != {u for u in urls if parse_faults("5xx@0.3,seed=6").decide(u).kind}
    with WebLab("fixture:", faults=spec, readers=READER) as lab:
        first = {u for u in urls if lab.fetch(u)[0] == 503}
        second = {u for u in urls if lab.fetch(u)[0] == 503}
        stats = lab.info["stats"]
    assert first == planned
    assert second == set()  # heal=1: the retry succeeds
    assert stats["fault_5xx"] == len(planned)


@pytest.mark.parametrize("spec, message", [
    ("5xx", "needs '@RATE'"),
    ("slow@0.1", "unknown fault 'slow'"),
    ("5xx@2", "between 0 and 1"),
    ("5xx@0.6,reset@0.6", "add up to more than 1"),
    ("latency@0.1", "latency needs seconds"),
    ("latency=0.5-0.1@0.1", "reversed"),
    ("5xx=404@0.1", "between 500 and 599"),
    ("reset=3@0.1", "takes no value"),
    ("seed=x", "must be an integer"),
    ("drip=abc@0.1", "not a number"),
    ("loop=0@0.1", "whole number of hops"),
    ("loop=2.5@0.1", "whole number of hops"),
])
def test_bad_fault_specs(spec, message):
    with pytest.raises(FaultSpecError, match=message) as err:
        parse_faults(spec)
    assert "\n" not in str(err.value)
