"""The run report from the per-task table, in SQL: per-task stats, run metrics, streamed JSON.

``attempt_table.aggregate`` leaves one row per (run, task) in the DuckDB
table ``task_aggs``. Everything per task is computed from it here in SQL (success, spread,
C_out, the HAL consistencies, missing attempts, order), the run metrics are aggregates of that
(a few numbers cross into Python), and the tasks are either made into ``TaskStats`` (for the
TUI, compare, CSV) or written as JSON text by DuckDB row by row, so a report of 200,000 tasks
never holds 200,000 dicts. Shared by the cold report and the live view.

The task JSON text DuckDB writes is byte for byte what ``json.dumps(TaskStats.to_json())``
writes: DuckDB's DOUBLE → VARCHAR is the shortest round-trip form, like Python's ``repr``;
``printf('%.df')`` rounds as Python's ``round(x, d)`` does; strings go through ``to_json`` with its upper-case
``\\u00XX`` escapes made lower-case (Python's). ``test_analysis_report_golden.py`` and
``test_analysis_report_stream.py`` hold both to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from driftdesk.analysis.attempt_table import HIGH_BIT, LOW_BIT
from driftdesk.analysis.metrics import pass_curves

if TYPE_CHECKING:
    import duckdb

# Control characters whose \\u00XX escape has a letter: DuckDB writes it upper-case.
_UPPER_ESCAPES = [f"\\u00{code:02X}" for code in range(0x20) if not f"{code:02X}".isdigit()]


def _json_text(value: str) -> str:
    """SQL: the JSON text of a VARCHAR or list value, as Python's json.dumps writes it."""
    fixed = f"to_json({value})::VARCHAR"
    for escape in _UPPER_ESCAPES:
        fixed = f"replace({fixed}, '{escape}', '{escape.lower()}')"
    return f"CASE WHEN contains(to_json({value})::VARCHAR, '\\u00') THEN {fixed} ELSE to_json({value})::VARCHAR END"


def _number(value: str, digits: int | None = None) -> str:
    # Python's round() rounds the exact binary value, ties to even; so does printf (DuckDB's
    # round() rounds ties away from zero, after an inexact scaling).
    rounded = value if digits is None else f"CAST(printf('%.{digits}f', {value}) AS DOUBLE)"
    return f"coalesce(CAST({rounded} AS VARCHAR), 'null')"


# (JSON key, SQL text) in TaskStats.to_json order.
_TASK_JSON: tuple[tuple[str, str], ...] = (
    ("task_id", _json_text("task_id")),
    (
        "scenario_id",
        f"CASE WHEN scenario_id IS NULL THEN 'null' ELSE {_json_text('scenario_id')} END",
    ),
    ("n", "CAST(n AS VARCHAR)"),
    ("passes", "CAST(passes AS VARCHAR)"),
    ("fails", "CAST(fails AS VARCHAR)"),
    ("link_errors", "CAST(link_errors AS VARCHAR)"),
    ("harness_errors", "CAST(harness_errors AS VARCHAR)"),
    ("success_rate", _number("success_rate", 6)),
    ("spread", _number("spread")),
    ("volatile", "CASE WHEN passes > 0 AND n > passes THEN 'true' ELSE 'false' END"),
    ("latency_mean_ms", _number("latency_mean_ms", 3)),
    ("latency_cv", _number("latency_cv", 4)),
    ("tokens_mean", _number("tokens_mean", 3)),
    ("tokens_cv", _number("tokens_cv", 4)),
    ("model_latency_mean_ms", _number("model_latency_mean_ms", 3)),
    ("retries", "CAST(retries AS VARCHAR)"),
    ("model_mismatches", "CAST(model_mismatches AS VARCHAR)"),
    ("c_out", _number("c_out", 6)),
    ("latency_consistency", _number("latency_consistency", 6)),
    ("tokens_consistency", _number("tokens_consistency", 6)),
    ("cost_consistency", _number("cost_consistency", 6)),
    ("resource_consistency", _number("resource_consistency", 6)),
    ("last_error_kinds", _json_text("last_error_kinds")),
    ("missing_attempts", "to_json(missing_attempts)::VARCHAR"),
)
TASK_JSON_SQL = " || ".join(
    f"'{'{' if i == 0 else ','}\"{key}\":' || {sql}" for i, (key, sql) in enumerate(_TASK_JSON)
)

