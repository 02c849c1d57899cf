"""Durable file primitives shared by every core.

- ``atomic_write_text``: temp file in the same folder, fsync, rename; keeps the mode of the file
  it replaces (new files get 0600), so a crash leaves either the old or the new file, never half.
- ``JsonlAppender``: one JSON object per line, flushed and fsynced per row, so a ``kill -9`` can at
  worst leave one torn last line.
- ``read_jsonl``: reads such a file, skipping malformed lines and reporting each by line number;
  a torn last line (no trailing newline) is reported as such.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NEW_FILE_MODE = 0o600


def atomic_write_bytes(
    path: Path | str,
    data: bytes | memoryview,  # a view: a slice of a bigger buffer written without a copy
    mode: int | None = None,
    before_replace: Callable[[], None] | None = None,
    *,
    durable: bool = True,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    The mode is, in order: ``mode`` if given, the existing file's mode, else 0600.
    ``before_replace`` runs once the new bytes are on disk, just before the rename; raising
    there leaves ``path`` as it was (a last check that nobody changed it meanwhile).
    ``durable=False``: no fsync, for a cache that is derived and checked when read (a crash
    may leave it empty, never half-written; a few ms less per file).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = NEW_FILE_MODE
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp_name, mode)
        if before_replace is not None:
            before_replace()
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    if durable:
        _fsync_dir(path.parent)


def atomic_write_text(
    path: Path | str, text: str, mode: int | None = None, *, durable: bool = True
) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode, durable=durable)


def atomic_write_json(path: Path | str, obj: Any, mode: int | None = None) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n", mode)


def fsync_file(path: Path | str) -> None:
    """Make a file written without fsync durable (a cache's content, before the entry that
    names it is written); raises ``OSError``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make the names created in ``directory`` durable (best effort)."""
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


class JsonlAppender:
    """Appends one JSON object per line; each ``append`` is flushed and fsynced.

    If the file ends in a torn line (a previous writer was killed mid-write), a newline is
    written first so the next row starts on a line of its own and stays parseable.
    """

    def __init__(self, path: Path | str, fsync: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._fd = os.open(self.path, flags, NEW_FILE_MODE)
        size = os.fstat(self._fd).st_size
        if size:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    os.write(self._fd, b"\n")

    def append(self, row: dict[str, Any]) -> None:
        """Append one row, or raise ``OSError`` with the file as it was: a write that fails
        or lands only in part (a full disk, a quota, a file size limit) is cut off again, so
        the file never ends in a torn row this process wrote."""
        data = (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        start = os.fstat(self._fd).st_size
        try:
            # One write() per row on an O_APPEND fd: rows never interleave.
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(
                    errno.ENOSPC, f"short write: {written} of {len(data)} bytes", str(self.path)
                )
            if self._fsync:
                os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise

    def sync(self) -> None:
        """fsync what was appended (for writers that batch rows with ``fsync=False``)."""
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class JsonlProblem:
    line_number: int
    message: str
    torn: bool = False  # the last line, without a newline: a writer was killed mid-row

    def __str__(self) -> str:
        kind = "torn last line" if self.torn else "malformed line"
        return f"line {self.line_number}: {kind}: {self.message}"


@dataclass
class JsonlRead:
    rows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[JsonlProblem] = field(default_factory=list)


def iter_jsonl(
    path: Path | str, problems: list[JsonlProblem]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)`` for every good object line; append problems for the rest."""
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    last_index = len(lines) - 1
    for index, raw in enumerate(lines):
        number = index + 1
        if not raw.strip():
            continue
        torn = index == last_index and not ends_with_newline
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(JsonlProblem(number, str(exc), torn=torn))
            continue
        if not isinstance(obj, dict):
            problems.append(JsonlProblem(number, f"expected an object, got {type(obj).__name__}"))
            continue
        yield number, obj


def read_jsonl(path: Path | str) -> JsonlRead:
    result = JsonlRead()
    result.rows = [row for _, row in iter_jsonl(path, result.problems)]
    return result
