"""The rows of attempts files in one DuckDB table, and the per-task SQL over it.

Shared by the cold report (``analysis.report``) and the live view (``analysis.live``), so
both give the same numbers from the same SQL.

Why a table: "the last row of a slot wins" and "the newest error kinds" need file order.
``read_json ... WITH ORDINALITY`` numbers rows with a streaming window that runs the whole scan
on one thread; inserting the scan into a table keeps file order in ``rowid`` (insertion order
is preserved) while the JSON is parsed on every core, and the table is then aggregated many
times over at memory speed.

Duplicate slots are rare (a resume with ``--retry-link-errors``), so the aggregates run on the
rows directly; only tasks a cheap per-task test cannot clear of duplicates are deduplicated
slot by slot, and the rows they supersede are excluded by ``rowid``.

The live view adds rows a batch at a time. A task whose new rows only fill slots it did not
have (what a running run writes) has its new rows aggregated alone and merged into its
aggregates (counts and exact sums added, deviations combined from counts); only a task with a
row for a slot already written is aggregated again from all its rows.

It stays whole (past 600 lines): the table's columns, its loading and every query over it
(cold, incremental, deduplicating, merging) are bound to one column list and one ``rowid``
order; cut apart, each half would need the other's SQL fragments.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis.sources import (
    FLOAT_FIELDS,
    INT_FIELDS,
    MAX_ATTEMPT,
    MAX_TOKENS,
    OUTCOMES,
    without_long_lines,
)

if TYPE_CHECKING:
    import duckdb

    from driftdesk.analysis.prices import ModelPrice

# Every field is read as text and typed in SQL by the row rules of ``analysis.sources`` (the
# same ones ``import`` applies): a field missing from every row of a file is NULL, never a binder
# error; a value of the wrong type or out of range makes the row invalid (named, skipped), never
# a NULL passed off as "unknown" and never a cast or a sum that aborts the whole query.
ATTEMPT_COLUMNS: dict[str, str] = {
    "task_id": "VARCHAR",
    "scenario_id": "VARCHAR",
    "attempt": "VARCHAR",
    "outcome": "VARCHAR",
    "error_code": "VARCHAR",
    "prompt_tokens": "VARCHAR",
    "completion_tokens": "VARCHAR",
    "total_tokens": "VARCHAR",
    "latency_ms": "VARCHAR",
    "model": "VARCHAR",
    # Optional (absent in older rows: retries and mismatches read as 0, model latency as null).
    "retries": "VARCHAR",
    "model_mismatches": "VARCHAR",
    "model_latency_ms": "VARCHAR",
    "score": "VARCHAR",  # a judged attempt's score where the scorer gave one (any finite number)
}

MEMORY_LIMIT = "400MB"  # DuckDB's own share of a report's memory (the rest is Python's)

_OUTCOME_LIST = ", ".join(f"'{o}'" for o in OUTCOMES)
_COLUMNS_ARG = "{" + ", ".join(f"'{k}': '{v}'" for k, v in ATTEMPT_COLUMNS.items()) + "}"

# ``attempts`` is the database's, not the connection's (TEMP): a second connection to it
# (``cursor()``) writes a run's rows to its cache while this one goes on with the report.
CREATE_TABLE = """
CREATE TABLE attempts (
    f INTEGER, task_id VARCHAR, scenario_id VARCHAR, attempt BIGINT, outcome VARCHAR,
    error_code VARCHAR, prompt_tokens BIGINT, completion_tokens BIGINT, total_tokens BIGINT,
    latency_ms DOUBLE, model VARCHAR, retries BIGINT, model_mismatches BIGINT,
    model_latency_ms DOUBLE, score DOUBLE, valid BOOLEAN);