# TaskStats fields, in its constructor's order.
TASK_STATS_COLUMNS = (
    "task_id, scenario_id, n, passes, fails, link_errors, harness_errors, success_rate, spread, "
    "latency_mean_ms, latency_cv, tokens_mean, tokens_cv, model_latency_mean_ms, retries, "
    "model_mismatches, c_out, latency_consistency, tokens_consistency, cost_consistency, "
    "resource_consistency, last_error_kinds, missing_attempts"
)

ORDER_BY = {
    # Most volatile first; among equals, the ones closest to a coin flip.
    "spread": "-coalesce(spread, 0.0), abs(coalesce(success_rate, 0.0) - 0.5), task_id",
    "success": "coalesce(success_rate, 0.0), task_id",
    "task": "task_id",
}


def prepare(
    con: duckdb.DuckDBPyConnection,
    f: int,
    manifest_tasks: list[str],
    repeat: int | None,
    *,
    include_link_errors: bool,
    min_runs: int,
    changed: list[str] | None = None,
    changed_rows: str = "attempts",
) -> list[tuple[str, int]]:
    """Build ``task_stats`` for run ``f`` (every task of ``task_aggs`` plus the manifest's tasks
    without a row) and return its missing slots (manifest tasks × repeat without a row).

    ``changed`` (the live view): only these tasks' rows of ``task_stats`` and ``missing`` are
    rebuilt, from a previous call on this connection with the same manifest and options; a
    task's row depends on that task's aggregates alone, so the table equals a full rebuild.
    ``changed_rows`` names a table holding every valid row of each changed task with an
    attempt from 128 on (the live view's copy of the tasks it re-read), read instead of the
    whole ``attempts`` for their missing slots; other tasks' slots come from their bit sets.
    """
    params: dict[str, Any] = {"f": f}
    if changed is None:
        only = ""
        con.execute("CREATE OR REPLACE TEMP TABLE manifest_tasks (task_id VARCHAR, pos BIGINT)")
        if manifest_tasks:
            con.execute(
                "INSERT INTO manifest_tasks SELECT unnest($tasks), generate_subscripts($tasks, 1)",
                {"tasks": manifest_tasks},
            )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE missing (task_id VARCHAR, attempt BIGINT, pos BIGINT)"
        )
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE changed_tasks AS SELECT unnest($ids) AS task_id",
                    {"ids": changed})  # fmt: skip
        only = "AND task_id IN (SELECT task_id FROM changed_tasks)"
        con.execute(f"DELETE FROM missing WHERE TRUE {only}")
        con.execute(f"DELETE FROM task_stats WHERE TRUE {only}")
    missing: list[tuple[str, int]] = []
    if repeat is not None and repeat >= 1 and manifest_tasks:
        # Only tasks whose slot count or range is off are looked at attempt by attempt (slots
        # are distinct, so 0..repeat−1 all present <=> count, min and max agree). Their
        # attempts below 128 are their aggregates' bit sets; rows are read only for a task
        # with a later attempt.
        con.execute(
            f"""
            INSERT INTO missing
            WITH incomplete AS (
                SELECT m.task_id, m.pos, coalesce(a.max_attempt, 0) < 128 AS by_bits,
                       coalesce(a.attempts_low, 0) AS low, coalesce(a.attempts_high, 0) AS high
                FROM (SELECT * FROM manifest_tasks WHERE TRUE {only}) m
                LEFT JOIN (SELECT * FROM task_aggs WHERE f = $f {only}) a USING (task_id)
                WHERE a.task_id IS NULL OR a.slots <> $repeat OR a.min_attempt <> 0
                      OR a.max_attempt <> $repeat - 1),
            wanted AS (SELECT *, unnest(range($repeat)) AS attempt FROM incomplete),
            present AS (SELECT DISTINCT task_id, attempt FROM {changed_rows} WHERE valid AND f = $f
                        AND task_id IN (SELECT task_id FROM incomplete WHERE NOT by_bits))
            SELECT task_id, attempt, pos FROM wanted
            WHERE by_bits AND low & {LOW_BIT} = 0 AND high & {HIGH_BIT} = 0
            UNION ALL
            SELECT task_id, attempt, pos FROM (SELECT * FROM wanted WHERE NOT by_bits)
            ANTI JOIN present USING (task_id, attempt)
            """,
            {**params, "repeat": repeat},
        )
        missing = [
            (str(t), int(a))
            for t, a in con.execute(
                "SELECT task_id, attempt FROM missing ORDER BY pos, attempt"
            ).fetchall()
        ]
    counted = "passes + fails" + (" + link_errors + harness_errors" if include_link_errors else "")
    threshold = max(1, min_runs)

    def cv(mean: str, std: str, positive: bool) -> str:
        # coefficient of variation; HAL's (positive) needs mean > 0 and n ≥ 2
        if positive:
            return f"CASE WHEN n >= 2 AND {mean} > 0 AND {std} IS NOT NULL THEN {std} / {mean} END"
        return f"CASE WHEN {mean} <> 0 AND {std} IS NOT NULL THEN {std} / {mean} END"

    known = (
        "(cv_latency IS NOT NULL)::INT + (cv_tokens IS NOT NULL)::INT + (cv_cost IS NOT NULL)::INT"
    )
    con.execute(
        f"""
        {"CREATE OR REPLACE TEMP TABLE task_stats AS" if changed is None else "INSERT INTO task_stats"}
        WITH runs AS (
            SELECT * EXCLUDE (f) FROM task_aggs WHERE f = $f {only}
            UNION ALL BY NAME
            -- manifest tasks without a row: listed after the others, in manifest order
            SELECT task_id, 0 AS passes, 0 AS fails, 0 AS link_errors, 0 AS harness_errors,
                   []::VARCHAR[] AS last_error_kinds, (1::BIGINT << 62) + min(pos) AS first_seen,
                   0 AS retries, 0 AS model_mismatches
            FROM manifest_tasks
            WHERE task_id NOT IN (SELECT task_id FROM task_aggs WHERE f = $f) {only}
            GROUP BY task_id),
        counted AS (
            SELECT * REPLACE (coalesce(last_error_kinds, []::VARCHAR[]) AS last_error_kinds),
                   {counted} AS n
            FROM runs),
        stats AS (
            SELECT *,
                   CASE WHEN n > 0 THEN passes::DOUBLE / n END AS success_rate,
                   CASE WHEN n > 0 THEN CASE WHEN passes > 0 AND passes < n THEN 1.0 ELSE 0.0
                                        END::DOUBLE END AS spread,
                   {cv("latency_mean_ms", "latency_std_ms", False)} AS latency_cv,
                   {cv("tokens_mean", "tokens_std", False)} AS tokens_cv,
                   CASE WHEN n >= 2 THEN pow(2 * passes / n - 1, 2) END AS c_out,
                   {cv("latency_pos_mean", "latency_pos_std", True)} AS cv_latency,
                   {cv("tokens_pos_mean", "tokens_pos_std", True)} AS cv_tokens,
                   {cv("cost_pos_mean", "cost_pos_std", True)} AS cv_cost
            FROM counted)
        SELECT s.*, exp(-cv_latency) AS latency_consistency, exp(-cv_tokens) AS tokens_consistency,
               exp(-cv_cost) AS cost_consistency,
               CASE WHEN {known} > 0 THEN exp(-((coalesce(cv_latency, 0) + coalesce(cv_tokens, 0)
                    + coalesce(cv_cost, 0)) / ({known}))) END AS resource_consistency,
               coalesce(m.attempts, []::BIGINT[]) AS missing_attempts,
               n >= {threshold} AS included
        FROM stats s LEFT JOIN (
            SELECT task_id, list(attempt ORDER BY pos, attempt) AS attempts FROM missing
            WHERE TRUE {only} GROUP BY task_id) m USING (task_id)
        """,
        params,
    )
    return missing


