"""The identity snapshot's normaliser and diff on crafted run dirs (no sandbox, no CLI): what
is masked, how rows are sorted, what a changed output looks like to ``--diff``."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent


def _load() -> ModuleType:
    # By path under its own name: "snapshot" alone could be some installed module.
    spec = importlib.util.spec_from_file_location("identity_snapshot", HERE / "snapshot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


snap = _load()

RUN_ID = "sim-simulated-model-1-20261207T044506Z"
ROOT = "/tmp/driftdesk-identity-abc123"


def _row(task: str, attempt: int, **more: object) -> dict[str, object]:
    return {
        "run_id": RUN_ID,
        "task_id": task,
        "attempt": attempt,
        "outcome": "pass",
        "latency_ms": 12.5,
        "started_at": "2026-12-07T04:45:06.966Z",
        "base_url": "http://127.0.0.1:35383/v1",
        **more,
    }


def _crafted_run(run_dir: Path) -> None:
    (run_dir / "attempts" / "t-1").mkdir(parents=True)
    rows = [_row("t-2", 1), _row("t-1", 1), _row("t-2", 0), _row("t-1", 0, outcome="fail")]
    (run_dir / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = [
        {"task_id": "t-1", "attempt": 0, "call_index": 1, "try": 1, "request_id": "dd-0123456789ab-2"},
        {"task_id": "t-1", "attempt": 0, "call_index": 0, "try": 2, "request_id": "dd-0123456789ab-1"},
        {"task_id": "t-1", "attempt": 0, "call_index": 0, "try": 1, "request_id": "dd-0123456789ab-0"},
    ]  # fmt: skip
    (run_dir / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    records = [{"call_index": 1, "try": 1, "text": "b"}, {"call_index": 0, "try": 1, "text": "a"}]
    gz = gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode())
    (run_dir / "attempts" / "t-1" / "0.calls.jsonl.gz").write_bytes(gz)
    (run_dir / "attempts" / "t-1" / "0.log").write_text(
        f"[turn] 0: answer at 2026-12-07 04:45:07 from 127.0.0.1:35383 in {ROOT}/project\n"
    )
    manifest = {
        "run_id": RUN_ID,
        "suite": {"path": f"{ROOT}/suites/coding.jsonl"},
        "started_at": "2026-12-07T04:45:06.042Z",
        "ended_at": None,
        "executor": {"kind": "local", "pid": 4242, "host": "box"},
        "resource_consistency": {"latency": 0.9, "tokens": 1.0, "cost": None, "resource": 0.95},
        "timeout_seconds": 30.0,
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / ".rows-cache").mkdir()
    (run_dir / ".rows-cache" / "rows.parquet").write_bytes(b"PAR1\x00\xff")
    (run_dir / "attempts" / "t-1" / "blob.bin").write_bytes(b"\xff\xfe\x00")
    (run_dir / "attempts" / "t-1" / "0.27cbd7e9.result.json").write_text('{"success": true}')


def _normaliser() -> object:
    return snap.Normaliser([(ROOT, "<root>"), (RUN_ID, "<run:basic>")])


def test_run_dir_rows_are_sorted_by_slot_and_volatile_values_masked(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN_ID
    _crafted_run(run_dir)
    out = tmp_path / "out"
    snap.snapshot_tree(run_dir, out, _normaliser(), figures=True)

    rows = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["attempt"]) for r in rows] == [
        ("t-1", 0), ("t-1", 1), ("t-2", 0), ("t-2", 1),
    ]  # fmt: skip
    assert rows[0] == {
        "run_id": "<run:basic>",
        "task_id": "t-1",
        "attempt": 0,
        "outcome": "fail",  # the figure itself is kept
        "latency_ms": "<masked>",
        "started_at": "<masked>",
        "base_url": "http://127.0.0.1:<port>/v1",
    }
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert [(c["call_index"], c["try"]) for c in calls] == [(0, 1), (0, 2), (1, 1)]
    assert {c["request_id"] for c in calls} == {"<masked>"}

    decoded = (out / "attempts" / "t-1" / "0.calls.jsonl.gz.decoded").read_text()
    assert [json.loads(line)["text"] for line in decoded.splitlines()] == ["a", "b"]
    log = (out / "attempts" / "t-1" / "0.log").read_text()
    assert log == "[turn] 0: answer at <time> from 127.0.0.1:<port> in <root>/project\n"

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["suite"] == {"path": "<root>/suites/coding.jsonl"}
    assert manifest["started_at"] == "<masked>" and manifest["ended_at"] is None
    assert manifest["executor"] == {"kind": "local", "pid": "<masked>", "host": "<masked>"}
    # Latency is mixed into resource consistency; tokens and cost are not.
    assert manifest["resource_consistency"] == {
        "latency": "<masked>", "tokens": 1.0, "cost": None, "resource": "<masked>",
    }  # fmt: skip
    assert manifest["timeout_seconds"] == 30.0

    assert (out / ".rows-cache" / "rows.parquet").read_text() == "cache file, listed by name only\n"
    assert (out / "attempts" / "t-1" / "blob.bin").read_text().startswith("binary file")
    # A command attempt's generated token is masked in its file names.
    result = out / "attempts" / "t-1" / "0.<attempt-token>.result.json"
    assert json.loads(result.read_text()) == {"success": True}


def test_figures_off_keeps_fixture_latencies_but_masks_times() -> None:
    value = {"latency_ms": 1200, "imported_at": "2026-12-07T04:45:06Z", "tasks": [{"n": 2}]}
    assert snap.normalise_json(value, figures=False) == {
        "latency_ms": 1200,
        "imported_at": "<time>",
        "tasks": [{"n": 2}],
    }


def test_csv_columns_named_as_times_are_masked() -> None:
    text = "task_id,latency_mean_ms,tokens_mean\r\nt-1,10.5,32.0\r\nt-2,,40.0\r\n"
    body, layout = snap.normalise_csv(text, snap.Normaliser())
    assert list(csv.reader(io.StringIO(body))) == [
        ["task_id", "latency_mean_ms", "tokens_mean"],
        ["t-1", "<masked>", "32.0"],
        ["t-2", "", "40.0"],
    ]
    assert "round trip exact: True" in layout and "\\r\\n" in layout


def _snapshot_dir(folder: Path) -> Path:
    (folder / "runs" / "basic").mkdir(parents=True)
    (folder / "runs" / "basic" / "attempts.jsonl").write_text('{"task_id": "t-1"}\n')
    (folder / "outputs" / "nocache").mkdir(parents=True)
    (folder / "outputs" / "nocache" / "report.json").write_text('{\n "success_rate": 0.5\n}\n')
    (folder / "info").mkdir()
    (folder / "info" / "timings.txt").write_text("total 30.0s\n")
    return folder


def test_diff_is_silent_on_equal_snapshots_and_names_a_changed_file(tmp_path: Path) -> None:
    a, b = _snapshot_dir(tmp_path / "a"), _snapshot_dir(tmp_path / "b")
    said: list[str] = []
    assert snap.diff_snapshots(a, b, said.append) == 0
    assert said == ["identical"]

    # Timings differ every time: shown, never a failure.
    (b / "info" / "timings.txt").write_text("total 31.0s\n")
    said.clear()
    assert snap.diff_snapshots(a, b, said.append) == 0
    assert said[0] == "(info, not a failure) differs: info/timings.txt"

    (b / "outputs" / "nocache" / "report.json").write_text('{\n "success_rate": 0.6\n}\n')
    (b / "runs" / "basic" / "calls.jsonl").write_text("")
    said.clear()
    assert snap.diff_snapshots(a, b, said.append) == 1
    shown = "\n".join(said)
    assert "differs: outputs/nocache/report.json" in shown
    assert '- "success_rate": 0.5' in shown and '+ "success_rate": 0.6' in shown
    assert "only in B: runs/basic/calls.jsonl" in shown
    assert said[-1] == "2 file(s) differ, 1 info file(s) differ"


def test_diff_refuses_a_folder_that_is_not_a_snapshot(tmp_path: Path) -> None:
    a = _snapshot_dir(tmp_path / "a")
    said: list[str] = []
    assert snap.diff_snapshots(a, tmp_path, said.append) == 2
    assert "is not a snapshot" in said[0]


@pytest.mark.parametrize(
    ("key", "masked"),
    [
        ("started_at", True),
        ("latency_p95_ms", True),
        ("ttfb_ms", True),
        ("mtime_ns", True),
        ("pid", True),
        ("request_id", True),
        ("pass_at_k", False),
        ("timeout_seconds", False),
        ("total_tokens", False),
        ("success_rate", False),
    ],
)
def test_masked_keys(key: str, masked: bool) -> None:
    assert snap.masked_key(key) is masked
