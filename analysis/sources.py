"""Finding attempts files and manifests, and naming the lines DuckDB could not use.

A source given to a report is a run dir, an ``attempts.jsonl`` file, or a glob of either.
DuckDB reads the files with ``ignore_errors`` (a bad line becomes a row of NULLs, never an
abort); the few lines it could not use are then named here by line number, with the reason
``driftdesk.fileio.iter_jsonl`` would give, by streaming only the files that had any.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.layout import ATTEMPTS_FILE, MANIFEST_FILE

OUTCOMES = ("pass", "fail", "link_error", "harness_error")
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
        run_id = self.manifest.get("run_id")
        if isinstance(run_id, str) and run_id:
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
            found.append(RunSource(attempts_path, run_dir, read_manifest(run_dir)))
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
            return attempts, path
        if explicit:
            raise SourceError(f"{path}: not a run dir (no {ATTEMPTS_FILE} or {MANIFEST_FILE})")
        return attempts, None
    run_dir = path.parent if (path.parent / MANIFEST_FILE).exists() else None
    return path, run_dir


def read_manifest(run_dir: Path | None) -> dict[str, Any]:
    if run_dir is None:
        return {}
    path = run_dir / MANIFEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SourceError(f"{path}: unreadable manifest: {exc}") from exc
    if not isinstance(data, dict):
        raise SourceError(f"{path}: manifest is not a JSON object")
    return data


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
    """Why a parsed line is not a usable attempt row (mirrors the checks done in SQL)."""
    if not isinstance(obj, dict):
        return f"expected an object, got {type(obj).__name__}"
    task_id = obj.get("task_id")
    if task_id is None or task_id == "":
        return "missing task_id"
    attempt = obj.get("attempt")
    if isinstance(attempt, bool) or not (
        (isinstance(attempt, int) and attempt >= 0)
        or (isinstance(attempt, str) and attempt.strip().isdigit())
    ):
        return f"attempt is not an integer: {attempt!r}"
    outcome = obj.get("outcome")
    if outcome not in OUTCOMES:
        return f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}"
    return None


def name_bad_records(path: Path, ordinals: set[int]) -> list[LineProblem]:
    """Line numbers and reasons for the ``ordinals``-th non-blank lines of ``path``.

    DuckDB numbers the records it reads (blank lines skipped), so the k-th non-blank line is
    record k. Streams the file; only called for files that had bad records.
    """
    problems: list[LineProblem] = []
    torn_possible = not ends_with_newline(path)
    ordinal = 0
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if is_blank(raw):
                continue
            ordinal += 1
            if ordinal not in ordinals:
                continue
            torn = torn_possible and not raw.endswith(b"\n")
            try:
                reason = row_problem(json.loads(raw)) or "rejected by the reader (field types)"
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                reason = str(exc)
            problems.append(LineProblem(number, reason, torn=torn))
    return problems
