"""Zero-copy imports: a run dir whose rows are read from the user's own JSONL file.

``driftdesk import X.jsonl`` (generic JSON lines, without ``--copy``) checks every line once
and writes only the manifest: the source's absolute path, size, mtime, a fingerprint (sha256
of its size and first and last MiB), its full sha256, and the field mapping the import used.
Every reader of the run's rows (report, compare, export, the TUI's report and drill-down,
``--only-failed``) then maps the source through that same SQL (``analysis.jsonl_import``), so
the rows are those a ``--copy`` import would have written, without writing them.

The run is only as durable as the source: at each read the file is checked (its size and
fingerprint first, then its full sha256, hashed while DuckDB reads it: a same-size edit in the
middle of a file over 2 MiB with its mtime put back changes nothing else), and a
missing, grown, shrunk or edited source is refused with an error naming it and the way out
(put it back, ``driftdesk import NEW --relink RUN_DIR`` after a move, or a new import).
Bad lines were named by number at import time; they are recorded in the manifest and skipped
silently on every read, as a copied import never wrote them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis.sources import SourceError

if TYPE_CHECKING:
    import duckdb

    from driftdesk.analysis.sources import RunSource

MANIFEST_KEY = "zero_copy"  # under the manifest's ``imported_from``
FINGERPRINT_SPAN = 1 << 20  # bytes hashed at each end of the file
MAX_RECORDED_BAD_LINES = 100  # the manifest names the first ones; the count is always kept


class SourceChangedError(SourceError):
    """A zero-copy run whose source file is missing or no longer the one imported."""


@dataclass(frozen=True)
class LinkedSource:
    """The source file a zero-copy run reads, as recorded at import, and how it is mapped."""

    path: Path
    size: int
    mtime_ns: int
    fingerprint: str
    sha256: str
    has_long_lines: bool
    task_field: str | None
    success_field: str | None
    score_threshold: float

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "fingerprint": self.fingerprint,
            "sha256": self.sha256,
            "has_long_lines": self.has_long_lines,
            "mapping": {
                "task_field": self.task_field,
                "success_field": self.success_field,
                "score_threshold": self.score_threshold,
            },
        }


def fingerprint(path: Path, size: int) -> str:
    """sha256 of the size and the first and last MiB: cheap, and any append, truncation or
    edit near either end changes it (the mtime catches the rest)."""
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        digest.update(fh.read(FINGERPRINT_SPAN))
        if size > FINGERPRINT_SPAN:
            fh.seek(max(FINGERPRINT_SPAN, size - FINGERPRINT_SPAN))
            digest.update(fh.read(FINGERPRINT_SPAN))
    return digest.hexdigest()


def link(
    path: Path,
    *,
    sha256: str,
    has_long_lines: bool,
    task_field: str | None,
    success_field: str | None,
    score_threshold: float,
) -> LinkedSource:
    path = path.resolve()
    stat = path.stat()
    return LinkedSource(
        path,
        stat.st_size,
        stat.st_mtime_ns,
        fingerprint(path, stat.st_size),
        sha256,
        has_long_lines,
        task_field,
        success_field,
        score_threshold,
    )


def linked_source(manifest: dict[str, Any]) -> LinkedSource | None:
    """The source a run's manifest links to, or None for a run that holds its own rows."""
    imported = manifest.get("imported_from")
    record = imported.get(MANIFEST_KEY) if isinstance(imported, dict) else None
    if not isinstance(record, dict):
        return None
    mapping = record.get("mapping")
    if not isinstance(mapping, dict):
        mapping = {}
    try:
        return LinkedSource(
            Path(str(record["path"])),
            int(record["size"]),
            int(record["mtime_ns"]),
            str(record["fingerprint"]),
            str(record["sha256"]),
            bool(record.get("has_long_lines")),
            mapping.get("task_field"),
            mapping.get("success_field"),
            float(mapping.get("score_threshold", 1.0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"unreadable zero-copy record in the manifest: {exc}") from exc


def rows_path(run: RunSource) -> Path:
    """The file a run's rows are read from: its attempts file, or a zero-copy run's source."""
    linked = linked_source(run.manifest)
    return run.attempts_path if linked is None else linked.path


def check(linked: LinkedSource, run_name: str, *, content: bool = True) -> None:
    """Raise ``SourceChangedError`` unless the source is still the file that was imported.

    Size and fingerprint are checked first (cheap); then, with ``content``, the full sha256:
    a same-size edit in the middle of a file over 2 MiB, its mtime put back (``touch -r``),
    changes neither the size, the fingerprint nor the mtime."""
    try:
        stat = linked.path.stat()
    except OSError as exc:
        reason = "is missing" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc})"
        raise _changed(linked, run_name, reason) from None
    if stat.st_size != linked.size:
        raise _changed(
            linked, run_name, f"is now {stat.st_size:,} bytes, not the {linked.size:,} imported"
        )
    if fingerprint(linked.path, stat.st_size) != linked.fingerprint:
        raise _changed(
            linked, run_name, "has changed since it was imported (its first or last MiB differs)"
        )
    if content:
        check_content(linked, run_name, _sha256(linked.path))


