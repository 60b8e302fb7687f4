"""Deploy the project to a real scrapyd on loopback and run a job through schedule.json."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import REPO, bin_path, free_port

USER, PASSWORD = "crawler", "s3cret-pass"


def _auth_headers(auth: tuple[str, str] | None) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(":".join(auth).encode()).decode()} if auth else {}


def _get(url: str, auth: tuple[str, str] | None = None) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, headers=_auth_headers(auth)), timeout=60) as resp:
        return json.loads(resp.read())


def _post(url: str, fields: dict, files: dict | None = None, auth: tuple[str, str] | None = None) -> dict:
    boundary = uuid.uuid4().hex
    body = b""
    for name, value in fields.items():
        values = value if isinstance(value, list) else [value]
        for v in values:
            body += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{v}\r\n'.encode()
    for name, (filename, data) in (files or {}).items():
        body += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode() + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    req = urllib.request.Request(url, data=body, headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}", **_auth_headers(auth)})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


@contextlib.contextmanager
def _scrapyd(tmp_path, auth: tuple[str, str] | None = None):
    """A real scrapyd on a free loopback port (with HTTP basic auth when ``auth`` is given)."""
    port = free_port()
    home = tmp_path / "scrapyd"
    home.mkdir()
    (home / "scrapyd.conf").write_text(
        "[scrapyd]\nbind_address = 127.0.0.1\n"
        f"http_port = {port}\npoll_interval = 0.5\nmax_proc = 2\n"
        f"eggs_dir = {home}/eggs\nlogs_dir = {home}/logs\nitems_dir = {home}/items\ndbs_dir = {home}/dbs\n"
        + (f"username = {auth[0]}\npassword = {auth[1]}\n" if auth else "")
    )
    proc = subprocess.Popen([bin_path("scrapyd")], cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if _get(f"{url}/daemonstatus.json", auth)["status"] == "ok":
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError("scrapyd did not start")
        yield url, home
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture
def scrapyd(tmp_path):
    with _scrapyd(tmp_path) as running:
        yield running


def test_deploy_egg_and_schedule_job(scrapyd, tmp_path):
    url, home = scrapyd
    egg = tmp_path / "topiccrawl.egg"
    build = subprocess.run([bin_path("scrapyd-deploy"), "--build-egg", str(egg)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    added = _post(f"{url}/addversion.json", {"project": "topiccrawl", "version": "1"},
                  {"egg": ("topiccrawl.egg", egg.read_bytes())})
    assert added["status"] == "ok", added
    assert {"focused"} <= set(added["spiders"] if isinstance(added["spiders"], list) else
                              _get(f"{url}/listspiders.json?project=topiccrawl")["spiders"])

    discovery_out = tmp_path / "dwdbrm-out"
    # the output folder left at its default: one folder per job, under Scrapyd's working directory
    focused = _schedule(url, "focused", {"topic": "台风灾害", "strategy": "bestfirst"}, [
        "TOPICCRAWL_WEB=generated:zh-disaster?pages=3000&seed=2", "TOPICCRAWL_MAX_PAGES=40",
        "TOPICCRAWL_PLOT_ENABLED=false"])
    discovery = _schedule(url, "dwdbrm", {"seeds": "truth:3", "pages": "40"}, [
        "TOPICCRAWL_WEB=generated:zh-realestate?pages=3000&seed=2",
        f"TOPICCRAWL_OUTPUT_DIR={discovery_out}", "TOPICCRAWL_PLOT_ENABLED=false"])
    _wait(url, {focused, discovery})

    log = next((home / "logs").rglob(f"{focused}.log")).read_text(encoding="utf-8")
    pages = _items(home, focused)
    assert len(pages) == 40, log[-3000:]
    assert all(p["strategy"] == "bestfirst" for p in pages)
    focused_out = home / "out" / "focused" / focused
    assert f"output directory: {focused_out}" in log
    stats = json.loads((focused_out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == 40
    assert stats["finish_reason"] == "topiccrawl_max_pages"
    assert "Enabled extensions" in log and "RemoteControl" not in log

    log = next((home / "logs").rglob(f"{discovery}.log")).read_text(encoding="utf-8")
    found = _items(home, discovery)
    assert len(found) >= 40 and {p["operator"] for p in found} <= {"KS", "RS", "FC", "BC"}, log[-3000:]
    assert (discovery_out / "ranked.jsonl").stat().st_size > 0


def _schedule(url: str, spider: str, args: dict, settings: list[str], auth=None) -> str:
    job = _post(f"{url}/schedule.json", {"project": "topiccrawl", "spider": spider, **args, "setting": settings},
                auth=auth)
    assert job["status"] == "ok", job
    return job["jobid"]


def _wait(url: str, jobids: set[str], timeout: float = 300, auth=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished = {j["id"] for j in _get(f"{url}/listjobs.json?project=topiccrawl", auth)["finished"]}
        if jobids <= finished:
            return
        time.sleep(1)
    pytest.fail(f"scrapyd jobs {jobids} did not finish in time")


def _items(home: Path, jobid: str) -> list[dict]:
    path = next((home / "items").rglob(f"{jobid}.jl"))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_scrapyd_with_basic_auth(tmp_path):
    """scrapyd.conf ``username``/``password``: anonymous calls get 401; ``scrapyd-deploy`` takes
    the credentials from a deploy target in the user's scrapy.cfg (docs/deploy.md), whose
    password is expanded from an environment variable, and a job runs with them."""
    auth = (USER, PASSWORD)
    with _scrapyd(tmp_path, auth) as (url, home):
        for call in (lambda: _get(f"{url}/daemonstatus.json"),
                     lambda: _get(f"{url}/daemonstatus.json", (USER, "wrong")),
                     lambda: _post(f"{url}/schedule.json", {"project": "topiccrawl", "spider": "focused"})):
            with pytest.raises(urllib.error.HTTPError) as err:
                call()
            assert err.value.code == 401

        config = tmp_path / "xdg"
        config.mkdir()
        (config / "scrapy.cfg").write_text(
            f"[deploy:secure]\nurl = {url}/\nproject = topiccrawl\n"
            f"username = {USER}\npassword = ${{TOPICCRAWL_SCRAPYD_PASSWORD}}\n")
        env = {**os.environ, "XDG_CONFIG_HOME": str(config), "TOPICCRAWL_SCRAPYD_PASSWORD": PASSWORD}
        deploy = subprocess.run([bin_path("scrapyd-deploy"), "secure", "-v", "auth1"], cwd=REPO, env=env,
                                capture_output=True, text=True, timeout=300)
        assert deploy.returncode == 0 and '"status": "ok"' in deploy.stdout, deploy.stdout + deploy.stderr[-2000:]
        assert _get(f"{url}/listversions.json?project=topiccrawl", auth)["versions"] == ["auth1"]

        env["TOPICCRAWL_SCRAPYD_PASSWORD"] = "wrong"
        denied = subprocess.run([bin_path("scrapyd-deploy"), "secure", "-v", "auth2"], cwd=REPO, env=env,
                                capture_output=True, text=True, timeout=300)
        assert "401" in denied.stdout + denied.stderr, denied.stdout + denied.stderr[-2000:]

        out = tmp_path / "out"
        job = _schedule(url, "focused", {"topic": "台风灾害"}, [
            "TOPICCRAWL_WEB=generated:zh-disaster?pages=2000&seed=2", "TOPICCRAWL_MAX_PAGES=20",
            f"TOPICCRAWL_OUTPUT_DIR={out}", "TOPICCRAWL_PLOT_ENABLED=false"], auth=auth)
        _wait(url, {job}, auth=auth)
        assert len(_items(home, job)) == 20
        assert json.loads((out / "stats.json").read_text(encoding="utf-8"))["topiccrawl/dp"] == 20
