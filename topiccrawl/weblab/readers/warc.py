"""``warc:FILE[?labels=PATH]`` -- the ``response`` records of any WARC file (plain or gzipped,
read with warcio), served under their target URIs with their recorded status, headers and body.

The first response for a URL wins. Transfer and content encodings are decoded (warcio), so the
``Transfer-Encoding``, ``Content-Encoding`` and ``Content-Length`` headers and hop-by-hop headers
are dropped. Labels come from an optional sidecar ``FILE.labels.tsv`` (or ``labels=PATH``):
``url<TAB>label,label`` lines. Records are indexed by offset at load time and read on demand.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from topiccrawl.weblab.corpus import Corpus, CorpusError, Page, _charset
from topiccrawl.weblab.readers._links import extract_links, url_key

_DROP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
         "upgrade", "content-length", "content-encoding"}


class WarcCorpus(Corpus):
    def __init__(self, path: Path, labels_path: Path | None = None):
        self.path = path
        self.name = f"warc:{path.name}"
        self._offsets: dict[str, int] = {}
        self._urls: dict[str, str] = {}  # url_key -> URL as recorded
        try:
            with open(path, "rb") as fh:
                records = ArchiveIterator(fh)
                for record in records:
                    if record.rec_type != "response" or not record.http_headers:
                        continue
                    url = record.rec_headers.get_header("WARC-Target-URI") or ""
                    key = url_key(url)
                    if urlsplit(key).hostname and key not in self._offsets:
                        self._offsets[key] = records.get_record_offset()
                        self._urls[key] = url
        except (ArchiveLoadFailed, OSError, ValueError) as exc:
            raise CorpusError(f"warc: cannot read {path}: {exc}".splitlines()[0]) from None
        if not self._offsets:
            raise CorpusError(f"warc: {path} holds no HTTP response records")
        self._hosts = {urlsplit(k).hostname for k in self._offsets}
        self._labels: dict[str, frozenset[str]] = {}
        if labels_path is not None:
            self._read_labels(labels_path)

    def _read_labels(self, path: Path) -> None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CorpusError(f"warc: cannot read labels {path}: {exc.strerror}") from None
        for n, line in enumerate(lines, 1):
            if not line.strip() or line.startswith("#"):
                continue
            url, sep, labels = line.partition("\t")
            if not sep:
                raise CorpusError(f"warc: {path}:{n}: expected 'url<TAB>label,label'")
            self._labels[url_key(url.strip())] = frozenset(
                lab.strip() for lab in labels.split(",") if lab.strip())

    @lru_cache(maxsize=1024)  # noqa: B019 (one reader per process, kept for its life)
    def _page(self, key: str) -> Page:
        with open(self.path, "rb") as fh:
            fh.seek(self._offsets[key])
            record = next(iter(ArchiveIterator(fh)))
            body = record.content_stream().read()
            status = int(record.http_headers.get_statuscode() or 200)
            headers: dict[str, str] = {}
            for name, value in record.http_headers.headers:
                if name.lower() not in _DROP:
                    headers.setdefault(name, value)
        ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        links = extract_links(body, self._urls[key], _charset(ctype)) if "html" in ctype else []
        location = next((v for k, v in headers.items() if k.lower() == "location"), None)
        if status // 100 == 3 and location:
            links = [location]
        return Page(self._urls[key], status, headers, body, links)

    def has_host(self, host: str) -> bool:
        return host in self._hosts

    def get(self, url: str) -> Page | None:
        key = url_key(url)
        return self._page(key) if key in self._offsets else None


    def iter_urls(self) -> Iterator[str]:
        return iter(self._urls.values())

    def labels(self, url: str) -> frozenset[str]:
        return self._labels.get(url_key(url), frozenset())

    def __len__(self) -> int:
        return len(self._offsets)

    def hosts(self) -> list[str]:
        return sorted(self._hosts)


def check_warc(arg: str, params: dict[str, str]) -> tuple[Path, Path | None]:
    """The checks of :func:`open_warc` (before a crawl starts its lab): the file and its labels."""
    path = Path(arg).expanduser() if arg else None
    if path is None or not path.is_file():
        raise CorpusError(f"warc: {arg or '(no file given)'} is not a file")
    if "labels" in params:
        labels = Path(params["labels"]).expanduser()
        if not labels.is_file():
            raise CorpusError(f"warc: labels file {labels} is not a file")
        return path, labels
    sidecar = path.with_name(path.name + ".labels.tsv")
    return path, sidecar if sidecar.is_file() else None


def open_warc(arg: str, params: dict[str, str]) -> WarcCorpus:
    return WarcCorpus(*check_warc(arg, params))
