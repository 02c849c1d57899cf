"""Per-task tables of reports written by DuckDB (Parquet via ``COPY``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from driftdesk.analysis.run_report import RunReport

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


# The CSV of `report --format csv` and the workbench's export: one row per task (or scenario).
CSV_COLUMNS = (
    "run_id",
    "task_id",
    "scenario_id",
    "n",
    "passes",
    "fails",
    "link_errors",
    "harness_errors",
    "success_rate",
    "spread",
    "latency_mean_ms",
    "latency_cv",
    "tokens_mean",
    "tokens_cv",
    "model_latency_mean_ms",
    "retries",
    "model_mismatches",
    "c_out",
    "last_error_kinds",
)
SCENARIO_CSV_COLUMNS = ("run_id", "scenario_id", "tasks", "min_success_rate", "mean_success_rate")


def tasks_csv(reports: Sequence[RunReport]) -> str:
    """The task (or scenario) rows as CSV. Text from files (ids, error kinds) that a
    spreadsheet would run as a formula (=, +, -, @…) is written escaped (``csvcells``)."""
    import csv
    import io

    from driftdesk.csvcells import spreadsheet_safe as safe

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if reports and all(r.group_by == "scenario" for r in reports):
        # --group-by scenario: one row per scenario (the task rows are the default grouping)
        writer.writerow(SCENARIO_CSV_COLUMNS)
        for report in reports:
            for scenario in report.scenarios:
                row = scenario.to_json()
                row["scenario_id"] = safe(row["scenario_id"])
                writer.writerow([safe(report.run_id)] + [row[c] for c in SCENARIO_CSV_COLUMNS[1:]])
        return buffer.getvalue()
    writer.writerow(CSV_COLUMNS)
    for report in reports:
        run_id = safe(report.run_id)
        for task in [*report.tasks, *report.tasks_below_min_runs]:
            row = task.to_json()
            row["task_id"], row["scenario_id"] = safe(row["task_id"]), safe(row["scenario_id"])
            writer.writerow(
                [run_id]
                + ["" if row[c] is None else row[c] for c in CSV_COLUMNS[1:-1]]
                + [safe(" ".join(task.last_error_kinds))]
            )
    return buffer.getvalue()


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
