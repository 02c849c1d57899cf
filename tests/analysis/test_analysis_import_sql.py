"""The generic JSONL import maps rows in SQL (analysis/jsonl_import.py); the Python mapping
(``generic_attempt``) stays the reference: on every shape of row both give the same run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from driftdesk.analysis.import_formats import (
    Attempt,
    attempt_row,
    generic_attempt,
    number_attempts,
)
from driftdesk.analysis.imports import import_results

SHAPES: list[Any] = [
    {"task_id": "a", "success": True, "prompt_tokens": 10, "completion_tokens": 2},
    {"task_id": "a", "success": False, "usage": {"prompt_tokens": 7, "total_tokens": 9}},
    {"task": "b", "pass": 1, "latency_ms": 12.5, "model": "m1"},
    {"task": "b", "passed": 0, "latency_ms": "40"},
    {"task_id": 7, "score": 0.99, "reward": 1.0},  # score first: 0.99 < 1 -> fail
    {"task_id": 7, "reward": 1.0, "error_message": "401 for sk-abcdefghijklmnopqrstu"},
    {"task_id": "c", "error_code": "429"},  # no verdict, an error code: link_error
    {"task_id": "c", "outcome": "harness_error", "success": True},  # outcome wins
    {"task_id": "d", "trial": 3, "success": True},
    {"task_id": "d", "success": True},  # mixed: explicit 3, these take 0 and 1
    {"task_id": "d", "attempt": "0", "success": False},  # a string of digits
    {"task_id": "d", "success": True},
    {"task_id": "e", "success": "yes"},  # not a boolean: bad
    {"task_id": "", "success": True},  # no task id: bad
    {"success": True},  # no task id: bad
    {"task_id": "e", "score": "high"},  # a score that is not a number: no verdict, bad
    {"task_id": "e", "success": True, "attempt": 1.5},  # bad attempt
    {"task_id": "e", "success": True, "prompt_tokens": -1},  # bad count
    [1, 2],  # not an object
    "{broken",
    {"task_id": "f", "success": True, "scenario_id": "s1", "started_at": "2026-01-01T00:00:00Z"},
]


def _python_reference(lines: list[str], run_id: str) -> tuple[list[dict], list[int]]:
    attempts: list[Attempt] = []
    bad: list[int] = []
    for number, line in enumerate(lines, start=1):
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
            attempts.append(generic_attempt(obj, None, None, 1.0))
        except ValueError:  # JSONDecodeError is a ValueError too
            bad.append(number)
    number_attempts(attempts)
    return [attempt_row(run_id, a) for a in attempts], bad


def test_sql_import_equals_the_python_mapping(tmp_path: Path) -> None:
    lines = [s if isinstance(s, str) else json.dumps(s) for s in SHAPES]
    source = tmp_path / "shapes.jsonl"
    source.write_text("\n".join(lines) + "\n")
    result = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="shapes", copy=True)
    written = [
        json.loads(line) for line in (result.run_dir / "attempts.jsonl").read_text().splitlines()
    ]
    expected, bad = _python_reference(lines, "shapes")
    assert written == expected
    assert [int(p.split(":")[0].split()[1]) for p in result.problems] == bad
    assert "sk-abcdefghijklmnopqrstu" not in (result.run_dir / "attempts.jsonl").read_text()
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["tasks"] == ["a", "b", "7", "c", "d", "f"]
    assert manifest["repeat"] == 4 and manifest["imported_from"]["skipped"] == len(bad)