-- USD per million tokens of the models in the table (filled by ``price_models``; without one,
-- an attempt has no cost and the cost consistency is unknown).
CREATE TEMP TABLE model_prices (model VARCHAR, input_per_mtok DOUBLE, output_per_mtok DOUBLE);
"""


def _typed(name: str) -> str:
    """SQL typing one text column by the row rules; NULL when absent or not valid.

    The casts behind a guard are TRY_CASTs: DuckDB 1.1 (the floor of our range) may evaluate
    both sides of an AND, so a plain CAST of a value the guard refused fails the query."""
    if name == "attempt":
        digits = len(str(MAX_ATTEMPT))
        return (
            f"CASE WHEN regexp_full_match(trim(attempt), '[0-9]{{1,{digits}}}') "
            f"AND TRY_CAST(trim(attempt) AS BIGINT) <= {MAX_ATTEMPT} "
            "THEN TRY_CAST(trim(attempt) AS BIGINT) END"
        )
    if name in INT_FIELDS:
        digits = len(str(MAX_TOKENS))
        return (
            f"CASE WHEN regexp_full_match({name}, '[0-9]{{1,{digits}}}') "
            f"AND TRY_CAST({name} AS BIGINT) <= {MAX_TOKENS} THEN TRY_CAST({name} AS BIGINT) END"
        )
    if name == "score":  # any finite number (inspect's scorers are not bounded to 0..1)
        return "CASE WHEN isfinite(TRY_CAST(score AS DOUBLE)) THEN TRY_CAST(score AS DOUBLE) END"
    if name in FLOAT_FIELDS:
        return (
            f"CASE WHEN isfinite(TRY_CAST({name} AS DOUBLE)) AND TRY_CAST({name} AS DOUBLE) >= 0 "
            f"THEN TRY_CAST({name} AS DOUBLE) END"
        )
    return name


_CHECKED = ("attempt", *INT_FIELDS, *FLOAT_FIELDS)
# A checked field is fine when absent (NULL) or typed; ``attempt`` must be present.
_FIELDS_OK = " AND ".join(
    f"(raw_{name} IS NULL OR {name} IS NOT NULL)"
    for name in (*_CHECKED, "score")
    if name != "attempt"
)


def _insert_sql(f: str, source: str, carried: str = "") -> str:
    """One row per non-blank line (a bad line is a row of NULLs: ``ignore_errors``), in file
    order: ``f`` is the SQL of the row's file number, ``source`` read_json's first arguments,
    ``carried`` columns of the scan that ``f`` needs."""
    return f"""
INSERT INTO attempts
SELECT {f}, task_id, scenario_id, attempt, outcome, error_code, prompt_tokens, completion_tokens,
       coalesce(total_tokens, prompt_tokens + completion_tokens), latency_ms, model, retries,
       model_mismatches, model_latency_ms, score,
       coalesce(task_id IS NOT NULL AND task_id <> '' AND attempt IS NOT NULL
                AND outcome IN ({_OUTCOME_LIST}) AND {_FIELDS_OK}, FALSE)
FROM (
    SELECT {carried}task_id, scenario_id, outcome, error_code, model,
           {_typed("score")} AS score, score AS raw_score,
           {", ".join(f"{name} AS raw_{name}, {_typed(name)} AS {name}" for name in _CHECKED)}
    FROM read_json({source}, format='newline_delimited', records=true,
                   columns={_COLUMNS_ARG}, ignore_errors=true))
