"""Finding attempts files and manifests, and naming the lines DuckDB could not use.

A source given to a report is a run dir, an ``attempts.jsonl`` file, or a glob of either.
DuckDB reads the files with ``ignore_errors`` (a bad line becomes a row of NULLs, never an
abort); the few lines it could not use are then named here by line number, with the reason
``driftdesk.fileio.iter_jsonl`` would give, by streaming only the files that had any.
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from driftdesk.rundir import (
    ATTEMPTS_FILE,
    MANIFEST_FILE,
    ManifestNotObject,
    ManifestUnparsable,
    RunManifest,
    read_manifest,
)

OUTCOMES = ("pass", "fail", "link_error", "harness_error")
# The limits a row must keep (checked at import and at read, by the same rules): beyond them a
# line is named and skipped, never a crash or an overflow in a sum.
MAX_ROW_BYTES = 16 * 2**20  # DuckDB's default maximum_object_size
MAX_ATTEMPT = 999_999
MAX_TOKENS = 10**12 - 1  # per field and row: no sum over rows can overflow a 64-bit integer
# Whole numbers 0..MAX_TOKENS (a JSON integer or a string of digits), or null/absent.
INT_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens", "retries", "model_mismatches")
# Finite numbers ≥ 0 (or a string of one), or null/absent.
FLOAT_FIELDS = ("latency_ms", "model_latency_ms")
JSON_WHITESPACE = b" \t\r\n"


class SourceError(ValueError):
    """A source that names no attempts file (missing path, empty glob, unreadable manifest)."""


@dataclass(frozen=True)
class RunSource:
    """One run: its attempts file and, when it lives in a run dir, that dir's manifest."""

    attempts_path: Path
    run_dir: Path | None
    manifest: dict[str, Any]

    @property
    def run_id(self) -> str:
        run_id = RunManifest.from_json(self.manifest).run_id
        if run_id is not None:
            return run_id
        if self.run_dir is not None:
            return self.run_dir.resolve().name
        path = self.attempts_path.resolve()
        return path.parent.name if path.stem == "attempts" else path.stem


def resolve_sources(sources: Sequence[Path | str]) -> list[RunSource]:
    """Expand run dirs, attempts files and globs, in order, without duplicates."""
    found: list[RunSource] = []
    seen: set[Path] = set()
    for source in sources:
        for attempts_path, run_dir in _expand(source):
            key = attempts_path.resolve()
            if key in seen:
                continue
            seen.add(key)
            found.append(RunSource(attempts_path, run_dir, manifest_or_empty(run_dir)))
    return found


def _expand(source: Path | str) -> Iterable[tuple[Path, Path | None]]:
    text = os.path.expanduser(str(source))
    path = Path(text)
    if path.exists():
        return [_one(path, explicit=True)]
    if glob.has_magic(text):
        matches = sorted(Path(m) for m in glob.glob(text))
        pairs = [_one(m, explicit=False) for m in matches]
        usable = [p for p in pairs if p[0].exists() or p[1] is not None]
        if not usable:
            raise SourceError(f"{source}: the pattern matches no run dir or attempts file")
        return usable
    raise SourceError(f"{source}: no such run dir or attempts file")


def _one(path: Path, *, explicit: bool) -> tuple[Path, Path | None]:
    if path.is_dir():
        attempts = path / ATTEMPTS_FILE
        if attempts.exists() or (path / MANIFEST_FILE).exists():
            # A run that has started but finished no attempt yet is an empty run, not an error.
            _refuse_non_file(attempts)
            return attempts, path
        if explicit:
            raise SourceError(f"{path}: not a run dir (no {ATTEMPTS_FILE} or {MANIFEST_FILE})")
        return attempts, None
    run_dir = path.parent if (path.parent / MANIFEST_FILE).exists() else None
    return path, run_dir


def _refuse_non_file(attempts: Path) -> None:
    """A run's attempts file that is there but cannot be one (a directory, a dangling
    symlink) is bad input named in one line, not a DuckDB error with SQL in it. Absent is an
    empty run; a pipe or a device is read as the user asked."""
    if attempts.is_dir():
        raise SourceError(f"{attempts}: not a file (a directory)")
    if attempts.is_symlink() and not attempts.exists():
        raise SourceError(f"{attempts}: a symlink to {os.readlink(attempts)}, which is not there")


def manifest_or_empty(run_dir: Path | None) -> dict[str, Any]:
    """The manifest of ``run_dir`` (``driftdesk.rundir.read_manifest``), as analysis reads it:
    empty for no run dir or no manifest, a ``SourceError`` when it cannot be read."""
    if run_dir is None:
        return {}
    path = run_dir / MANIFEST_FILE
    try:
        return read_manifest(run_dir)
    except ManifestNotObject as exc:
        raise SourceError(f"{path}: manifest is not a JSON object") from exc
    except ManifestUnparsable as exc:
        raise SourceError(f"{path}: unreadable manifest: {exc.cause}") from exc
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SourceError(f"{path}: unreadable manifest: {exc}") from exc


