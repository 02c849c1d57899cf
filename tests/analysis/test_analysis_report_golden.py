"""The whole report and compare JSON of two generated runs, against frozen golden files.

The golden files were written by the report code before it was optimised (issue 13), through
the real CLI; the optimised code must give the same output: counts, strings, order and types
exactly, floats to 1e-12. The runs (``golden_runs.py``) hold retried slots, bad lines, link
and harness errors, missing slots, unpriced models and tasks only in one run.

To write the golden files again (only when a change of the numbers is intended and reviewed):
``DRIFTDESK_WRITE_GOLDEN=1 pytest tests/analysis/test_analysis_report_golden.py``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from golden_runs import write_golden_runs

GOLDEN = Path(__file__).parent / "golden"
ROOT_MARK = "<RUNS>"
# read at import: the ``home`` fixture scrubs DRIFTDESK_* from the environment
WRITE_GOLDEN = os.environ.get("DRIFTDESK_WRITE_GOLDEN") == "1"

CASES: dict[str, list[str]] = {
    "report_a": ["report", "{a}", "--format", "json"],
    "report_a_options": [
        "report",
        "{a}",
        "--format",
        "json",
        "--task-curves",
        "--group-by",
        "scenario",
        "--include-link-errors",
        "--min-runs",
        "2",
        "--sort",
        "task",
    ],
    "report_both_tau2": [
        "report",
        "{a}",
        "{b}",
        "--format",
        "json",
        "--pass-k-convention",
        "tau2",
        "--sort",
        "success",
        "--top",
        "5",
    ],
    "compare_a_b": ["compare", "{a}", "{b}", "--format", "json"],
    "compare_b_a_all_tasks": ["compare", "{b}", "{a}", "--format", "json", "--all-tasks"],
}


def assert_same(golden: Any, actual: Any, where: str = "$") -> None:
    """Exact for everything but floats (1e-12); dict key order counts too."""
    if isinstance(golden, float) and isinstance(actual, float):
        assert math.isclose(golden, actual, rel_tol=0, abs_tol=1e-12), (where, golden, actual)
        return
    assert type(golden) is type(actual), (where, golden, actual)
    if isinstance(golden, dict):
        assert list(golden) == list(actual), (where, list(golden), list(actual))
        for key in golden:
            assert_same(golden[key], actual[key], f"{where}.{key}")
    elif isinstance(golden, list):
        assert len(golden) == len(actual), (where, len(golden), len(actual))
        for i, (g, a) in enumerate(zip(golden, actual, strict=True)):
            assert_same(g, a, f"{where}[{i}]")
    else:
        assert golden == actual, (where, golden, actual)


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_equals_golden(case: str, cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "runs"
    a, b = write_golden_runs(root)
    argv = [arg.format(a=a, b=b) for arg in CASES[case]]
    done = cli(*argv)
    assert done.returncode == 0, done.stderr
    actual = {
        "stdout": json.loads(done.stdout.replace(str(root), ROOT_MARK)),
        "stderr": done.stderr.replace(str(root), ROOT_MARK).splitlines(),
    }
    path = GOLDEN / f"{case}.json"
    if WRITE_GOLDEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n")
    golden = json.loads(path.read_text())
    assert_same(golden, actual)


def test_fixture_holds_what_the_goldens_are_for(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The golden files would prove little if the runs lost their hard cases: check them."""
    report = json.loads((GOLDEN / "report_a.json").read_text())["stdout"]
    assert report["skipped_line_count"] >= 8
    assert any(line["torn"] for line in report["skipped_lines"])
    assert report["link_errors"] > 0 and report["harness_errors"] > 0
    assert report["missing_slots"] and report["tasks_below_min_runs"]
    assert report["unpriced_models"] == ["house-model-7b"] and report["cost_usd"] is None
    a, _ = write_golden_runs(tmp_path)
    rows = [
        json.loads(line)
        for line in (a / "attempts.jsonl").read_text().splitlines()
        if line.startswith('{"run_id"') and line.endswith("}")
    ]
    slots = [(r["task_id"], r["attempt"]) for r in rows if isinstance(r.get("attempt"), int)]
    assert len(slots) - len(set(slots)) >= 4  # retried slots
    compare = json.loads((GOLDEN / "compare_a_b.json").read_text())["stdout"]
    assert compare["only_in_a"] == 2 and compare["only_in_b"] == 1 and compare["changed"]
