"""What ``trend`` reads of each run when nothing is kept (``trend_data.read_aggregates``): a
history's own attempts files in one DuckDB scan, a zero-copy import through the report's
reader. Every figure must be the one the run's own report gives, whatever the rows hold."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.imports import import_results
from driftdesk.analysis.report import write_report_json
from driftdesk.analysis.sources import MAX_ROW_BYTES
from driftdesk.analysis.trend_data import RunAggregate, read_aggregates


def _outcome(shift: int, task: int, attempt: int) -> str:
    return "pass" if random.Random(f"{shift}-{task}-{attempt}").random() < 0.6 else "fail"


def _rows(run_id: str, shift: int) -> list[dict[str, Any] | str]:
    """Retried slots (the later row wins), link and harness errors, bad lines of every kind
    (not JSON, a wrong type, a missing attempt), tokens and latencies that differ by run."""
    rows: list[dict[str, Any] | str] = [
        attempt_row(
            run_id, f"t{task}", attempt, _outcome(shift, task, attempt),
            total_tokens=100 + 7 * task + shift, latency_ms=50.0 * (attempt + 1) + shift,
        )
        for task in range(4)
        for attempt in range(3)
    ]  # fmt: skip
    retried = "fail" if _outcome(shift, 0, 0) == "pass" else "pass"
    rows += [
        attempt_row(run_id, "t0", 0, retried),  # a retry wins the slot
        attempt_row(run_id, "t4", 0, "link_error", error_code="429"),
        attempt_row(run_id, "t4", 1, "harness_error", error_code="exit 2"),
        '{"task_id": "t1", "attempt": 5, "outcome": "pass"',  # torn: not JSON
        json.dumps(attempt_row(run_id, "t2", 4, "pass", total_tokens="12.5")),
        json.dumps({"task_id": "t3", "outcome": "pass"}),  # no attempt
        attempt_row(run_id, "t5", 0, "link_error", error_code="timeout"),
        attempt_row(run_id, "t5", 0, "pass"),  # the link error retried into a pass
    ]
    return rows


def _report(run_dir: Path) -> dict[str, Any]:
    out = io.StringIO()
    write_report_json([run_dir], out)
    return json.loads(out.getvalue())


def _as_report_says(aggregate: RunAggregate, report: dict[str, Any]) -> None:
    tasks = report["tasks"]
    judged = {t["task_id"]: [t["n"], t["passes"]] for t in tasks if t["n"]}
    assert aggregate.tasks == judged
    assert aggregate.link_errors == report["link_errors"]  # a task with only errors included
    assert aggregate.harness_errors == report["harness_errors"]
    assert aggregate.skipped_lines == report["skipped_line_count"]
    assert aggregate.tokens_n == sum(t["n"] for t in tasks if t["tokens_mean"] is not None)
    tokens = sum(t["tokens_mean"] * t["n"] for t in tasks if t["tokens_mean"] is not None)
    assert abs(aggregate.tokens_sum - tokens) <= 0.0005 * aggregate.tokens_n  # means to 3 places


def test_a_history_read_in_one_scan_has_each_runs_own_report_figures(tmp_path: Path) -> None:
    runs = [write_run(tmp_path / "runs", f"night-{i}", _rows(f"night-{i}", i)) for i in range(4)]
    (runs[2] / "attempts.jsonl").unlink()  # a run that never wrote a row
    source = tmp_path / "exported.jsonl"  # and a zero-copy import among them
    source.write_text(
        "".join(
            json.dumps({"task_id": f"t{i % 3}", "success": i % 4 != 0, "trial": i // 3}) + "\n"
            for i in range(12)
        )
        + '{"task_id": "t1", "success": "maybe"}\n'
    )
    imported = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="linked")
    assert imported.zero_copy
    dirs = [*runs, imported.run_dir]
    manifests = [json.loads((d / "manifest.json").read_text()) for d in dirs]

    aggregates = read_aggregates(list(zip(dirs, manifests, strict=True)))

    assert [a.run_id for a in aggregates] == [d.name for d in dirs]
    for aggregate, run_dir in zip(aggregates, dirs, strict=True):
        if run_dir == runs[2]:
            assert aggregate.tasks == {} and aggregate.skipped_lines == 0
            continue
        _as_report_says(aggregate, _report(run_dir))
    # the rows are not all alike: runs differ, bad lines were met, retries won their slots
    assert aggregates[0].tasks != aggregates[1].tasks
    assert aggregates[0].skipped_lines == 3 and len(aggregates[-1].tasks) == 3
    for shift, aggregate in enumerate(aggregates[:2]):
        later = [_outcome(shift, 0, 1), _outcome(shift, 0, 2)].count("pass")
        retried = _outcome(shift, 0, 0) == "fail"  # the retry is the other outcome
        assert aggregate.tasks["t0"] == [3, later + retried]
    assert aggregates[0].tasks["t5"] == [1, 1] and aggregates[0].link_errors == 1
    assert aggregates[0].latency_p50_ms is not None


def test_a_line_too_long_for_one_scan_reads_each_file_alone_with_the_same_figures(
    tmp_path: Path,
) -> None:
    """DuckDB refuses a whole scan over a line past its object size: the files are then read
    one at a time (the long line a skipped line), and nothing else changes."""
    long_line = json.dumps({"task_id": "t0", "attempt": 9, "note": "x" * (MAX_ROW_BYTES + 10)})
    plain = write_run(tmp_path / "runs", "plain", _rows("plain", 1))
    long = write_run(tmp_path / "runs", "long", [*_rows("long", 2), long_line])
    dirs = [plain, long]
    manifests = [json.loads((d / "manifest.json").read_text()) for d in dirs]

    aggregates = read_aggregates(list(zip(dirs, manifests, strict=True)))

    assert aggregates[1].skipped_lines == 4  # the three bad lines and the long one
    for aggregate, run_dir in zip(aggregates, dirs, strict=True):
        _as_report_says(aggregate, _report(run_dir))


def test_the_runs_trend_read_are_listed_with_their_success_without_reading_them_again(
    home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The workbench lists each run's success (passes / judged, the latest row per slot):
    a history trend has read is not read again for it, in this process or the next."""
    from driftdesk.analysis.run_success import forget_measured, known_success, success_to_measure
    from driftdesk.analysis.trend import build_trend

    runs = [write_run(tmp_path / "runs", f"night-{i}", _rows(f"night-{i}", i)) for i in range(3)]
    forget_measured()
    assert success_to_measure(((r, None) for r in runs), 0.0) == runs  # none known yet

    trend = build_trend(runs)

    forget_measured()  # as a new process: from the store alone
    assert success_to_measure(((r, None) for r in runs), 0.0) == []
    for run_dir, shown in zip(runs, trend.runs, strict=True):
        tasks = _report(run_dir)["tasks"]
        pooled = sum(t["passes"] for t in tasks) / sum(t["n"] for t in tasks)
        assert known_success(run_dir) == pytest.approx(pooled)
        assert shown.run.run_id == run_dir.name
    assert len({known_success(r) for r in runs}) > 1  # the runs differ
