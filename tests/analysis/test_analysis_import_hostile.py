"""Imports of results that carry numbers JSON has no words for, or say two things about one
trial: named, never written as they came, never silently resolved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driftdesk.analysis.imports import import_results
from driftdesk.analysis.report import build_report


def strict_rows(run_dir: Path) -> list[dict]:
    """The rows, read by a parser that refuses NaN and Infinity (which are not JSON)."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} written to attempts.jsonl")

    text = (run_dir / "attempts.jsonl").read_text()
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def test_tau_bench_non_finite_rewards_are_named_and_never_written(tmp_path: Path) -> None:
    """Seen: rewards NaN and Infinity (Python's json writes and reads them) became 'fail'
    without a word, and attempts.jsonl got the literal NaN/Infinity."""
    source = tmp_path / "tau.json"
    source.write_text(
        '[{"task_id": 0, "trial": 0, "reward": NaN, "info": {}},'
        ' {"task_id": 1, "trial": 0, "reward": Infinity, "info": {}},'
        ' {"task_id": 2, "trial": 0, "reward": 1.0, "info": {}},'
        ' {"task_id": 3, "trial": 0, "reward": -Infinity, "info": {"error": "boom"}}]'
    )
    result = import_results(source, out=tmp_path / "runs")
    assert result.problems == [
        "record 1 (task 0): reward is nan, not finite",
        "record 2 (task 1): reward is inf, not finite",
        "record 4 (task 3): reward is -inf, not finite",
    ]
    assert [(r["task_id"], r["outcome"]) for r in strict_rows(result.run_dir)] == [("2", "pass")]


def test_tau2_non_finite_rewards_are_named_and_never_written(tmp_path: Path) -> None:
    source = tmp_path / "results.json"
    source.write_text(
        '{"simulations": ['
        '{"task_id": "a", "trial": 0, "reward_info": {"reward": NaN}},'
        '{"task_id": "b", "trial": 0, "reward_info": {"reward": 0.0}},'
        '{"task_id": "c", "trial": 0, "reward_info": {"reward": Infinity},'
        ' "termination_reason": "infrastructure_error"}]}'
    )
    result = import_results(source, out=tmp_path / "runs")
    assert result.problems == [
        "record 1 (task a): reward is nan, not finite",
        "record 3 (task c): reward is inf, not finite",
    ]
    assert [(r["task_id"], r["outcome"]) for r in strict_rows(result.run_dir)] == [("b", "fail")]


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "zero-copy"])
def test_generic_jsonl_non_finite_scores_are_bad_lines(tmp_path: Path, copy: bool) -> None:
    """Seen: a score of NaN or Infinity was a *pass* (NaN ≥ 1 in DuckDB's order) and was
    written as NaN/Infinity."""
    source = tmp_path / "rows.jsonl"
    source.write_text(
        '{"task_id": "a", "score": NaN}\n'
        '{"task_id": "b", "reward": Infinity}\n'
        '{"task_id": "c", "score": 1}\n'
        '{"task_id": "d", "outcome": "fail", "score": -Infinity}\n'
    )
    result = import_results(source, out=tmp_path / "runs", copy=copy)
    assert result.problems == [
        "line 1: score is nan, not finite",
        "line 2: score is inf, not finite",
        "line 4: score is -inf, not finite",
    ]
    (report,) = build_report([result.run_dir])
    assert [(t.task_id, t.passes, t.n) for t in report.tasks] == [("c", 1, 1)]
    if copy:
        assert [r["task_id"] for r in strict_rows(result.run_dir)] == ["c"]


def test_two_records_of_one_tau_bench_trial_are_named_and_the_last_kept(tmp_path: Path) -> None:
    """Seen: two records for the same (task, trial), rewards 1 and 0: one was dropped
    without a word (both were written; a report keeps the last row of a slot)."""
    source = tmp_path / "tau.json"
    source.write_text(
        json.dumps(
            [
                {"task_id": 7, "trial": 0, "reward": 1.0, "info": {}},
                {"task_id": 7, "trial": 1, "reward": 1.0, "info": {}},
                {"task_id": 7, "trial": 0, "reward": 0.0, "info": {}},
            ]
        )
    )
    result = import_results(source, out=tmp_path / "runs")
    assert result.problems == [
        "record 1 (task 7, trial 0, pass, reward 1): same task and trial as record 3 "
        "(fail, reward 0), which is kept (the last one, as a report keeps the last row of a "
        "slot)"
    ]
    rows = strict_rows(result.run_dir)
    assert [(r["attempt"], r["outcome"]) for r in rows] == [(1, "pass"), (0, "fail")]
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["imported_from"]["skipped"] == 1


def test_a_big_zero_copy_source_changed_mid_file_with_its_size_and_mtime_kept_is_refused(
    tmp_path: Path,
) -> None:
    """Seen: a source over 2 MiB (its first and last MiB fingerprinted) had 2,000 rows flipped
    in the middle, same size, mtime put back with `touch -r`: the report read the new rows
    as the imported ones. The full content hash recorded at import is now checked each time."""
    import os

    from driftdesk.analysis.zero_copy import SourceChangedError

    source = tmp_path / "big.jsonl"
    lines = [
        json.dumps({"task_id": f"t{i % 500:03d}", "trial": i // 500, "success": True})
        for i in range(60_000)
    ]
    source.write_text("\n".join(lines) + "\n")
    assert source.stat().st_size > 2 * 2**20 + 500_000  # the middle is fingerprinted by no MiB
    result = import_results(source, out=tmp_path / "runs")
    (before,) = build_report([result.run_dir])
    assert before.success_rate == 1.0
    stat = source.stat()
    middle = len(lines) // 2
    for i in range(middle, middle + 2000):
        lines[i] = lines[i].replace('"success": true', '"success": fals')
    source.write_text("\n".join(lines) + "\n")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # touch -r
    assert (source.stat().st_size, source.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    with pytest.raises(SourceChangedError, match="has changed since it was imported"):
        build_report([result.run_dir])
