"""The cache directory of third-party corpora: the publishers' archives are extracted there once,
safely, and located together with already-extracted layouts."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from topiccrawl.weblab.corpus import CorpusError


def cache_dir() -> Path:
    """``$TOPICCRAWL_CACHE`` or ``~/.cache/topiccrawl`` (never inside the repository)."""
    env = os.environ.get("TOPICCRAWL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "topiccrawl"


def extract_once(archive: Path) -> Path:
    """Extract a tarball into ``cache_dir()/extract/<name>-<digest>/`` the first time and return
    that directory. The digest covers the archive's path, size and mtime, so a changed archive is
    extracted again. Extraction uses tarfile's ``data`` filter (no absolute paths, no ``..``, no
    links leaving the tree, no devices) into a temporary directory that is renamed into place, so
    an interrupted or concurrent extraction never leaves a half-filled directory behind."""
    st = archive.stat()
    digest = hashlib.sha1(f"{archive.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    stem = archive.name.split(".")[0]
    dest = cache_dir() / "extract" / f"{stem}-{digest[:12]}"
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}-", dir=dest.parent))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        os.rename(tmp, dest)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if dest.is_dir():  # another process won the race
            return dest
        raise CorpusError(f"cannot extract {archive} into {dest.parent}: {exc}") from None
    except (tarfile.TarError, EOFError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CorpusError(f"cannot extract {archive}: {exc}") from None
    return dest


def find_layout(directory: str, parts: list[str], archives: list[str], what: str) -> list[Path]:
    """Locate each of ``parts`` (relative paths) in ``directory``, its ``data/`` subfolder, or the
    cached extraction (same two places) of the publisher's archives found in ``directory``.
    Raises :class:`CorpusError` naming the path when the directory or a part is missing."""
    root = _root(directory, what)
    bases = [root, root / "data"]
    if not all(any((b / p).exists() for b in bases) for p in parts):
        for name in archives:
            if (root / name).is_file():
                ext = extract_once(root / name)
                bases += [ext, ext / "data"]
    found = []
    for part in parts:
        hit = next((b / part for b in bases if (b / part).exists()), None)
        if hit is None:
            raise _no_part(what, root, part, archives)
        found.append(hit)
    return found


def check_layout(directory: str, parts: list[str], archives: list[str], what: str) -> list[Path | None]:
    """:func:`find_layout`'s checks without extracting an archive (before a crawl starts its lab):
    each part's path, or None where only an archive in ``directory`` can hold it."""
    root = _root(directory, what)
    archived = any((root / name).is_file() for name in archives)
    found: list[Path | None] = []
    for part in parts:
        hit = next((b / part for b in (root, root / "data") if (b / part).exists()), None)
        if hit is None and not archived:
            raise _no_part(what, root, part, archives)
        found.append(hit)
    return found


def _root(directory: str, what: str) -> Path:
    if not directory:
        raise CorpusError(f"{what}: no directory given (e.g. {what}:/path/to/folder)")
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise CorpusError(f"{what}: {root} is not a directory")
    return root


def _no_part(what: str, root: Path, part: str, archives: list[str]) -> CorpusError:
    return CorpusError(f"{what}: {root} has no {part} (nor data/{part}, nor the archive "
                       f"{' or '.join(archives)} that holds it)")
