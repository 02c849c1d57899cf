"""Smaller truths of the report: scenario rows, why a table is empty, what left the
denominator, served-model mismatches, model latency beside wall latency, and retries."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from analysis_fixtures import attempt_row, write_handmade_run, write_run

from driftdesk.analysis.report import build_report


def test_group_by_scenario_rows_in_table_and_csv(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Seen: --group-by scenario showed scenario rows only in JSON."""
    run = write_handmade_run(tmp_path)
    table = cli("report", str(run), "--group-by", "scenario").stdout
    assert "SCENARIO" in table
    # s1: t1 1.0 and t2 0.5 -> min 50.0%, mean 75.0%
    assert any(line.split()[:4] == ["s1", "2", "50.0%", "75.0%"] for line in table.splitlines())
    rows = list(
        csv.DictReader(
            io.StringIO(cli("report", str(run), "--group-by", "scenario", "--format", "csv").stdout)
        )
    )
    assert [(r["scenario_id"], r["tasks"], r["min_success_rate"]) for r in rows] == [
        ("s1", "2", "0.5"),
        ("s2", "1", "0.0"),
        ("s3", "2", "0.666667"),
    ]


def test_report_says_why_its_task_table_is_empty(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Seen: a run whose every attempt was a link error printed an empty table."""
    rows = [
        attempt_row("dead", f"t{i}", a, "link_error", error_code=code)
        for i, code in enumerate(["empty_response", "truncated", "401"])
        for a in range(2)
    ]
    run = write_run(tmp_path, "dead", list(rows))
    done = cli("report", str(run))
    assert done.returncode == 0
    assert "every attempt (6) was a link or harness error" in done.stdout
    assert "driftdesk doctor" in done.stdout
    assert "TASK" not in done.stdout  # no empty table header
    data = json.loads(cli("report", str(run), "--format", "json").stdout)
    assert data["empty_reason"].startswith("every attempt (6)")


def test_attempts_removed_from_the_denominator_by_kind(tmp_path: Path) -> None:
    rows = [
        attempt_row("r", "t1", 0, "pass"),
        attempt_row("r", "t1", 1, "link_error", error_code="empty_response"),
        attempt_row("r", "t1", 2, "link_error", error_code="truncated"),
        attempt_row("r", "t2", 0, "fail"),
        attempt_row("r", "t2", 1, "link_error", error_code="empty_response"),
        attempt_row("r", "t2", 2, "harness_error", error_code="harness_crash"),
    ]
    run = write_run(tmp_path, "r", list(rows))
    (report,) = build_report([run])
    assert report.removed_from_denominator == {
        "empty_response": 2,
        "harness_crash": 1,
        "truncated": 1,
    }
    assert report.success_rate == 0.5  # t1 1/1, t2 0/1
    (counted,) = build_report([run], include_link_errors=True)
    assert counted.removed_from_denominator == {}
    assert counted.errors_counted_as_failures == report.removed_from_denominator
    assert counted.success_rate == (1 / 3 + 0) / 2  # t1 1/3, t2 0/3


def test_denominator_line_in_the_table(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rows = [
        attempt_row("r", "t1", 0, "pass"),
        attempt_row("r", "t1", 1, "link_error", error_code="empty_response"),
        attempt_row("r", "t1", 2, "link_error", error_code="truncated"),
    ]
    run = write_run(tmp_path, "r", list(rows))
    table = cli("report", str(run)).stdout
    assert "not in the success denominator: empty_response 1, truncated 1" in table
    counted = cli("report", str(run), "--include-link-errors").stdout
    assert "counted as failures: empty_response 1, truncated 1" in counted


def test_mismatches_model_latency_and_retries_per_task_and_run(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rows = [
        attempt_row("r", "t1", 0, "pass", retries=2, model_mismatches=1, model_latency_ms=400.0),
        attempt_row("r", "t1", 1, "fail", retries=0, model_mismatches=3, model_latency_ms=600.0),
        attempt_row("r", "t2", 0, "pass", retries=1),  # an older row: no proxy fields
        attempt_row("r", "t2", 1, "link_error", retries=4, error_code="429"),
    ]
    run = write_run(tmp_path, "r", list(rows))
    (report,) = build_report([run])
    tasks = {t.task_id: t for t in report.tasks}
    assert (tasks["t1"].model_mismatches, tasks["t2"].model_mismatches) == (4, 0)
    assert (tasks["t1"].retries, tasks["t2"].retries) == (2, 5)  # link errors retried too
    assert tasks["t1"].model_latency_mean_ms == 500.0
    assert tasks["t2"].model_latency_mean_ms is None  # absent = null, never 0
    assert (report.model_mismatches, report.retries) == (4, 7)
    data = json.loads(cli("report", str(run), "--format", "json").stdout)
    assert (data["model_mismatches"], data["retries"]) == (4, 7)
    by_id = {t["task_id"]: t for t in data["tasks"]}
    assert (
        by_id["t1"]["model_latency_mean_ms"] == 500.0 and by_id["t1"]["latency_mean_ms"] == 1000.0
    )
    table = cli("report", str(run), "--sort", "task").stdout
    assert "MODEL_MS" in table and "RETRY" in table and "MISMATCH" in table
    assert "model mismatches 4" in table and "retries 7" in table
    csv_rows = list(csv.DictReader(io.StringIO(cli("report", str(run), "--format", "csv").stdout)))
    assert {r["task_id"]: r["model_mismatches"] for r in csv_rows} == {"t1": "4", "t2": "0"}
    assert {r["task_id"]: r["model_latency_mean_ms"] for r in csv_rows} == {"t1": "500.0", "t2": ""}


def test_drill_down_rows_carry_model_latency_or_null(tmp_path: Path) -> None:
    from driftdesk.analysis.attempts import task_attempts

    rows = [
        attempt_row("r", "t1", 0, "pass", model_latency_ms=321.0),
        attempt_row("r", "t1", 1, "pass"),
    ]
    run = write_run(tmp_path, "r", list(rows))
    got = task_attempts(run, "t1")
    assert [r["model_latency_ms"] for r in got] == [321.0, None]
    assert [r["model_mismatches"] for r in got] == [0, 0]