"""


_INSERT = _insert_sql("$f", "$path")
# Many files in one scan (DuckDB parses them on every core, files kept in list order): a row's
# file number is the one given beside its path.
_INSERT_MANY = _insert_sql(
    "list_extract($fs, list_position($paths, filename))", "$paths, filename=true", "filename, "
)

# An attempt below 128 as one bit of two 64-bit halves (0 for the other half and from 128 on).
LOW_BIT = "CASE WHEN attempt < 64 THEN 1::UBIGINT << attempt::UBIGINT ELSE 0::UBIGINT END"
HIGH_BIT = (
    "CASE WHEN attempt BETWEEN 64 AND 127 THEN 1::UBIGINT << (attempt - 64)::UBIGINT "
    "ELSE 0::UBIGINT END"
)
# A task's attempts below 128 as two bit sets (``attempts_low``, ``attempts_high``).
_ATTEMPT_MASKS = f"bit_or({LOW_BIT}), bit_or({HIGH_BIT})"
# A task can hold two rows of one slot only if this is true: for attempts < 128 the sum of
# 2^attempt equals their bitwise or exactly when no attempt repeats.
_MAY_HAVE_DUPLICATES = f"""
max(attempt) >= 128
OR sum({LOW_BIT}) <> bit_or({LOW_BIT}) OR sum({HIGH_BIT}) <> bit_or({HIGH_BIT})
"""
LAST_ERROR_KINDS = 3  # the newest error kinds kept per task

# The means a report shows (latency, tokens, model latency) are a sum over a count, and the
# sum is kept exactly, as a decimal to 1e-6 (driftdesk writes latencies to 3 decimals; tokens
# are integers). The live view adds a batch's sum to a task's and gets the very sum, so the
# very mean, that a cold report gets. Means merged from means agree only to the last bit, and
# that bit decided the shown digit where a mean sits on a rounding tie, as a mean of
# latencies written to 3 decimals often does (two of them: x.xxx5).
EXACT_BELOW = 10**15  # a latency from here on is not summed exactly (its task's mean is favg's)


def _exact_sum(column: str) -> str:
    """SQL aggregate: the exact sum of ``column`` (0 without values); NULL where a value is
    too large to sum exactly (a latency: tokens are below ``MAX_TOKENS``, under the bound)."""
    return (
        f"CASE WHEN coalesce(max({column}), 0) < {EXACT_BELOW} THEN coalesce(sum(CASE WHEN "
        f"{column} < {EXACT_BELOW} THEN CAST({column} AS DECIMAL(38, 6)) END), 0) END"
    )


def _exact_mean(column: str) -> str:
    """SQL aggregate: the mean of ``column`` from its exact sum (favg's where there is none)."""
    return (
        f"CASE WHEN count({column}) > 0 THEN coalesce("
        f"CAST({_exact_sum(column)} AS DOUBLE) / count({column}), favg({column})) END"
    )


@dataclass
class TableAggregates:
    # (f, [task_id,] model) -> (prompt, completion, total): every valid row of a slot counts,
    # under the model of the slot's winning row.
    tokens: dict[tuple[Any, ...], tuple[int, int, int]]
    # (f, [task_id,] kind) -> winning link_error slots, in (f, count desc, kind) order
    link_kinds: dict[tuple[Any, ...], int]
    # (f, [task_id,] kind) -> winning harness_error slots, same order
    harness_kinds: dict[tuple[Any, ...], int] = field(default_factory=dict)
    touched: list[str] = field(default_factory=list)  # with touched_since
    # Of ``touched``, the tasks whose new rows were merged into their aggregates: for these,
    # ``tokens`` and the kinds hold the new rows' sums only (to add), not the task's.
    merged: set[str] = field(default_factory=set)


@contextlib.contextmanager
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection holding the (empty) tables, its temporary folder removed after it closes."""
    spill = spill_dir()
    try:
        con = connect(spill)
        try:
            yield con
        finally:
            con.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def spill_dir() -> str:
    """A new path for DuckDB's temporary files: DuckDB creates the folder only if it spills,
    and removes it when the connection closes (a killed process leaves it behind)."""
    return os.path.join(tempfile.gettempdir(), f"driftdesk-duckdb-{uuid.uuid4().hex}")


def connect(spill_dir: str) -> duckdb.DuckDBPyConnection:
    """A connection holding the (empty) tables, whose memory DuckDB keeps under
    ``MEMORY_LIMIT``: past it the table and the aggregations spill to ``spill_dir`` (ten
    million rows take about 1.5 GB in the table), so a report's memory does not grow with
    the run."""
    import duckdb

    con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "temp_directory": spill_dir})
    create_table(con)
    return con


def create_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("SET enable_progress_bar = false")
    con.execute(CREATE_TABLE)
    con.execute(f"CREATE TEMP TABLE task_aggs ({TASK_AGGS})")


def load_file(con: duckdb.DuckDBPyConnection, path: Path, f: int) -> int:
    """Append the rows of one JSONL file (file order kept in ``rowid``); returns the count."""
    import duckdb

    try:
        row = con.execute(_INSERT, {"f": f, "path": str(path)}).fetchone()
    except duckdb.InvalidInputException as exc:
        # A line too long for DuckDB's reader aborts the whole read (the statement is rolled
        # back): read a copy with each such line as ``{}`` (an invalid row, named later).
        if "maximum_object_size" not in str(exc):
            raise
        with without_long_lines(path) as copy:
            row = con.execute(_INSERT, {"f": f, "path": str(copy)}).fetchone()
    return int(row[0]) if row else 0


def load_files(con: duckdb.DuckDBPyConnection, files: Sequence[tuple[int, Path]]) -> None:
    """Append the rows of several JSONL files ((f, path), in that order) in one scan: a
    history of small runs reads at the speed of one big file instead of paying a statement
    per file. A line too long for DuckDB's reader, or a file name the scan does not give back
    as it was given, and the files are loaded one at a time instead (``load_file``).

    Rows keep file order in ``rowid``, but after that fallback their rowids do not start at
    ``table_size``: a caller that numbers a file's records from a base uses ``load_file``."""
    import duckdb

    if not files:
        return
    since = table_size(con)
    params = {"fs": [f for f, _ in files], "paths": [str(path) for _, path in files]}
    try:
        con.execute(_INSERT_MANY, params)
        unnamed = con.execute(
            "SELECT count(*) FROM attempts WHERE rowid >= $since AND f IS NULL", {"since": since}
        ).fetchone()
        if not unnamed or not unnamed[0]:
            return
        con.execute("DELETE FROM attempts WHERE rowid >= $since", {"since": since})
    except duckdb.InvalidInputException as exc:  # rolled back: nothing of it was inserted
        if "maximum_object_size" not in str(exc):
            raise
    for f, path in files:
        load_file(con, path, f)


def price_models(
    con: duckdb.DuckDBPyConnection, prices: dict[str, ModelPrice], since: int = 0
) -> None:
    """Price the models of the rows from ``rowid`` ``since`` on that have no price row yet,
    each once (prefix rules of ``price_for``), so the per-attempt cost is plain SQL; a model
    without a price has no cost. The live view passes the first new row: O(new rows)."""
    from driftdesk.analysis.prices import price_for

    models = con.execute(
        "SELECT DISTINCT model FROM attempts WHERE valid AND model IS NOT NULL "
        "AND rowid >= $since AND model NOT IN (SELECT model FROM model_prices)",
        {"since": since},
    ).fetchall()
    priced = [(m, price_for(m, prices)) for (m,) in models]
    rows = [(m, p.input_per_mtok, p.output_per_mtok) for m, p in priced if p is not None]
    if rows:
        con.executemany("INSERT INTO model_prices VALUES (?, ?, ?)", rows)


def table_size(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT count(*) FROM attempts").fetchone()
    return int(row[0]) if row else 0


def bad_rowids(con: duckdb.DuckDBPyConnection, since: int = 0) -> list[tuple[int, int]]:
    """(f, rowid) of the rows that are not usable attempts, from ``rowid`` ``since`` on."""
    return [
        (int(f), int(rowid))
        for f, rowid in con.execute(
            "SELECT f, rowid FROM attempts WHERE NOT valid AND rowid >= $since ORDER BY rowid",
            {"since": since},
        ).fetchall()
    ]


def aggregate(
    con: duckdb.DuckDBPyConnection,
    *,
    include_link_errors: bool,
    touched_since: int | None = None,
    per_task_extras: bool = False,
) -> TableAggregates:
    """Per-task aggregates (last row per slot wins) for all tasks, or with ``touched_since``
    only for the tasks with a valid row at ``rowid >= touched_since`` (the rows just added).

    ``per_task_extras`` keys token sums and link-error kinds by task too (the live view keeps
    them per task to update a few tasks at a time). The per-task rows stay in DuckDB, in
    ``task_aggs`` (replaced, or with ``touched_since`` updated for the touched tasks, which
    ``touched`` lists; see ``analysis.task_report``).
    """
    if touched_since is None:
        rows = "(SELECT rowid AS ord, * FROM attempts WHERE valid)"
        winners, token_source = (
            _without_superseded(rows) if _find_superseded(con, rows) else (rows, rows)
        )
    else:
        winners, token_source = _touched_sources(con, touched_since)

    counted = "TRUE" if include_link_errors else "outcome IN ('pass', 'fail')"
    task_query = f"""
        SELECT f, task_id,
               arg_max(scenario_id, ord) FILTER (WHERE scenario_id IS NOT NULL),
               count(*) FILTER (WHERE outcome = 'pass'),
               count(*) FILTER (WHERE outcome = 'fail'),
               count(*) FILTER (WHERE outcome = 'link_error'),
               count(*) FILTER (WHERE outcome = 'harness_error'),
               {_exact_mean("counted_latency")}, stddev_pop(counted_latency),
               {_exact_mean("counted_tokens")}, stddev_pop(counted_tokens),
               arg_max(coalesce(error_code, outcome), ord, {LAST_ERROR_KINDS})
                   FILTER (WHERE outcome <> 'pass'),
               min(ord), count(*), min(attempt), max(attempt),
               {_exact_mean("counted_model_latency")},
               coalesce(sum(retries), 0), coalesce(sum(model_mismatches), 0),
               -- HAL's resource CV: mean and std(ddof=1) over the positive values only
               favg(pos_latency), stddev_samp(pos_latency),
               favg(pos_tokens), stddev_samp(pos_tokens),
               favg(pos_cost), stddev_samp(pos_cost),
               -- what merging a later aggregate into this one needs (see _MERGED_AGGS)
               count(counted_latency), count(counted_tokens), count(counted_model_latency),
               count(pos_latency), count(pos_tokens), count(pos_cost),
               {_ATTEMPT_MASKS},
               {_exact_sum("counted_latency")}, {_exact_sum("counted_tokens")},
               {_exact_sum("counted_model_latency")},
               -- judged attempts' scores (inspect's mean): their mean, count, the non-binary
               favg(judged_score), count(judged_score),
               count(judged_score) FILTER (WHERE judged_score NOT IN (0, 1))
        FROM (SELECT *, CASE WHEN counted_latency > 0 THEN counted_latency END AS pos_latency,
                     CASE WHEN counted_tokens > 0 THEN counted_tokens END AS pos_tokens,
                     CASE WHEN counted_cost > 0 THEN counted_cost END AS pos_cost,
                     CASE WHEN outcome IN ('pass', 'fail') THEN score END AS judged_score
              FROM (SELECT *, CASE WHEN {counted} THEN latency_ms END AS counted_latency,
                           CASE WHEN {counted} THEN total_tokens END AS counted_tokens,
                           CASE WHEN {counted} THEN model_latency_ms END AS counted_model_latency,
                           CASE WHEN {counted} THEN (prompt_tokens * input_per_mtok
                                + completion_tokens * output_per_mtok) / 1e6 END AS counted_cost
                    FROM {winners} LEFT JOIN model_prices USING (model)))
        GROUP BY f, task_id ORDER BY f, min(ord)
        """
    _aggregate_into_table(con, task_query, touched_since is not None)
    result = TableAggregates(tokens={}, link_kinds={})
    if touched_since is not None:
        for task_id, merged in con.execute("SELECT task_id, merged FROM touched").fetchall():
            result.touched.append(str(task_id))
            if merged:
                result.merged.add(str(task_id))
    keys = "f, task_id" if per_task_extras else "f"
    for row in con.execute(
        f"SELECT {keys}, model, coalesce(sum(prompt_tokens), 0), "
        "coalesce(sum(completion_tokens), 0), coalesce(sum(total_tokens), 0) "
        f"FROM {token_source} GROUP BY ALL"
    ).fetchall():
        result.tokens[tuple(row[:-3])] = (int(row[-3]), int(row[-2]), int(row[-1]))
    kinds_of = {"link_error": result.link_kinds, "harness_error": result.harness_kinds}
    for row in con.execute(
        f"SELECT outcome, {keys}, coalesce(error_code, 'unknown') AS kind, count(*) AS n "
        f"FROM {winners} WHERE outcome IN ('link_error', 'harness_error') GROUP BY ALL "
        f"ORDER BY outcome, {keys}, n DESC, kind"
    ).fetchall():
        kinds_of[row[0]][tuple(row[1:-1])] = int(row[-1])
    return result


def task_counts(con: duckdb.DuckDBPyConnection) -> str:
    """SQL (a parenthesised subquery): per (f, task_id), over the winning rows as ``aggregate`` picks them (last row
    per slot wins), only what a trend keeps of a run: first_seen, passes, fails,
    link_errors, harness_errors, slots, and the judged attempts' n_tokens, tokens_sum
    (exact) and tokens_std (population) — the very columns of ``task_aggs`` by the same
    expressions, without the report's other thirty."""
    rows = "(SELECT rowid AS ord, * FROM attempts WHERE valid)"
    winners = _without_superseded(rows)[0] if _find_superseded(con, rows) else rows
    counted_tokens = "CASE WHEN outcome IN ('pass', 'fail') THEN total_tokens END"
    return f"""(
        SELECT f, task_id, min(ord) AS first_seen,
               count(*) FILTER (WHERE outcome = 'pass') AS passes,
               count(*) FILTER (WHERE outcome = 'fail') AS fails,
               count(*) FILTER (WHERE outcome = 'link_error') AS link_errors,
               count(*) FILTER (WHERE outcome = 'harness_error') AS harness_errors,
               count(*) AS slots, count(counted_tokens) AS n_tokens,
               {_exact_sum("counted_tokens")} AS tokens_sum,
               stddev_pop(counted_tokens) AS tokens_std
        FROM (SELECT *, {counted_tokens} AS counted_tokens FROM {winners})
        GROUP BY f, task_id)"""


def _touched_sources(con: duckdb.DuckDBPyConnection, since: int) -> tuple[str, str]:
    """The live view's sources after rows were added from ``rowid`` ``since`` on (as
    ``_without_superseded``): ``touched`` lists the tasks with new valid rows, ``merged``
    where they only add slots the task did not have (what a running run writes): their new
    rows alone are aggregated, to be merged into the task's aggregates. The other tasks (a
    row for a slot already written, an attempt from 128 on) are aggregated from all their
    rows, copied into ``touched_rows``."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE new_rows AS SELECT rowid AS ord, * FROM attempts "
        "WHERE valid AND rowid >= $since",
        {"since": since},
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE touched AS
        SELECT f, task_id,
               n.max_attempt < 128 AND n.low_sum = n.low AND n.high_sum = n.high
               AND (a.task_id IS NULL OR a.max_attempt < 128 AND a.attempts_low & n.low = 0
                    AND a.attempts_high & n.high = 0) AS merged
        FROM (SELECT f, task_id, max(attempt) AS max_attempt,
                     sum({LOW_BIT}) AS low_sum, bit_or({LOW_BIT}) AS low,
                     sum({HIGH_BIT}) AS high_sum, bit_or({HIGH_BIT}) AS high
              FROM new_rows GROUP BY f, task_id) n
        LEFT JOIN task_aggs a USING (f, task_id)
        """
    )
    row = con.execute("SELECT bool_and(merged) FROM touched").fetchone()
    if row and row[0]:  # the usual case: simpler statements plan faster
        con.execute("CREATE OR REPLACE TEMP TABLE touched_rows AS FROM new_rows LIMIT 0")
        return "new_rows", "new_rows"
    # Their rows copied once: the queries below read them several times, and filtering the
    # whole table each time made a live refresh O(rows). Their row ids first, from the one
    # column the filter needs: a semi-join on every column carries all of them through the
    # join for all rows (75 ms against 60 at 1M rows).
    con.execute(
        "CREATE OR REPLACE TEMP TABLE touched_rows AS SELECT rowid AS ord, * FROM attempts "
        "WHERE rowid IN (SELECT rowid FROM attempts "
        "WHERE valid AND task_id IN (SELECT task_id FROM touched WHERE NOT merged))"
    )
    # A few tasks' rows: their slots are grouped directly (the cheap per-task test of the
    # cold path costs more here, in statements, than it saves).
    _superseded_among(con, "touched_rows")
    winners, token_source = _without_superseded("touched_rows")
    added = "(SELECT * FROM new_rows WHERE task_id IN (SELECT task_id FROM touched WHERE merged))"
    return (
        f"({winners} UNION ALL {added})",
        f"({token_source} UNION ALL SELECT f, task_id, prompt_tokens, completion_tokens, "
        f"total_tokens, model FROM {added})",
    )


def _without_superseded(rows: str) -> tuple[str, str]:
    """SQL sources over ``rows`` given ``superseded``: the winning rows, and every row for
    the token sums (a superseded row's tokens count under its slot's winning model)."""
    return (
        f"(SELECT * FROM {rows} WHERE ord NOT IN (SELECT rid FROM superseded))",
        "(SELECT a.f, a.task_id, a.prompt_tokens, a.completion_tokens, a.total_tokens, "
        "CASE WHEN s.rid IS NULL THEN a.model ELSE s.winner_model END AS model "
        f"FROM {rows} a LEFT JOIN superseded s ON a.ord = s.rid)",
    )


def _find_superseded(con: duckdb.DuckDBPyConnection, rows: str) -> bool:
    """Fill ``superseded`` (rows another row of their slot replaces, with the winner's model)
    and say whether there are any. Tasks that may hold two rows for one slot are found by a
    cheap per-task test; only their slots are looked at one by one."""
    # The suspects kept in a table: counting them and then selecting their rows each grouped
    # the whole table again.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE suspect_tasks AS
        SELECT f, task_id FROM {rows} GROUP BY f, task_id HAVING {_MAY_HAVE_DUPLICATES}
        """
    )
    dup_row = con.execute("SELECT count(*) FROM suspect_tasks").fetchone()
    if not (dup_row and dup_row[0]):
        return False
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE suspect_rows AS
        SELECT ord, f, task_id, attempt, model FROM {rows} SEMI JOIN suspect_tasks USING (f, task_id)
        """
    )
    _superseded_among(con, "suspect_rows")
    return True