def score_figures(con: duckdb.DuckDBPyConnection) -> tuple[float | None, int, int]:
    """inspect's ``mean`` over the included tasks: the mean over tasks of each task's mean
    judged score (its epochs reduced by their mean, as inspect's default reducer does); the
    tasks it averages; the judged scores that are neither 0 nor 1 (a scorer that is not
    binary: partial credit, a number)."""
    row = con.execute(
        "SELECT favg(score_mean) FILTER (WHERE n_score > 0), "
        "count(*) FILTER (WHERE n_score > 0), coalesce(sum(n_score_partial), 0) "
        "FROM task_stats WHERE included"
    ).fetchone()
    assert row is not None
    return (float(row[0]) if row[0] is not None else None), int(row[1]), int(row[2])


def run_totals(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The sums and means over ``task_stats`` the report needs (floats summed in task order)."""
    row = con.execute(
        """
        SELECT count(*), coalesce(sum(passes + fails + link_errors + harness_errors), 0),
               coalesce(sum(passes + fails), 0), coalesce(max(n), 0),
               coalesce(sum(link_errors), 0), coalesce(sum(harness_errors), 0),
               coalesce(sum(retries), 0), coalesce(sum(model_mismatches), 0),
               count(*) FILTER (WHERE included), coalesce(sum(n) FILTER (WHERE included), 0),
               coalesce(sum(passes) FILTER (WHERE included), 0)
        FROM task_stats
        """
    ).fetchone()
    assert row is not None
    keys = (
        "tasks",
        "slots",
        "judged",
        "max_n",
        "link_errors",
        "harness_errors",
        "retries",
        "model_mismatches",
        "included",
        "attempts_judged",
        "included_passes",
    )
    return {key: int(value) for key, value in zip(keys, row, strict=True)}


def run_sums(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Sums over the included tasks: of success, spread, C_out and the consistencies (with
    how many are defined), the noise floor's Σ s_i² / n_i and Σ s_i² over the tasks with
    n ≥ 2, and the (n, passes, tasks) pairs in order of first appearance (the pass^k curves)."""
    consistencies = ("latency", "tokens", "cost", "resource")
    sums = ", ".join(
        f"fsum({name}_consistency), count({name}_consistency)" for name in consistencies
    )
    row = con.execute(
        f"""
        SELECT fsum(coalesce(success_rate, 0.0)), fsum(coalesce(spread, 0.0)),
               fsum(c_out), count(c_out), {sums},
               count(*) FILTER (WHERE n >= 2), fsum(variance / n), fsum(variance)
        FROM (SELECT *, CASE WHEN n >= 2 THEN passes / n * (1 - passes / n) * n / (n - 1)
                        END AS variance
              FROM task_stats WHERE included)
        """
    ).fetchone()
    assert row is not None
    result: dict[str, Any] = {
        "success": row[0],
        "spread": row[1],
        "c_out": (row[2], row[3]),
        "noise": (int(row[12]), row[13] or 0.0, row[14] or 0.0),
    }
    for i, name in enumerate(consistencies):
        result[name] = (row[4 + 2 * i], row[5 + 2 * i])
    result["pairs"] = [
        (int(n), int(c), int(times))
        for n, c, times in con.execute(
            "SELECT n, passes, count(*) FROM task_stats WHERE included GROUP BY n, passes "
            "ORDER BY min(first_seen)"
        ).fetchall()
    ]
    return result


def ci_columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[float]]:
    """The columns the bootstrap resamples, by task id (as the intervals always were)."""
    rows = con.execute(
        "SELECT coalesce(success_rate, 0.0), coalesce(spread, 0.0) * 100 FROM task_stats "
        "WHERE included ORDER BY task_id"
    ).fetchall()
    return {
        "success_rate": [row[0] for row in rows],
        "consistency_gap_pp": [row[1] for row in rows],
    }


