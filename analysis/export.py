"""Per-task tables of reports written by DuckDB (Parquet via ``COPY``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from driftdesk.analysis.volatility import RunReport

# Column name -> DuckDB type; one row per task (tasks below --min-runs included, flagged).
TASK_TABLE_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "task_id": "VARCHAR",
    "scenario_id": "VARCHAR",
    "n": "BIGINT",
    "passes": "BIGINT",
    "fails": "BIGINT",
    "link_errors": "BIGINT",
    "harness_errors": "BIGINT",
    "success_rate": "DOUBLE",
    "spread": "DOUBLE",
    "latency_mean_ms": "DOUBLE",
    "latency_cv": "DOUBLE",
    "tokens_mean": "DOUBLE",
    "tokens_cv": "DOUBLE",
    "last_error_kinds": "VARCHAR[]",
    "below_min_runs": "BOOLEAN",
}


def task_table(reports: Sequence[RunReport]) -> dict[str, list[object]]:
    columns: dict[str, list[object]] = {name: [] for name in TASK_TABLE_COLUMNS}
    for report in reports:
        for below, tasks in ((False, report.tasks), (True, report.tasks_below_min_runs)):
            for task in tasks:
                values = {
                    **vars(task),
                    "run_id": report.run_id,
                    "below_min_runs": below,
                }
                for name in TASK_TABLE_COLUMNS:
                    columns[name].append(values[name])
    return columns


def write_parquet(reports: Sequence[RunReport], path: Path) -> None:
    """Write the per-task table to ``path`` (replaced atomically: temp file, then rename)."""
    import os

    import duckdb

    columns = task_table(reports)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    select = ", ".join(
        f"CAST(unnest($c{i}) AS {kind}) AS {name}"
        for i, (name, kind) in enumerate(TASK_TABLE_COLUMNS.items())
    )
    con = duckdb.connect()
    try:
        params = {f"c{i}": columns[name] for i, name in enumerate(TASK_TABLE_COLUMNS)}
        con.execute(
            f"COPY (SELECT {select}) TO '{_quote(tmp)}' (FORMAT parquet)",
            params,
        )
    finally:
        con.close()
    os.replace(tmp, path)


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")
