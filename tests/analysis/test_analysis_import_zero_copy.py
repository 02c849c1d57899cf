"""Zero-copy JSONL imports (analysis/zero_copy.py): the run dir links the source file and every
reader maps it on the fly. A zero-copy run must read exactly like a ``--copy`` import of the
same file; a moved or changed source must be refused by name, with nothing read or changed."""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_analysis_import_sql import SHAPES

from driftdesk.analysis.attempts import task_attempts
from driftdesk.analysis.compare import compare_runs
from driftdesk.analysis.imports import import_results
from driftdesk.analysis.report import build_report, write_report_json
from driftdesk.analysis.selection import select_task_ids
from driftdesk.analysis.zero_copy import SourceChangedError

# Fields that name the run or where it lives: the only ones allowed to differ.
WHERE = ("run_id", "source", "run_dir", "started_at")


def _source(path: Path, seed: int = 5) -> Path:
    """Every row shape of the SQL-vs-Python test, then a few thousand generic rows with
    repeated slots (the last row wins), link errors, usage tokens, unnumbered tasks and
    bad lines, and a blank line: what a real export from another harness mixes."""
    rng = random.Random(seed)
    lines = [s if isinstance(s, str) else json.dumps(s) for s in SHAPES]
    lines.append("   ")
    for i in range(3000):
        task = f"t{rng.randrange(60):02d}"
        row: dict[str, Any] = {"task_id": task, "model": rng.choice(["gpt-4o", "claude-sonnet-4"])}
        if i % 3:
            row["trial"] = rng.randrange(6)  # repeats some slots: the last one wins
        kind = rng.random()
        if kind < 0.05:
            row["error_code"] = rng.choice(["429", "timeout"])
        elif kind < 0.5:
            row["success"] = rng.random() < 0.6
        else:
            row["score"] = round(rng.random(), 3)
        row["usage"] = {"prompt_tokens": rng.randrange(900), "completion_tokens": 40}
        row["latency_ms"] = round(rng.uniform(10, 900), 2)
        lines.append(json.dumps(row))
        if i % 997 == 0:
            lines.append('{"task_id": "t01", "success": "maybe"}')
    path.write_text("\n".join(lines) + "\n")
    return path


def _report_json(run_dir: Path) -> dict[str, Any]:
    out = io.StringIO()
    write_report_json([run_dir], out, task_curves=True)
    data = json.loads(out.getvalue())
    return {k: v for k, v in data.items() if k not in WHERE}


def _imported_pair(tmp_path: Path) -> tuple[Any, Any]:
    source = _source(tmp_path / "exported.jsonl")
    zero = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="linked")
    copied = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="copy", copy=True)
    return zero, copied


def test_a_zero_copy_run_reads_like_a_copied_import(tmp_path: Path) -> None:
    zero, copied = _imported_pair(tmp_path)
    assert zero.zero_copy and not copied.zero_copy
    assert not (zero.run_dir / "attempts.jsonl").exists()  # nothing was rewritten
    assert (copied.run_dir / "attempts.jsonl").exists()
    assert (zero.attempts, zero.tasks, zero.problems) == (
        copied.attempts,
        copied.tasks,
        copied.problems,
    )
    assert zero.problems  # the planted bad lines were named, by number

    assert _report_json(zero.run_dir) == _report_json(copied.run_dir)
    (linked,) = build_report([zero.run_dir], group_by="scenario", include_link_errors=True)
    (own,) = build_report([copied.run_dir], group_by="scenario", include_link_errors=True)
    assert linked.source == str(tmp_path / "exported.jsonl")
    assert {k: v for k, v in linked.to_json().items() if k not in WHERE} == {
        k: v for k, v in own.to_json().items() if k not in WHERE
    }
    assert linked.skipped_lines == own.skipped_lines == []  # named at import, not again

    comparison = compare_runs(zero.run_dir, copied.run_dir)
    assert comparison.changed == [] and comparison.shared_tasks >= 60
    assert all(m.delta in (0, None) for m in comparison.metrics)
    for which in ("failed", "volatile"):
        assert select_task_ids([zero.run_dir], which) == select_task_ids([copied.run_dir], which)

    # The drill-down: the same rows, the line being the source file's for the linked run.
    source_lines = (tmp_path / "exported.jsonl").read_text().splitlines()
    for task in ("a", "d", "7", "t03", "t17"):
        linked_rows, own_rows = (
            task_attempts(zero.run_dir, task),
            task_attempts(copied.run_dir, task),
        )
        assert linked_rows and len(linked_rows) == len(own_rows)
        for mine, theirs in zip(linked_rows, own_rows, strict=True):
            assert {k: v for k, v in mine.items() if k not in ("line", "run_id")} == {
                k: v for k, v in theirs.items() if k not in ("line", "run_id")
            }
            assert str(json.loads(source_lines[mine["line"] - 1]).get("task_id")) == task or (
                json.loads(source_lines[mine["line"] - 1]).get("task") == task
            )


