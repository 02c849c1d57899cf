"""Drill-down: every row of one task in a run, with the paths of its logs and transcripts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from driftdesk.analysis.sources import (
    ATTEMPTS_FILE,
    SourceError,
    lines_containing,
    manifest_or_empty,
    row_problem,
)
from driftdesk.rundir import attempt_folder, result_file


def task_attempts(run_dir: Path | str, task_id: str) -> list[dict[str, Any]]:
    """Rows of ``task_id`` in file order, each with ``line`` (1-based), ``superseded`` (a later
    row exists for the same slot), ``log_path``, ``transcript_path`` and ``result_path`` (the
    command agent's result file) — str, or None when the file does not exist. Malformed lines
    are skipped (the report names them)."""
    from driftdesk.analysis import zero_copy
    from driftdesk.analysis.import_formats import generic_task_rows

    run_dir = Path(run_dir)
    path = run_dir / ATTEMPTS_FILE
    try:
        manifest = manifest_or_empty(run_dir)
    except SourceError:  # an unreadable manifest: the rows are still this run's own file
        manifest = {}
    linked = zero_copy.linked_source(manifest)
    rows: list[dict[str, Any]] = []
    if linked is not None:  # a zero-copy import: "line" is the source file's line
        run_id = str(manifest.get("run_id") or run_dir.name)
        zero_copy.check(linked, str(run_dir))
        for number, row in generic_task_rows(
            list(_lines_mentioning(linked.path, task_id)),
            task_id,
            run_id=run_id,
            task_field=linked.task_field,
            success_field=linked.success_field,
            threshold=linked.score_threshold,
        ):
            row.setdefault("model_mismatches", 0)
            row.setdefault("model_latency_ms", None)
            rows.append({**row, "line": number})
    elif not path.exists():
        return []
    else:
        rows = _rows_of_task(path, task_id)
    last_line: dict[int, int] = {}
    for row in rows:
        last_line[row["attempt"]] = row["line"]
    folder = attempt_folder(run_dir, task_id)
    for row in rows:
        row["superseded"] = last_line[row["attempt"]] != row["line"]
        log = folder / f"{row['attempt']}.log"
        transcript = folder / f"{row['attempt']}.transcript.json"
        row["log_path"] = str(log) if log.exists() else None
        row["transcript_path"] = str(transcript) if transcript.exists() else None
        result = result_file(run_dir, row)
        row["result_path"] = str(result) if result is not None else None
    return rows


def _rows_of_task(path: Path, task_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number, row in _lines_mentioning(path, task_id):
        if row_problem(row) is not None or str(row["task_id"]) != task_id:
            continue
        # Fields newer writers add: absent in older rows, read as 0 / null.
        row.setdefault("retries", 0)
        row.setdefault("model_mismatches", 0)
        row.setdefault("model_latency_ms", None)
        rows.append({**row, "attempt": int(row["attempt"]), "line": number})
    return rows


def _lines_mentioning(path: Path, task_id: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed line) of the lines of ``path`` that mention ``task_id``: found by
    a byte search, so only those are parsed; a line that does not parse is skipped."""
    needle = json.dumps(task_id, ensure_ascii=False)[1:-1].encode("utf-8")
    with open(path, "rb") as fh:
        for number, raw in lines_containing(fh, needle):
            try:
                yield number, json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
