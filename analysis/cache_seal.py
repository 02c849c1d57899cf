"""How every cache of derived data is written crash-safely and checked on read.

A cached object is trusted only when it is whole and is the one its entry names. Each entry
records its content's size and sha256 (a **seal**); the content is written and fsynced before
the entry that names it; and a reader that finds the content missing, of another size or
digest, or of the wrong shape treats the cache as absent (the figures are read from the runs'
files again), never as an error.

Two layouts share this: a folder whose ``meta.json`` records each file's seal
(``analysis.row_cache``), and a single file ``key line, seal line, payload`` whose seal covers
the payload (the kept reports and trends, a run's trend figures, the pair verdicts).

A seal catches a torn or zeroed file (a power cut), a file of another run or entry put in its
place, and an edit; not a forger with the user's rights who recomputes it (who could as well
edit the runs themselves).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 20
Seal = list[Any]  # [size in bytes, sha256 hex]

# Files whose seal was checked in this process, by their full identity (path, device, inode,
# size, mtime_ns, ctime_ns: any write changes the ctime): a workbench reads a run's cache
# many times, and hashes it once.
_checked: dict[tuple[Any, ...], str] = {}
_checked_lock = threading.Lock()
MAX_CHECKED = 4096


def seal_of(data: bytes) -> Seal:
    return [len(data), hashlib.sha256(data).hexdigest()]


def file_seal(path: Path) -> Seal:
    """The seal of a file as it is now (raises ``OSError``)."""
    with open(path, "rb") as fh:
        size, digest = _digest_rest(fh)
    return [size, digest]


def is_seal(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and type(value[0]) is int
        and value[0] >= 0
        and isinstance(value[1], str)
        and len(value[1]) == 64
    )


def matches(path: Path, seal: Any) -> bool:
    """Whether the file at ``path`` is the one sealed by ``seal`` (its size, then its
    digest; a file checked before in this process and unchanged since is not hashed again)."""
    if not is_seal(seal):
        return False
    try:
        with open(path, "rb") as fh:
            stat = os.fstat(fh.fileno())
            if stat.st_size != seal[0]:
                return False
            identity = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns,
                        stat.st_ctime_ns)  # fmt: skip
            if _checked.get(identity) == seal[1]:
                return True
            size, digest = _digest_rest(fh)
    except OSError:
        return False
    if size != seal[0] or digest != seal[1]:
        return False
    with _checked_lock:
        if len(_checked) >= MAX_CHECKED:
            _checked.clear()
        _checked[identity] = digest
    return True


def _digest_rest(fh: IO[bytes]) -> tuple[int, str]:
    """(bytes, sha256) of what is left to read of ``fh``."""
    digest = hashlib.sha256()
    size = 0
    while chunk := fh.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def seal_line(seal: Seal) -> bytes:
    return json.dumps(seal, separators=(",", ":")).encode()


def sealed(key_line: bytes, payload: bytes) -> bytes:
    """A single-file entry: its key line, the payload's seal, the payload."""
    return key_line + b"\n" + seal_line(seal_of(payload)) + b"\n" + payload


def unsealed(data: bytes, key_line: bytes) -> bytes | None:
    """The payload of a single-file entry kept under ``key_line``, if whole (None: another
    key, no seal, or a payload that is not the one sealed)."""
    try:
        kept_key, seal_text, payload = data.split(b"\n", 2)
        seal = json.loads(seal_text)
    except ValueError:
        return None
    if kept_key != key_line or not is_seal(seal) or seal_of(payload) != seal:
        return None
    return payload


def read_sealed(path: Path, key_line: bytes) -> bytes | None:
    """``unsealed`` of the file at ``path`` (None when there is none)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return unsealed(data, key_line)


def open_sealed(path: Path, key_line: bytes) -> IO[bytes] | None:
    """The entry at ``path`` open at its payload, once the whole payload was read and found
    to be the one sealed (for a payload too big to hold in memory); None otherwise."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 — the caller reads the payload out of it
    except OSError:
        return None
    try:
        if handle.readline().rstrip(b"\n") == key_line:
            seal = json.loads(handle.readline())
            start = handle.tell()
            if is_seal(seal) and list(_digest_rest(handle)) == seal:
                handle.seek(start)
                return handle
    except (OSError, ValueError):
        pass
    handle.close()
    return None


def made_durable(paths: list[Path], folder: Path) -> None:
    """fsync each of ``paths`` (written without it), then ``folder``'s names: before an
    entry naming them is written (raises ``OSError``)."""
    from driftdesk.fileio import fsync_dir, fsync_file

    for path in paths:
        fsync_file(path)
    fsync_dir(folder)