def test_bad_lines_are_named_by_number_and_recorded(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "exported.jsonl"
    source.write_text(
        '{"task_id": "a", "success": true}\n'
        "{not json\n"
        '{"task_id": "a", "success": false}\n'
        "\n"
        '{"success": true}\n'
        '{"task_id": "b", "success": true, "trial": "x"}\n'
    )
    done = cli("import", str(source), "--format", "jsonl", "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert re.findall(r": line (\d+): ", done.stderr) == ["2", "5", "6"]
    assert "zero-copy" in done.stdout and str(source) in done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    imported = json.loads((run_dir / "manifest.json").read_text())["imported_from"]
    assert [b["line"] for b in imported["bad_lines"]] == [2, 5, 6]
    assert imported["skipped"] == 3 and imported["zero_copy"]["path"] == str(source)
    report = json.loads(cli("report", str(run_dir), "--format", "json").stdout)
    assert report["success_rate"] == 0.5 and report["skipped_lines"] == []


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("change", ["moved", "appended", "edited in place"])
def test_a_changed_source_is_refused_by_name_and_nothing_changes(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
    change: str,
) -> None:
    source = _source(tmp_path / "exported.jsonl")
    result = import_results(source, fmt="jsonl", out=tmp_path / "runs")
    before = _tree(tmp_path / "runs")
    if change == "moved":
        shutil.move(source, tmp_path / "elsewhere.jsonl")
        expected = "which is missing"
    elif change == "appended":
        with open(source, "a") as fh:
            fh.write('{"task_id": "t00", "success": true}\n')
        expected = "bytes, not the"
    else:  # the same size, one verdict flipped in the middle of the file
        text = source.read_text()
        middle = text.index('"success": true', len(text) // 2)
        source.write_text(text[:middle] + '"success": fals' + text[middle + 15 :])
        assert source.stat().st_size == len(text)
        expected = "has changed since it was imported"

    with pytest.raises(SourceChangedError, match=expected) as raised:
        build_report([result.run_dir])
    assert str(source) in str(raised.value) and "--relink" in str(raised.value)
    with pytest.raises(SourceChangedError, match=expected):
        task_attempts(result.run_dir, "t03")
    done = cli("report", str(result.run_dir), "--format", "json")
    assert done.returncode == 2 and done.stdout == ""
    assert str(source) in done.stderr and expected in done.stderr
    assert _tree(tmp_path / "runs") == before  # the run dir is untouched


def test_a_moved_source_is_relinked_and_only_to_the_same_content(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    source = _source(tmp_path / "exported.jsonl")
    result = import_results(source, fmt="jsonl", out=tmp_path / "runs")
    expected = _report_json(result.run_dir)
    moved = tmp_path / "archive" / "exported.jsonl"
    moved.parent.mkdir()
    shutil.move(source, moved)
    other = _source(tmp_path / "other.jsonl", seed=6)  # a different file
    manifest_before = (result.run_dir / "manifest.json").read_bytes()
    refused = cli("import", str(other), "--relink", str(result.run_dir))
    assert refused.returncode == 2 and "not the file" in refused.stderr
    assert (result.run_dir / "manifest.json").read_bytes() == manifest_before

    done = cli("import", str(moved), "--relink", str(result.run_dir))
    assert done.returncode == 0, done.stderr
    assert _report_json(result.run_dir) == expected
    # Touched (a new mtime) but the same content: still read, after one full hash.
    os.utime(moved, ns=(1_000_000_000, 1_000_000_000))
    assert _report_json(result.run_dir) == expected


def test_copy_makes_a_self_contained_run(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    source = _source(tmp_path / "exported.jsonl")
    done = cli("import", str(source), "--format", "jsonl", "--copy", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    expected = _report_json(run_dir)
    source.unlink()  # a copied run no longer needs its source
    assert _report_json(run_dir) == expected
    assert "zero_copy" not in json.loads((run_dir / "manifest.json").read_text())["imported_from"]


def test_bad_lines_are_named_across_skipped_blocks(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Naming skips whole blocks without a wanted record (``sources._skip_records``); with
    blocks of a few lines, blank and whitespace lines anywhere, every name must still be the
    one a line-by-line count gives."""
    from driftdesk.analysis import sources

    rng = random.Random(3)
    lines = []
    for i in range(3000):
        lines.append(rng.choice(["", "   ", "\t", "\r"]) if rng.random() < 0.1 else f'{{"i": {i}}}')
    path = tmp_path / "rows.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode())
    records = [number for number, line in enumerate(lines, start=1) if line.strip()]
    wanted = set(rng.sample(range(1, len(records) + 1), 40)) | {1, len(records)}
    monkeypatch.setattr(sources, "SKIP_BLOCK", 97)
    named = sources.name_bad_records(path, wanted, lambda obj: f"row {obj['i']}")
    assert [p.line for p in named] == [records[k - 1] for k in sorted(wanted)]
    assert [p.reason for p in named] == [
        f"row {lines[records[k - 1] - 1].split()[1].rstrip('}')}" for k in sorted(wanted)
    ]


def test_the_run_list_shows_a_zero_copy_runs_success(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The workbench's run list reads a run's success straight from its rows; for a zero-copy
    import those are the source's, and a missing source shows as unknown, not an error."""
    from driftdesk.analysis.run_success import measure_success
    from driftdesk.reruns.run_facts import run_facts
    from driftdesk.rundir.catalog import discover_runs

    source = tmp_path / "exported.jsonl"
    source.write_text(
        "".join(json.dumps({"task_id": f"t{i % 4}", "success": i < 6}) + "\n" for i in range(8))
    )
    import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="linked")
    (info,) = discover_runs([tmp_path / "runs"], run_facts())
    measure_success(info.path)
    (info,) = discover_runs([tmp_path / "runs"], run_facts())
    assert info.success == 0.75 and "attempts passed 75%" in info.details
    source.rename(tmp_path / "moved.jsonl")
    measure_success(info.path)
    (info,) = discover_runs([tmp_path / "runs"], run_facts())
    assert info.success is None


def test_a_line_over_the_row_limit_is_named_and_left_out_in_both_modes(tmp_path: Path) -> None:
    from driftdesk.analysis.sources import MAX_ROW_BYTES

    source = tmp_path / "exported.jsonl"
    long_row = json.dumps({"task_id": "a", "success": True, "note": "x" * (MAX_ROW_BYTES + 10)})
    source.write_text(
        '{"task_id": "a", "success": true}\n'
        + long_row
        + "\n"
        + '{"task_id": "a", "success": false}\n{"task_id": "b", "success": true}\n'
    )
    zero = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="linked")
    copied = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="copy", copy=True)
    assert [p.split(":")[0] for p in zero.problems] == ["line 2"] and "bytes" in zero.problems[0]
    assert zero.problems == copied.problems and zero.attempts == copied.attempts == 3
    assert _report_json(zero.run_dir) == _report_json(copied.run_dir)
    assert [r["attempt"] for r in task_attempts(zero.run_dir, "a")] == [0, 1]