def _superseded_among(con: duckdb.DuckDBPyConnection, rows: str) -> None:
    """``superseded``: the rows of ``rows`` a later row of their slot replaces, with the model
    of that slot's winning row (a superseded row's tokens count under it)."""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE superseded AS
        SELECT r.ord AS rid, s.model AS winner_model
        FROM {rows} r JOIN (
            SELECT f, task_id, attempt, max(ord) AS win, arg_max_null(model, ord) AS model
            FROM {rows} GROUP BY f, task_id, attempt HAVING count(*) > 1
        ) s USING (f, task_id, attempt)
        WHERE r.ord < s.win
        """
    )


# The columns of ``task_aggs``, in the order of the per-task query in ``aggregate``.
TASK_AGGS = """
    f INTEGER, task_id VARCHAR, scenario_id VARCHAR, passes BIGINT, fails BIGINT,
    link_errors BIGINT, harness_errors BIGINT, latency_mean_ms DOUBLE, latency_std_ms DOUBLE,
    tokens_mean DOUBLE, tokens_std DOUBLE, last_error_kinds VARCHAR[], first_seen BIGINT,
    slots BIGINT, min_attempt BIGINT, max_attempt BIGINT, model_latency_mean_ms DOUBLE,
    retries BIGINT, model_mismatches BIGINT, latency_pos_mean DOUBLE, latency_pos_std DOUBLE,
    tokens_pos_mean DOUBLE, tokens_pos_std DOUBLE, cost_pos_mean DOUBLE, cost_pos_std DOUBLE,
    n_latency BIGINT, n_tokens BIGINT, n_model_latency BIGINT, n_latency_pos BIGINT,
    n_tokens_pos BIGINT, n_cost_pos BIGINT, attempts_low UBIGINT, attempts_high UBIGINT,
    latency_sum DECIMAL(38, 6), tokens_sum DECIMAL(38, 6), model_latency_sum DECIMAL(38, 6),
    score_mean DOUBLE, n_score BIGINT, n_score_partial BIGINT