def check_content(linked: LinkedSource, run_name: str, sha256: str) -> None:
    """Raise ``SourceChangedError`` unless ``sha256`` (of the source now) is the imported one."""
    if sha256 != linked.sha256:
        raise _changed(linked, run_name, "has changed since it was imported (its content differs)")


def _changed(linked: LinkedSource, run_name: str, what: str) -> SourceChangedError:
    fix = (
        f"Put the original file back at {linked.path}; if you moved it, run "
        f"`driftdesk import NEW_PATH --relink {run_name}`; if it changed, import it again "
        "(add --copy for a run dir that keeps its own rows)."
    )
    return SourceChangedError(
        f"{run_name}: this zero-copy run reads its rows from {linked.path}, which {what}; "
        f"nothing was read. {fix}"
    )


def _sha256(path: Path) -> str:
    from driftdesk.analysis.jsonl_import import scan_source

    return scan_source(path).sha256


def load(
    con: duckdb.DuckDBPyConnection,
    run: RunSource,
    linked: LinkedSource,
    f: int,
    number_attempts: Callable[[list[tuple[str, int | None]]], list[int]],
) -> int:
    """Append a zero-copy run's good rows to ``attempts`` (``analysis.attempt_table``) as run
    ``f``, in file order, mapped and numbered exactly as ``--copy`` would write them; the
    count. The import's bad lines are left out (named at import, listed in the manifest).
    ``number_attempts`` is the importer's rule (``analysis.import_formats.number_rows``)."""
    from concurrent.futures import ThreadPoolExecutor

    from driftdesk.analysis import jsonl_import

    name = str(run.run_dir or run.attempts_path)
    check(linked, name, content=False)  # the cheap checks, before anything is read
    scan: Future[jsonl_import.SourceScan] = Future()
    scan.set_result(jsonl_import.SourceScan(linked.sha256, linked.has_long_lines))
    # The full content hash runs beside DuckDB's read of the same file (hashlib releases the
    # GIL): the rows loaded are used only once it matches the one recorded at import.
    with ThreadPoolExecutor(max_workers=1) as pool:
        hashed = pool.submit(_sha256, linked.path)
        try:
            jsonl_import._load(
                con,
                linked.path,
                linked.task_field,
                linked.success_field,
                linked.score_threshold,
                scan,
                "task, scenario_id, attempt, outcome, error_code, prompt_tokens, "
                "completion_tokens, total_tokens, latency_ms, model, score, ok",  # what INSERT reads
            )
            check_content(linked, name, hashed.result())
        except BaseException:
            con.execute("DROP TABLE IF EXISTS src")
            raise
    try:
        jsonl_import._number(con, number_attempts)
        row = con.execute(
            """
            INSERT INTO attempts
            SELECT $f, task, scenario_id, attempt, outcome, error_code, prompt_tokens,
                   completion_tokens, coalesce(total_tokens, prompt_tokens + completion_tokens),
                   latency_ms, model, 0, NULL, NULL, score, TRUE
            FROM src WHERE ok
            """,
            {"f": f},
        ).fetchone()
    finally:
        con.execute("DROP TABLE IF EXISTS src")
        con.execute("DROP TABLE IF EXISTS numbering")
    return int(row[0]) if row else 0


def relink(run_dir: Path, new_path: Path) -> LinkedSource:
    """Point a zero-copy run at its source's new place, after a move. The file there must
    hold exactly the content imported (size and full sha256); the manifest is rewritten
    atomically, and nothing changes when the check fails."""
    from driftdesk.analysis.sources import manifest_or_empty
    from driftdesk.rundir import write_manifest

    manifest = manifest_or_empty(run_dir)
    linked = linked_source(manifest)
    if linked is None:
        raise SourceError(f"{run_dir}: not a zero-copy import (its rows are its own)")
    new_path = new_path.resolve()
    try:
        size = new_path.stat().st_size
    except OSError as exc:
        raise SourceError(f"{new_path}: cannot be read ({exc}); nothing was changed") from None
    if size != linked.size or _sha256(new_path) != linked.sha256:
        raise SourceError(
            f"{new_path} is not the file {run_dir} was imported from (different content); "
            "nothing was changed. Import it as a new run instead."
        )
    moved = link(
        new_path,
        sha256=linked.sha256,
        has_long_lines=linked.has_long_lines,
        task_field=linked.task_field,
        success_field=linked.success_field,
        score_threshold=linked.score_threshold,
    )
    imported = manifest["imported_from"]
    imported[MANIFEST_KEY] = moved.to_json()
    imported["path"] = str(new_path)
    if isinstance(manifest.get("suite"), dict):
        manifest["suite"]["path"] = str(new_path)
    write_manifest(run_dir, manifest, mode=0o644)
    return moved
