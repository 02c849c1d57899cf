"""The streamed report JSON (task texts written by DuckDB) is byte for byte what
``json.dumps(RunReport.to_json())`` writes, for task ids and error kinds no golden file holds:
quotes, backslashes, control characters, non-ASCII, values on rounding ties."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.report import build_report, write_report_json

ODD_IDS = [
    'quote"d',
    "back\\slash",
    "tab\there",
    "ctl\x01\x0b\x0e\x1a\x1f\x7f",
    "unicode é ✓ \u2028 𝄞",
    "slash/and</script>",
]


@pytest.mark.parametrize("curves", [False, True])
def test_streamed_json_equals_the_objects_json(tmp_path: Path, curves: bool) -> None:
    rows = []
    for i, task_id in enumerate(ODD_IDS):
        for attempt in range(4):
            outcome = "pass" if (i + attempt) % 3 else "link_error"
            rows.append(
                attempt_row(
                    "odd",
                    task_id,
                    attempt,
                    outcome,
                    scenario_id=task_id[::-1],
                    error_code=None if outcome == "pass" else f"kind\x0b{task_id}",
                    # ties for round(x, 3): 1/16 steps (exact halves) and 4.4725-like values
                    latency_ms=1000.0625 + attempt * 0.125 + i * 4.4725,
                    total_tokens=100 + attempt,
                )
            )
    run = write_run(tmp_path, "odd", rows, tasks=[*ODD_IDS, "never\x02ran"], repeat=5)
    options = {"group_by": "scenario", "include_link_errors": True, "min_runs": 2}
    (report,) = build_report([run], **options)  # type: ignore[arg-type]
    expected = json.dumps(
        report.to_json(task_curves=curves), ensure_ascii=False, separators=(",", ":")
    )
    out = io.StringIO()
    write_report_json([run], out, task_curves=curves, **options)  # type: ignore[arg-type]
    assert out.getvalue() == expected + "\n"
    assert report.tasks and report.tasks_below_min_runs and report.missing_slots
    other = write_run(tmp_path, "other", rows[:9], tasks=None, repeat=None)
    several = io.StringIO()
    write_report_json([run, other], several, sort="task", top=2)
    both = build_report([run, other], sort="task", top=2)
    runs = {"runs": [r.to_json() for r in both]}
    assert several.getvalue() == json.dumps(runs, ensure_ascii=False, separators=(",", ":")) + "\n"