def scenarios(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, float, list[float]]]:
    """(scenario, tasks, min success, the task rates in task order) of the included tasks; a
    task without a scenario is a scenario of its own."""
    return [
        (str(sid), int(count), float(low), list(rates))
        for sid, count, low, rates in con.execute(
            "SELECT coalesce(scenario_id, task_id) AS sid, count(*), "
            "min(coalesce(success_rate, 0.0)), list(coalesce(success_rate, 0.0) ORDER BY first_seen) "
            "FROM task_stats WHERE included GROUP BY sid ORDER BY sid"
        ).fetchall()
    ]


def _select(included: bool, sort: str | None, top: int | None) -> str:
    order = ORDER_BY[sort] if sort else "first_seen"
    limit = f" LIMIT {int(top)}" if top is not None and top >= 0 else ""
    return f"FROM task_stats WHERE {'' if included else 'NOT '}included ORDER BY {order}{limit}"


def task_rows(
    con: duckdb.DuckDBPyConnection,
    *,
    included: bool,
    sort: str | None,
    top: int | None,
    only: list[str] | None = None,
    columns: str = TASK_STATS_COLUMNS,
    batch: int = 4096,
) -> Iterator[tuple[Any, ...]]:
    """TaskStats field tuples (or just ``columns``): the included tasks sorted and cut to
    ``top``, or the others in task order; with ``only``, just those tasks (in no particular
    order). Fetched a batch at a time: DuckDB never holds the whole result outside its
    spillable memory."""
    if only is not None:
        cursor = con.execute(
            f"SELECT {columns} FROM task_stats WHERE task_id IN (SELECT unnest($ids))",
            {"ids": only},
        )
    else:
        cursor = con.execute(f"SELECT {columns} {_select(included, sort, top)}")
    while rows := cursor.fetchmany(batch):
        yield from rows