"""
# (the comma inside DECIMAL(38, 6) does not start a column)
_AGG_NAMES = re.findall(r"(?:^|,)\s*(\w+) ", TASK_AGGS)


def _merged_mean(mean: str, count: str) -> str:
    """SQL: the mean over both sides (``n``: the new rows', ``o``: the task's before them):
    from the merged exact sum where the mean has one (see ``EXACT_BELOW``), else merged."""
    merged = (
        f"CASE WHEN coalesce(o.{count}, 0) = 0 THEN n.{mean} WHEN n.{count} = 0 THEN o.{mean} "
        f"ELSE o.{mean} + (n.{mean} - o.{mean}) * n.{count} / (n.{count} + o.{count}) END"
    )
    if mean not in _EXACT_SUMS:
        return merged
    total = f"(n.{count} + coalesce(o.{count}, 0))"
    exact = f"CAST({_merged(_EXACT_SUMS[mean])} AS DOUBLE) / nullif({total}, 0)"
    return f"coalesce({exact}, {merged})"


def _merged_std(mean: str, std: str, count: str, ddof: int) -> str:
    """SQL: the standard deviation over both sides, from each side's count, mean and
    deviation (Chan et al.'s pairwise update of the sum of squared deviations)."""

    def squares(side: str) -> str:
        return f"coalesce(pow({side}.{std}, 2) * ({side}.{count} - {ddof}), 0)"

    total = f"(n.{count} + o.{count})"
    return (
        f"CASE WHEN coalesce(o.{count}, 0) = 0 THEN n.{std} WHEN n.{count} = 0 THEN o.{std} "
        f"WHEN {total} > {ddof} THEN sqrt(({squares('n')} + {squares('o')} "
        f"+ pow(n.{mean} - o.{mean}, 2) * n.{count} * o.{count} / {total}) / ({total} - {ddof})) "
        "END"
    )


# The means kept with their exact sums (``_exact_mean``).
_EXACT_SUMS = {
    "latency_mean_ms": "latency_sum",
    "tokens_mean": "tokens_sum",
    "model_latency_mean_ms": "model_latency_sum",
}


def _merged(name: str) -> str:
    """SQL: column ``name`` of ``task_aggs`` over both sides; without ``o`` (a task recomputed
    from all its rows, or new), the new side's value."""
    added = ("passes", "fails", "link_errors", "harness_errors", "slots", "retries",
             "model_mismatches", *(n for n in _AGG_NAMES if n.startswith("n_")))  # fmt: skip
    means = {
        "latency_mean_ms": "n_latency", "tokens_mean": "n_tokens",
        "model_latency_mean_ms": "n_model_latency", "latency_pos_mean": "n_latency_pos",
        "tokens_pos_mean": "n_tokens_pos", "cost_pos_mean": "n_cost_pos",
        "score_mean": "n_score",
    }  # fmt: skip
    # deviation -> (its mean, count, delta degrees of freedom: 0 population, 1 sample)
    stds = {
        "latency_std_ms": ("latency_mean_ms", "n_latency", 0),
        "tokens_std": ("tokens_mean", "n_tokens", 0),
        "latency_pos_std": ("latency_pos_mean", "n_latency_pos", 1),
        "tokens_pos_std": ("tokens_pos_mean", "n_tokens_pos", 1),
        "cost_pos_std": ("cost_pos_mean", "n_cost_pos", 1),
    }
    if name in ("f", "task_id"):
        return f"n.{name}"
    if name in added:
        return f"n.{name} + coalesce(o.{name}, 0)"
    if name in means:
        return _merged_mean(name, means[name])
    if name in stds:
        mean, count, ddof = stds[name]
        return _merged_std(mean, name, count, ddof)
    if name == "scenario_id":  # the newest known
        return "coalesce(n.scenario_id, o.scenario_id)"
    if name == "last_error_kinds":  # newest first
        return (
            "CASE WHEN o.task_id IS NULL THEN n.last_error_kinds ELSE list_slice(list_concat("
            "coalesce(n.last_error_kinds, []), coalesce(o.last_error_kinds, [])), 1, "
            f"{LAST_ERROR_KINDS}) END"
        )
    if name in _EXACT_SUMS.values():  # NULL where a side has none
        return f"CASE WHEN o.task_id IS NULL THEN n.{name} ELSE n.{name} + o.{name} END"
    if name in ("first_seen", "min_attempt"):
        return f"least(n.{name}, o.{name})"
    if name == "max_attempt":
        return "greatest(n.max_attempt, o.max_attempt)"
    if name in ("attempts_low", "attempts_high"):
        return f"n.{name} | coalesce(o.{name}, 0::UBIGINT)"
    raise AssertionError(f"no merge rule for task_aggs.{name}")


_MERGED_AGGS = ", ".join(f"{_merged(name)} AS {name}" for name in _AGG_NAMES)


def _aggregate_into_table(con: duckdb.DuckDBPyConnection, task_query: str, update: bool) -> None:
    """Write the per-task rows into ``task_aggs``: all of it, or for the touched tasks (their
    rows from ``task_query`` merged into the old ones where ``touched`` says so, else as they
    are)."""
    if not update:
        con.execute(f"CREATE OR REPLACE TEMP TABLE task_aggs ({TASK_AGGS})")
        con.execute(f"INSERT INTO task_aggs {task_query}")
        return
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE merged_aggs AS
        SELECT {_MERGED_AGGS}
        FROM ({task_query}) n({", ".join(_AGG_NAMES)}) JOIN touched t USING (f, task_id)
        LEFT JOIN task_aggs o ON t.merged AND o.f = n.f AND o.task_id = n.task_id
        """
    )
    con.execute("DELETE FROM task_aggs WHERE task_id IN (SELECT task_id FROM touched)")
    con.execute("INSERT INTO task_aggs SELECT * FROM merged_aggs")
