"""Deploy the project to a real scrapyd on loopback and run a job through schedule.json."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import REPO, bin_path, free_port


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def _post(url: str, fields: dict, files: dict | None = None) -> dict:
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
    req = urllib.request.Request(url, data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


@pytest.fixture
def scrapyd(tmp_path):
    port = free_port()
    home = tmp_path / "scrapyd"
    home.mkdir()
    (home / "scrapyd.conf").write_text(
        "[scrapyd]\nbind_address = 127.0.0.1\n"
        f"http_port = {port}\npoll_interval = 0.5\nmax_proc = 2\n"
        f"eggs_dir = {home}/eggs\nlogs_dir = {home}/logs\nitems_dir = {home}/items\ndbs_dir = {home}/dbs\n"
    )
    proc = subprocess.Popen([bin_path("scrapyd")], cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if _get(f"{url}/daemonstatus.json")["status"] == "ok":
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError("scrapyd did not start")
        yield url, home
    finally:
        proc.terminate()
        proc.wait(timeout=20)


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

    focused_out, discovery_out = tmp_path / "focused-out", tmp_path / "dwdbrm-out"
    focused = _schedule(url, "focused", {"topic": "台风灾害", "strategy": "bestfirst"}, [
        "TOPICCRAWL_WEB=generated:zh-disaster?pages=3000&seed=2", "TOPICCRAWL_MAX_PAGES=40",
        f"TOPICCRAWL_OUTPUT_DIR={focused_out}", "TOPICCRAWL_PLOT_ENABLED=false"])
    discovery = _schedule(url, "dwdbrm", {"seeds": "truth:3", "pages": "40"}, [
        "TOPICCRAWL_WEB=generated:zh-realestate?pages=3000&seed=2",
        f"TOPICCRAWL_OUTPUT_DIR={discovery_out}", "TOPICCRAWL_PLOT_ENABLED=false"])
    _wait(url, {focused, discovery})

    log = next((home / "logs").rglob(f"{focused}.log")).read_text(encoding="utf-8")
    pages = _items(home, focused)
    assert len(pages) == 40, log[-3000:]
    assert all(p["strategy"] == "bestfirst" for p in pages)
    stats = json.loads((focused_out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == 40
    assert stats["finish_reason"] == "topiccrawl_max_pages"
    assert "Enabled extensions" in log and "RemoteControl" not in log

    log = next((home / "logs").rglob(f"{discovery}.log")).read_text(encoding="utf-8")
    found = _items(home, discovery)
    assert len(found) >= 40 and {p["operator"] for p in found} <= {"KS", "RS", "FC", "BC"}, log[-3000:]
    assert (discovery_out / "ranked.jsonl").stat().st_size > 0


def _schedule(url: str, spider: str, args: dict, settings: list[str]) -> str:
    job = _post(f"{url}/schedule.json", {"project": "topiccrawl", "spider": spider, **args, "setting": settings})
    assert job["status"] == "ok", job
    return job["jobid"]


def _wait(url: str, jobids: set[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished = {j["id"] for j in _get(f"{url}/listjobs.json?project=topiccrawl")["finished"]}
        if jobids <= finished:
            return
        time.sleep(1)
    pytest.fail(f"scrapyd jobs {jobids} did not finish in time")


def _items(home: Path, jobid: str) -> list[dict]:
    path = next((home / "items").rglob(f"{jobid}.jl"))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
