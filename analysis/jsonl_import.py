"""Generic JSON lines -> a run's ``attempts.jsonl``, mapped and written by DuckDB.

The field mapping is ``analysis.import_formats.generic_attempt``'s (task from ``--task-field`` or
``task_id``/``task``; outcome, else a boolean or 0/1 verdict, else score/reward against the
threshold, else an error code as a link error; attempt from ``attempt``/``trial``, else numbered
per task in file order), written once more as SQL so a million rows are parsed on every core
and written without a Python object per row. The Python function stays the reference: it
names the reason of every line the SQL refused, and the tests hold the two to the same output.

Memory stays bounded: DuckDB works under ``MEMORY_LIMIT`` and spills to a temporary folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis.sources import (
    MAX_ATTEMPT,
    MAX_ROW_BYTES,
    MAX_TOKENS,
    OUTCOMES,
    LineProblem,
    name_bad_records,
    without_long_lines,
)
from driftdesk.secrets import KEY_PATTERN_SOURCES, REDACTED

if TYPE_CHECKING:
    import duckdb

MEMORY_LIMIT = "320MB"
TASK_FIELDS = ("task_id", "task")
SUCCESS_FIELDS = ("success", "pass", "passed")
SCORE_FIELDS = ("score", "reward")
ATTEMPT_FIELDS = ("attempt", "trial")
COUNT_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
NUMERIC_JSON = "('UBIGINT', 'BIGINT', 'DOUBLE')"


@dataclass
class JsonlWritten:
    records: int  # rows written
    tasks: list[str]  # in order of first appearance
    repeat: int
    models: list[str]
    problems: list[LineProblem] = field(default_factory=list)  # bad lines, in line order


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _columns(task_field: str | None, success_field: str | None) -> dict[str, str]:
    """The source fields read, with the type each is read as (JSON where the type decides)."""
    columns: dict[str, str] = {}
    for name in (task_field,) if task_field else TASK_FIELDS:
        columns[name] = "VARCHAR"
    columns["outcome"] = "VARCHAR"
    for name in (success_field,) if success_field else SUCCESS_FIELDS:
        columns.setdefault(name, "JSON")
    for name in SCORE_FIELDS:
        columns.setdefault(name, "JSON")
    for name in (*ATTEMPT_FIELDS, *COUNT_FIELDS, "latency_ms"):
        columns.setdefault(name, "VARCHAR")
    for name in ("error_code", "error_message", "scenario_id", "model", "started_at", "ended_at"):
        columns.setdefault(name, "VARCHAR")
    columns.setdefault("usage", "JSON")
    return columns


def _mapping_sql(
    path: Path, task_field: str | None, success_field: str | None, threshold: float
) -> str:
    columns = _columns(task_field, success_field)
    columns_arg = "{" + ", ".join(f"{_sql_string(k)}: '{v}'" for k, v in columns.items()) + "}"
    tasks = [_quote(n) for n in ((task_field,) if task_field else TASK_FIELDS)]
    verdicts = [_quote(n) for n in ((success_field,) if success_field else SUCCESS_FIELDS)]
    outcomes = ", ".join(f"'{o}'" for o in OUTCOMES)
    counts = ",\n".join(
        f"coalesce({_quote(n)}, json_extract_string(usage, '$.{n}')) AS raw_{n}"
        for n in COUNT_FIELDS
    )
    count_digits = len(str(MAX_TOKENS))
    typed_counts = ",\n".join(
        f"CASE WHEN regexp_full_match(raw_{n}, '[0-9]{{1,{count_digits}}}') "
        f"THEN TRY_CAST(raw_{n} AS BIGINT) END AS {n}"
        for n in COUNT_FIELDS
    )
    counts_ok = " AND ".join(f"(raw_{n} IS NULL OR {n} IS NOT NULL)" for n in COUNT_FIELDS)
    attempt_digits = len(str(MAX_ATTEMPT))
    # A --success-field names where the verdict is: a record without it is not judged by its
    # score instead (it is a bad record, named by line).
    score_rule = (
        ""
        if success_field
        else f"WHEN score IS NOT NULL THEN CASE WHEN score >= {float(threshold)!r} "
        "THEN 'pass' ELSE 'fail' END"
    )
    # One row per non-blank line, in file order (``rowid`` of the table it is inserted into).
    # Casts behind a guard are TRY_CASTs: DuckDB 1.1 may evaluate both sides of an AND.
    return f"""
    SELECT task, outcome, score, attempt, error_code, error_message, scenario_id, model,
           started_at, ended_at, {", ".join(COUNT_FIELDS)}, latency_ms,
           coalesce(task IS NOT NULL AND task <> '' AND outcome IS NOT NULL
                    AND (raw_attempt IS NULL OR attempt IS NOT NULL) AND {counts_ok}
                    AND (raw_latency IS NULL OR latency_ms IS NOT NULL)
                    AND (score IS NULL OR isfinite(score)), FALSE) AS ok
    FROM (
        SELECT task, outcome_field, score,
               CASE WHEN outcome_field IN ({outcomes}) THEN outcome_field
                    WHEN verdict IS NOT NULL THEN
                        CASE WHEN json_type(verdict) = 'BOOLEAN'
                                  THEN CASE WHEN TRY_CAST(verdict AS BOOLEAN) THEN 'pass' ELSE 'fail' END
                             WHEN json_type(verdict) IN {NUMERIC_JSON}
                                  AND TRY_CAST(verdict AS DOUBLE) IN (0, 1)
                                  THEN CASE WHEN TRY_CAST(verdict AS DOUBLE) = 1 THEN 'pass'
                                            ELSE 'fail' END
                        END
                    {score_rule}
                    WHEN error_code IS NOT NULL THEN 'link_error'
               END AS outcome,
               raw_attempt,
               CASE WHEN regexp_full_match(trim(raw_attempt), '[0-9]{{1,{attempt_digits}}}')
                    AND TRY_CAST(trim(raw_attempt) AS BIGINT) <= {MAX_ATTEMPT}
                    THEN TRY_CAST(trim(raw_attempt) AS BIGINT) END AS attempt,
               error_code, error_message, scenario_id, model, started_at, ended_at,
               {typed_counts},
               raw_{", raw_".join(COUNT_FIELDS)},
               raw_latency,
               CASE WHEN isfinite(TRY_CAST(raw_latency AS DOUBLE))
                         AND TRY_CAST(raw_latency AS DOUBLE) >= 0
                    THEN TRY_CAST(raw_latency AS DOUBLE) END AS latency_ms
        FROM (
            SELECT coalesce({", ".join(tasks)}) AS task,
                   outcome AS outcome_field,
                   coalesce({", ".join(verdicts)}) AS verdict,
                   CASE WHEN json_type(coalesce(score, reward)) IN {NUMERIC_JSON}
                        THEN TRY_CAST(coalesce(score, reward) AS DOUBLE) END AS score,
                   coalesce(attempt, trial) AS raw_attempt,
                   error_code, error_message, scenario_id, model, started_at, ended_at,
                   {counts},
                   latency_ms AS raw_latency
            FROM read_json({_sql_string(str(path))}, format='newline_delimited', records=true,
                           columns={columns_arg}, ignore_errors=true)))
    """


@dataclass
class SourceScan:
    sha256: str
    has_long_lines: bool  # a line over MAX_ROW_BYTES (DuckDB might read it: the rules do not)


def scan_source(path: Path, block_size: int = 1 << 23) -> SourceScan:
    """The file's sha256, and whether any line is over ``MAX_ROW_BYTES``, in one pass of
    large blocks (hashlib and the newline search release the GIL or run at C speed)."""
    digest = hashlib.sha256()
    long_lines = False
    last_newline = -1
    position = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(block_size), b""):
            digest.update(block)
            first = block.find(b"\n")
            if first >= 0:
                # Lines inside one block are shorter than it; only one crossing a boundary
                # can be long, and it ends at the block's first newline.
                long_lines = long_lines or position + first - last_newline - 1 > MAX_ROW_BYTES
                last_newline = position + block.rfind(b"\n")
            position += len(block)
    long_lines = long_lines or position - last_newline - 1 > MAX_ROW_BYTES
    return SourceScan(digest.hexdigest(), long_lines)


def write_attempts(
    source: Path,
    target: Path | None,
    run_id: str,
    *,
    task_field: str | None,
    success_field: str | None,
    threshold: float,
    line_problem: Callable[[Any], str | None],
    number_attempts: Callable[[list[tuple[str, int | None]]], list[int]],
    scan: Future[SourceScan],
) -> JsonlWritten:
    """Map ``source`` into ``target`` (our row schema, file order kept); name the bad lines.
    Without a ``target`` nothing is written: the rows are only checked and counted (a
    zero-copy import, ``analysis.zero_copy``, reads the source through the mapping later).

    ``line_problem`` gives the reason of a parsed line the SQL refused, ``number_attempts``
    numbers the attempts of tasks that mix numbered and unnumbered rows (the importer's rule).
    """
    import duckdb

    spill = tempfile.mkdtemp(prefix="driftdesk-import-")
    con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "temp_directory": spill})
    try:
        con.execute("SET enable_progress_bar = false")
        # Without a copy only what the import itself reports is kept.
        kept = "*" if target is not None else "task, attempt, model, ok"
        _load(con, source, task_field, success_field, threshold, scan, kept)
        bad = {
            int(rowid) + 1
            for (rowid,) in con.execute("SELECT rowid FROM src WHERE NOT ok").fetchall()
        }
        problems = name_bad_records(source, bad, line_problem) if bad else []
        _number(con, number_attempts)
        written = _copy_out(con, target, run_id) if target is not None else _count_good(con)
        tasks = [
            t
            for (t,) in con.execute(
                "SELECT task FROM src WHERE ok GROUP BY task ORDER BY min(rowid)"
            ).fetchall()
        ]
        repeat_row = con.execute("SELECT max(attempt) FROM src WHERE ok").fetchone()
        models = [
            m
            for (m,) in con.execute(
                "SELECT DISTINCT model FROM src WHERE ok AND model IS NOT NULL ORDER BY model"
            ).fetchall()
        ]
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    repeat = int(repeat_row[0]) + 1 if repeat_row and repeat_row[0] is not None else 1
    return JsonlWritten(written, tasks, repeat, models, problems)


def _load(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    task_field: str | None,
    success_field: str | None,
    threshold: float,
    scan: Future[SourceScan],
    columns: str = "*",
) -> None:
    """``src``: the mapped rows, one per non-blank line, in file order. A line over the row
    limit is read as ``{}`` (a bad row, named later), from a copy made only when one exists.
    ``columns``: the mapped columns kept (the fields nobody reads are then never parsed)."""
    import duckdb

    def create(path: Path) -> None:
        con.execute("DROP TABLE IF EXISTS src")
        con.execute(
            f"CREATE TEMP TABLE src AS SELECT {columns} FROM ("
            + _mapping_sql(path, task_field, success_field, threshold)
            + ")"
        )

    try:
        create(source)
        if not scan.result().has_long_lines:
            return
    except duckdb.InvalidInputException as exc:
        if "maximum_object_size" not in str(exc):
            raise
    with without_long_lines(source) as copy:
        create(copy)


def _number(
    con: duckdb.DuckDBPyConnection,
    number_attempts: Callable[[list[tuple[str, int | None]]], list[int]],
) -> None:
    """Give every good row without an attempt its number, in place. Unnumbered rows of a task
    take 0, 1, 2… in file order; a task that also has numbered rows is numbered by the
    importer's own rule (the next number its numbered rows leave free), in Python: such tasks
    are rare. Rows keep their places (no sort of the table is ever needed)."""
    con.execute(
        """
        CREATE TEMP TABLE numbering AS
        WITH good AS (SELECT rowid AS r, task, attempt FROM src WHERE ok),
             mixed AS (SELECT task FROM good GROUP BY task
                       HAVING count(attempt) > 0 AND count(attempt) < count(*))
        SELECT r, row_number() OVER (PARTITION BY task ORDER BY r) - 1 AS n
        FROM good WHERE attempt IS NULL AND task NOT IN (SELECT task FROM mixed)
        """
    )
    mixed = con.execute(
        """
        SELECT rowid, task, attempt FROM src WHERE ok AND task IN (
            SELECT task FROM src WHERE ok GROUP BY task
            HAVING count(attempt) > 0 AND count(attempt) < count(*))
        ORDER BY rowid
        """
    ).fetchall()
    if mixed:
        numbers = number_attempts([(task, attempt) for _, task, attempt in mixed])
        con.executemany(
            "INSERT INTO numbering VALUES (?, ?)",
            [
                (rowid, n)
                for (rowid, _, attempt), n in zip(mixed, numbers, strict=True)
                if attempt is None
            ],
        )
    count = con.execute("SELECT count(*) FROM numbering").fetchone()
    if count and count[0]:
        con.execute(
            "UPDATE src SET attempt = numbering.n FROM numbering WHERE src.rowid = numbering.r"
        )


def _copy_out(con: duckdb.DuckDBPyConnection, target: Path, run_id: str) -> int:
    """Write the good rows in our schema's field order, in file order; fsync; the count."""
    con.execute(
        f"""
        COPY (
            SELECT {_sql_string(run_id)} AS run_id, s.task AS task_id, s.scenario_id,
                   s.attempt, s.outcome,
                   CASE WHEN s.outcome IN ('pass', 'fail') THEN s.outcome = 'pass' END
                       AS success,
                   s.score, s.error_code,
                   {_redacted_sql("s.error_message")}
                       AS error_message,
                   0 AS retries, NULL AS calls, s.prompt_tokens, s.completion_tokens,
                   s.total_tokens, s.latency_ms, s.started_at, s.ended_at, s.model,
                   NULL AS base_url
            FROM src s WHERE s.ok
        ) TO {_sql_string(str(target))} (FORMAT json)
        """
    )
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return _count_good(con)


def _redacted_sql(expr: str) -> str:
    """``expr`` scrubbed of key-like values in SQL: ``driftdesk.secrets.redact`` without
    named secrets, by the same patterns."""
    for source in KEY_PATTERN_SOURCES:
        replacement = _sql_string("\\1" + REDACTED)
        expr = f"regexp_replace({expr}, {_sql_string(source)}, {replacement}, 'g')"
    return expr


def _count_good(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT count(*) FROM src WHERE ok").fetchone()
    return int(row[0]) if row else 0
