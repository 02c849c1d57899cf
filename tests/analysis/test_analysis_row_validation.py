"""One bad row never sinks a report, and import never writes a row a report could not read.

Seen (issue 11, "Analysis and input"): ``attempt: 99999999999999999999`` (ConversionException),
``prompt_tokens: INT64_MAX`` with ``total_tokens: null`` (Overflow in addition) and a 100 MB line
(maximum_object_size exceeded) each crashed ``report`` with no good row shown, and ``import``
wrote the first two into a run dir ``report`` could not read. Types and ranges are checked
once, by the same rules, at import and at read; the bad line is named, the rest is kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.imports import import_results
from driftdesk.analysis.live import LiveVolatility
from driftdesk.analysis.report import build_report
from driftdesk.analysis.sources import MAX_ROW_BYTES

INT64_MAX = 2**63 - 1
BIG_LINE_BYTES = 100 * 2**20  # the 100 MB line


def _good(task: str, attempt: int, outcome: str = "pass") -> str:
    return json.dumps(attempt_row("v", task, attempt, outcome))


def _bad_lines() -> list[tuple[str, str]]:
    """(line, words its reason must contain), the issue's three and their kin."""
    return [
        (json.dumps(attempt_row("v", "a", 0, "pass") | {"attempt": 10**20}), "attempt"),
        (
            json.dumps(
                attempt_row("v", "a", 1, "pass")
                | {"prompt_tokens": INT64_MAX, "completion_tokens": 5, "total_tokens": None}
            ),
            "prompt_tokens",
        ),
        (json.dumps(attempt_row("v", "a", 2, "fail") | {"completion_tokens": -3}), "completion"),
        (json.dumps(attempt_row("v", "a", 3, "fail") | {"total_tokens": "many"}), "total_tokens"),
        (json.dumps(attempt_row("v", "a", 4, "fail") | {"latency_ms": "fast"}), "latency_ms"),
        (json.dumps(attempt_row("v", "a", 5, "fail") | {"latency_ms": float("nan")}), "latency"),
        (json.dumps(attempt_row("v", "a", 6, "fail") | {"retries": 1.5}), "retries"),
    ]


def _write_mixed_run(root: Path) -> tuple[Path, dict[int, str]]:
    """Good rows of tasks g and h around every bad line; returns the run and line -> words."""
    lines: list[str] = [_good("g", 0), _good("h", 0, "fail")]
    expected: dict[int, str] = {}
    for line, words in _bad_lines():
        lines.append(line)
        expected[len(lines)] = words
        lines.append(_good("g", len(lines)))
    run = write_run(root, "v", list(lines))
    # the 100 MB line, then good rows after it
    with open(run / "attempts.jsonl", "a") as fh:
        row = attempt_row("v", "h", 1, "pass")
        row["error_message"] = "x" * BIG_LINE_BYTES
        fh.write(json.dumps(row) + "\n")
        expected[len(lines) + 1] = "bytes"
        fh.write(_good("h", 2) + "\n")
        fh.write(_good("h", 3, "fail") + "\n")
    return run, expected


def _check(report_lines: list[tuple[int, str]], expected: dict[int, str]) -> None:
    assert [line for line, _ in report_lines] == sorted(expected)
    for line, reason in report_lines:
        assert expected[line] in reason, (line, reason)


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, str]]:
    return _write_mixed_run(tmp_path_factory.mktemp("mixed"))


def test_report_names_each_bad_row_and_keeps_the_rest(mixed_run: tuple[Path, dict]) -> None:
    run, expected = mixed_run
    (report,) = build_report([run])
    _check([(s.line, s.reason) for s in report.skipped_lines], expected)
    assert report.skipped_line_count == len(expected)
    by_task = {t.task_id: t for t in report.tasks}
    assert (by_task["g"].n, by_task["g"].passes) == (8, 8)  # g: attempt 0 + 7 after bad lines
    assert (by_task["h"].n, by_task["h"].passes) == (3, 1)  # h: 0 fail, 2 pass, 3 fail
    assert "a" not in by_task  # every row of task a was bad
    assert report.tokens["prompt"] == 11 * 100  # no overflow, only good rows counted


def test_cli_report_prints_the_good_rows(mixed_run: tuple[Path, dict]) -> None:
    run, expected = mixed_run
    result = subprocess.run(
        [sys.executable, "-m", "driftdesk", "report", str(run), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    assert data["tasks_judged"] == 2 and data["skipped_line_count"] == len(expected) > 0
    for line in expected:
        assert f"attempts.jsonl:{line}:" in result.stderr


def test_live_view_names_the_same_rows(mixed_run: tuple[Path, dict], tmp_path: Path) -> None:
    run, expected = mixed_run
    live = LiveVolatility(run)
    try:
        report = live.refresh()
    finally:
        live.close()
    _check([(s.line, s.reason) for s in report.skipped_lines], expected)
    assert {t.task_id: t.n for t in report.tasks} == {"g": 8, "h": 3}


def test_live_view_names_bad_rows_appended_later(tmp_path: Path) -> None:
    run = write_run(tmp_path, "v", [_good("g", 0)])
    live = LiveVolatility(run)
    try:
        live.refresh()
        with open(run / "attempts.jsonl", "a") as fh:
            for line, _ in _bad_lines()[:2]:
                fh.write(line + "\n")
            fh.write(_good("g", 1) + "\n")
        report = live.refresh()
    finally:
        live.close()
    assert [(s.line, "attempt" in s.reason) for s in report.skipped_lines] == [
        (2, True),
        (3, False),
    ]
    assert "prompt_tokens" in report.skipped_lines[1].reason
    assert [(t.task_id, t.n) for t in report.tasks] == [("g", 2)]


def test_import_refuses_rows_report_could_not_read(tmp_path: Path) -> None:
    source = tmp_path / "results.jsonl"
    lines = [json.dumps({"task_id": "g", "attempt": 0, "success": True})]
    expected: dict[int, str] = {}
    for line, words in _bad_lines():
        lines.append(line)
        if words != "retries":  # import does not carry a source's retries over (writes 0)
            expected[len(lines)] = words
    lines.append(json.dumps({"task_id": "g", "attempt": 1, "success": False}))
    huge = {"task_id": "h", "success": True, "note": "x" * (MAX_ROW_BYTES + 1)}
    lines.append(json.dumps(huge))
    expected[len(lines)] = "bytes"
    lines.append(json.dumps({"task_id": "h", "success": True}))
    source.write_text("\n".join(lines) + "\n")

    result = import_results(source, fmt="jsonl", out=tmp_path / "runs")
    assert result.attempts == 4  # g 0, g 1, the retries row (task a, attempt 6), h
    numbered = [(int(p.split(":")[0].split()[1]), p) for p in result.problems]
    _check(numbered, expected)
    (report,) = build_report([result.run_dir])
    assert report.skipped_line_count == 0
    assert {t.task_id: (t.n, t.passes) for t in report.tasks} == {
        "g": (2, 1),
        "a": (1, 0),
        "h": (1, 1),
    }