def task_order(
    con: duckdb.DuckDBPyConnection, *, included: bool, sort: str | None, top: int | None
) -> list[str]:
    """The task ids ``task_rows`` would list, in its order."""
    return [t for (t,) in con.execute(f"SELECT task_id {_select(included, sort, top)}").fetchall()]


def task_json(
    con: duckdb.DuckDBPyConnection,
    *,
    included: bool,
    sort: str | None,
    top: int | None,
    curves: bool,
    batch: int = 4096,
) -> Iterator[str]:
    """The tasks' JSON texts, a batch at a time (DuckDB writes them)."""
    text = TASK_JSON_SQL
    if curves:
        pairs = con.execute("SELECT DISTINCT n, passes FROM task_stats").fetchall()
        con.execute("CREATE OR REPLACE TEMP TABLE curves (n BIGINT, passes BIGINT, js VARCHAR)")
        con.executemany(
            "INSERT INTO curves VALUES (?, ?, ?)",
            [(n, c, _curves_json(int(n), int(c))) for n, c in pairs],
        )
        text = f"{text} || c.js"
        source = _select(included, sort, top).replace(
            "FROM task_stats", "FROM task_stats LEFT JOIN curves c USING (n, passes)", 1
        )
    else:
        source = _select(included, sort, top)
    cursor = con.execute(f"SELECT {text} || '}}' {source}")
    while rows := cursor.fetchmany(batch):
        for (row,) in rows:
            yield row


def _curves_json(n: int, passes: int) -> str:
    hat, at = pass_curves(n, passes) if n else ((), ())
    dump = {
        "pass_hat_k": {str(k): round(v, 6) for k, v in enumerate(hat, start=1)},
        "pass_at_k": {str(k): round(v, 6) for k, v in enumerate(at, start=1)},
    }
    return "," + json.dumps(dump, ensure_ascii=False, separators=(",", ":"))[1:-1]