def ends_with_newline(path: Path) -> bool:
    """True for an empty file or one whose last byte is a newline (no torn last line)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return True
    if size == 0:
        return True
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) == b"\n"


def is_blank(raw: bytes) -> bool:
    """A line DuckDB's JSON reader skips: nothing but JSON whitespace."""
    return not raw.strip(JSON_WHITESPACE)


@dataclass
class LineProblem:
    line: int
    reason: str
    torn: bool = False


def row_problem(obj: Any) -> str | None:
    """Why a parsed line is not a usable attempt row: the row rules, the same as the SQL in
    ``analysis.attempt_table`` applies at read and ``analysis.imports`` before it writes."""
    if not isinstance(obj, dict):
        return f"expected an object, got {type(obj).__name__}"
    task_id = obj.get("task_id")
    if task_id is None or task_id == "":
        return "missing task_id"
    problem = field_problem("attempt", obj.get("attempt"))
    if problem:
        return problem
    outcome = obj.get("outcome")
    if outcome not in OUTCOMES:
        return f"outcome {_shown(outcome)} is not one of {', '.join(OUTCOMES)}"
    for name in (*INT_FIELDS, *FLOAT_FIELDS, "score"):
        problem = field_problem(name, obj.get(name))
        if problem:
            return problem
    return None


def field_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the row field ``name`` (``attempt``, a count or a duration)."""
    if name == "attempt":
        if _whole_number(value, MAX_ATTEMPT, strip=True):
            return None
        if _whole_number(value, None, strip=True):
            return f"attempt {value} is over {MAX_ATTEMPT:,}"
        return f"attempt is not an integer: {_shown(value)}"
    if value is None:
        return None
    if name in INT_FIELDS and not _whole_number(value, MAX_TOKENS):
        if _whole_number(value, None):
            return f"{name} {value} is over {MAX_TOKENS:,}"
        return f"{name} is not a whole number ≥ 0: {_shown(value)}"
    if name in FLOAT_FIELDS and not _finite_non_negative(value):
        return f"{name} is not a finite number ≥ 0: {_shown(value)}"
    if name == "score" and not _finite(value):
        return f"score is not a finite number: {_shown(value)}"
    return None


def _whole_number(value: Any, limit: int | None, *, strip: bool = False) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        text = value.strip() if strip else value
        if not (text.isascii() and text.isdigit()):
            return False
        value = int(text)
    return isinstance(value, int) and value >= 0 and (limit is None or value <= limit)


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    try:
        return math.isfinite(float(value))
    except (ValueError, OverflowError):
        return False


def _finite_non_negative(value: Any) -> bool:
    return _finite(value) and float(value) >= 0


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def iter_bounded_lines(fh: BinaryIO) -> Iterator[tuple[bytes, int, bool]]:
    """(line, its length, whether it ends with a newline) for each line of ``fh``; a line over
    ``MAX_ROW_BYTES`` is given as ``b""`` with its true length, never held in memory whole."""
    while True:
        raw = fh.readline(MAX_ROW_BYTES + 1)
        if not raw:
            return
        if len(raw) <= MAX_ROW_BYTES or raw.endswith(b"\n"):
            yield raw, len(raw), raw.endswith(b"\n")
            continue
        length, newline = len(raw), False
        while True:
            rest = fh.readline(1 << 20)
            length += len(rest)
            if not rest or rest.endswith(b"\n"):
                newline = rest.endswith(b"\n")
                break
        yield b"", length, newline


SEARCH_BLOCK = 1 << 24


def lines_containing(
    fh: BinaryIO, needle: bytes, *, block: int = SEARCH_BLOCK
) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each line of ``fh`` that contains ``needle``, in order; lines
    ``iter_bounded_lines`` would give as ``b""`` (over ``MAX_ROW_BYTES``) are left out, as they
    would never match there. The same lines as a loop over ``iter_bounded_lines``, found by
    searching blocks of the file at C speed: a drill-down into a task of a 1M-row run reads
    50 lines of a million, and looking at every line in Python took about a second."""
    number = 1  # the line number of the first line in ``data``
    data = b""
    skipping = False  # in a line over the limit: drop bytes up to its newline
    while True:
        chunk = fh.read(block)
        if skipping:
            newline = chunk.find(b"\n")
            if newline == -1:
                if not chunk:
                    return
                continue
            chunk, number, skipping = chunk[newline + 1 :], number + 1, False
            if not chunk:
                continue
        data = data + chunk if data else chunk
        complete = data.rfind(b"\n") + 1 if chunk else len(data)  # at the end: the last line
        counted = 0
        found = data.find(needle, 0, complete)
        while found != -1:
            start = data.rfind(b"\n", 0, found) + 1
            end = data.find(b"\n", found, complete)
            end = complete if end == -1 else end + 1
            number += data.count(b"\n", counted, start)
            counted = start
            length = end - start - (data[end - 1 : end] == b"\n")
            if length <= MAX_ROW_BYTES:
                yield number, data[start:end]
            found = data.find(needle, end, complete)
        number += data.count(b"\n", counted, complete)
        data = data[complete:]
        if not chunk:
            return
        if len(data) > MAX_ROW_BYTES:  # an unfinished line already over the limit
            data, skipping = b"", True


