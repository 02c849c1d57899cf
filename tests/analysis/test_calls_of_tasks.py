"""``trajectory.calls_of_tasks`` (one read of calls.jsonl for many tasks, as the page explains
200) files every call row exactly as ``task_calls`` (a block search per task) does."""

from __future__ import annotations

import json
from pathlib import Path

from driftdesk.analysis.trajectory import calls_of_tasks, task_calls


def _call(task: object, attempt: object, index: int, **extra: object) -> str:
    row = {"run_id": "r", "task_id": task, "attempt": attempt, "call_index": index, **extra}
    return json.dumps(row)


def test_one_read_files_the_calls_of_many_tasks_as_a_search_per_task_does(
    tmp_path: Path,
) -> None:
    lines = [
        _call("t-1", 0, 0, status=200),
        _call("t-2", 0, 0, status=429, error_kind="rate_limited", absorbed=True),
        '{"task_id": "t-1", "attempt": 0, "call_ind',  # torn
        _call("t-1", 0, 1, status=200),
        # mentions t-1 in its text but is t-3's: filed under t-3 only
        _call("t-3", 1, 0, status=500, error_message='upstream said "t-1" failed'),
        json.dumps({"task_id": "t-1", "attempt": 1, "event": "not a call"}),
        _call("t-1", "1", 0),  # attempt of the wrong type
        _call(["t-1"], 0, 0),  # task of the wrong type
        _call("t-2", 1, 0, status=200),
        "not json at all t-2",
        _call("t-1", 2, 0, status=200, injected="timeout"),
    ]
    (tmp_path / "calls.jsonl").write_text("\n".join(lines) + "\n")
    tasks = ["t-1", "t-2", "t-3", "t-absent"]
    together = calls_of_tasks(tmp_path, tasks)
    assert together == {task: task_calls(tmp_path, task) for task in tasks}
    assert sorted(together["t-1"]) == [0, 2] and len(together["t-1"][0]) == 2
    assert together["t-3"][1][0]["status"] == 500 and together["t-absent"] == {}
    assert calls_of_tasks(tmp_path / "no-run", ["t-1"]) == {"t-1": {}}