def long_line_problem(length: int) -> str:
    return f"the line is {length:,} bytes; a row may be at most {MAX_ROW_BYTES:,} bytes"


@contextlib.contextmanager
def without_long_lines(path: Path) -> Iterator[Path]:
    """A temporary copy of ``path`` with every line over ``MAX_ROW_BYTES`` replaced by ``{}``
    (line numbers and record numbers unchanged), for a reader that cannot skip such a line."""
    fd, name = tempfile.mkstemp(prefix="driftdesk-rows-", suffix=".jsonl")
    try:
        with open(path, "rb") as src, os.fdopen(fd, "wb") as out:
            for raw, length, newline in iter_bounded_lines(src):
                if length > MAX_ROW_BYTES:
                    out.write(b"{}\n" if newline else b"{}")
                else:
                    out.write(raw)
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def name_bad_records(
    path: Path, ordinals: set[int], problem: Callable[[Any], str | None] = row_problem
) -> list[LineProblem]:
    """Line numbers and reasons for the ``ordinals``-th non-blank lines of ``path``.

    DuckDB numbers the records it reads (blank lines skipped), so the k-th non-blank line is
    record k. Streams the file, skipping whole blocks without a wanted record at C speed; only
    called for files that had bad records.
    """
    problems: list[LineProblem] = []
    wanted = sorted(ordinals)
    number = ordinal = 0
    with open(path, "rb") as fh:
        while wanted:
            lines, records = _skip_records(fh, wanted[0] - ordinal)
            number, ordinal = number + lines, ordinal + records
            for raw, length, newline in iter_bounded_lines(fh):
                number += 1
                if length <= MAX_ROW_BYTES and is_blank(raw):
                    continue
                ordinal += 1
                if ordinal == wanted[0]:
                    problems.append(_line_problem(number, raw, length, newline, problem))
                    wanted.pop(0)
                    break
            else:
                break  # the file ended
    return problems


SKIP_BLOCK = 1 << 23
_BLANK_LINE = re.compile(rb"^[ \t\r]*\n", re.MULTILINE)  # ``is_blank``'s lines, in a block
_LINE_STARTS_BLANK = re.compile(rb"\n[ \t\r\n]")


def _skip_records(fh: BinaryIO, before: int) -> tuple[int, int]:
    """Move ``fh`` (at the start of a line) past the whole blocks of lines that hold fewer than
    ``before`` records; (lines, records) skipped. Stops at a block holding record ``before``,
    at the end of the file, or at a line longer than a block (left to the line reader)."""
    lines = records = 0
    while True:
        start = fh.tell()
        block = fh.read(SKIP_BLOCK)
        whole = block.rfind(b"\n") + 1  # the complete lines of the block: block[:whole]
        count = block.count(b"\n", 0, whole)
        blanks = _blank_lines(block, whole)
        if not whole or records + count - blanks >= before:
            fh.seek(start)
            return lines, records
        lines, records = lines + count, records + count - blanks
        fh.seek(start + whole)


def _blank_lines(block: bytes, end: int) -> int:
    """How many lines of ``block[:end]`` (whole lines) are blank; first one search for a line
    starting with whitespace (literal-led, fast), as the line regex would try every byte."""
    if block[:1] not in (b" ", b"\t", b"\r", b"\n") and not _LINE_STARTS_BLANK.search(
        block, 0, end
    ):
        return 0
    return len(_BLANK_LINE.findall(block, 0, end))


def _line_problem(
    number: int, raw: bytes, length: int, newline: bool, problem: Callable[[Any], str | None]
) -> LineProblem:
    torn = not newline  # only the last line of a file can lack its newline
    if length > MAX_ROW_BYTES:
        return LineProblem(number, long_line_problem(length), torn=torn)
    try:
        reason = problem(json.loads(raw)) or "rejected by the reader"
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = str(exc)
    return LineProblem(number, reason, torn=torn)
