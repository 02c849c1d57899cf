"""Caches that cannot lie or wedge (issue #46, items 5-7), through the real CLI on real run
dirs: a cached object that is torn, garbage, of the wrong types, another run's, cut short or
replaced is treated as absent (the figures are the ``--no-cache`` ones, exit 0); trend keys on
the same file identity as the row cache (a same-size edit with its mtime put back is seen);
and a trend helper that hangs is given up on."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from analysis_fixtures import attempt_row, write_run
from golden_runs import write_golden_runs
from trend_history import set_started

from driftdesk.analysis import row_cache
from driftdesk.analysis.sources import resolve_sources
from driftdesk.paths import cache_dir


def finished_runs(root: Path) -> tuple[Path, Path]:
    """The golden runs without their torn last lines: finished runs, their aggregates kept."""
    runs = write_golden_runs(root)
    for run_dir in runs:
        attempts = run_dir / "attempts.jsonl"
        text = attempts.read_text()
        attempts.write_text(text[: text.rfind("\n") + 1])
    return runs


def report(cli: Any, run_dir: Path, *options: str) -> str:
    done = cli("report", str(run_dir), "--format", "json", *options)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cache_folder(run_dir: Path) -> Path:
    return row_cache.folders(resolve_sources([run_dir])[0])[0]


def read_meta(run_dir: Path) -> dict[str, Any]:
    return json.loads((cache_folder(run_dir) / row_cache.META_FILE).read_text())


def drop_kept_reports() -> None:
    """The kept reports go (they would answer before the row cache is read)."""
    shutil.rmtree(cache_dir() / "report", ignore_errors=True)


def kept_reports() -> list[Path]:
    return sorted((cache_dir() / "report").glob("*.json"))


# -- item 5: one bad cache file breaks every report ------------------------------------------


@pytest.mark.parametrize("damage", ["zero-length", "garbage", "garbage part"])
def test_a_torn_or_garbage_cache_file_is_read_as_no_cache(
    home, cli, tmp_path: Path, damage: str
) -> None:  # type: ignore[no-untyped-def]
    """A power cut after a part's un-fsynced write, its meta already renamed: the file is
    empty or garbage. The report is the no-cache one, exit 0, and the cache is made again."""
    run_dir, _ = finished_runs(tmp_path)  # a task past attempt 128: its rows are read too
    truth = report(cli, run_dir, "--no-cache")
    assert report(cli, run_dir) == truth  # the cache written
    meta = read_meta(run_dir)
    folder = cache_folder(run_dir)
    (aggs,) = meta["aggs"].values()
    target = folder / (meta["parts"][0] if damage == "garbage part" else aggs["aggs"])
    size = target.stat().st_size
    target.write_bytes(b"" if damage == "zero-length" else os.urandom(size))
    drop_kept_reports()
    for _ in range(2):  # read as no cache, then from the cache made again
        done = cli("report", str(run_dir), "--format", "json")
        assert done.returncode == 0, done.stderr
        assert done.stdout == truth
        drop_kept_reports()


def test_a_meta_of_the_right_version_and_a_wrong_field_type_is_no_cache(
    home, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = finished_runs(tmp_path)
    truth = report(cli, run_dir, "--no-cache")
    report(cli, run_dir)
    meta_path = cache_folder(run_dir) / row_cache.META_FILE
    for field, value in (("offset", "12"), ("part_rows", ["1"]), ("skipped", {"a": 1})):
        meta = read_meta(run_dir)
        meta[field] = value
        if "digest" in meta:  # its own digest made to match: only the types are wrong
            meta["digest"] = row_cache._meta_digest(meta)
        meta_path.write_text(json.dumps(meta))
        drop_kept_reports()
        done = cli("report", str(run_dir), "--format", "json")
        assert done.returncode == 0, (field, done.stderr)
        assert done.stdout == truth, field


# -- item 6: caches that answer wrong --------------------------------------------------------


def test_another_runs_aggregates_dropped_into_a_runs_cache_are_not_its_numbers(
    home, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    run_dir, other = finished_runs(tmp_path)
    truth = report(cli, run_dir, "--no-cache")
    report(cli, run_dir)
    report(cli, other)
    (mine,) = read_meta(run_dir)["aggs"].values()
    (theirs,) = read_meta(other)["aggs"].values()
    shutil.copyfile(cache_folder(other) / theirs["aggs"], cache_folder(run_dir) / mine["aggs"])
    drop_kept_reports()
    assert report(cli, run_dir) == truth


@pytest.mark.parametrize("swapped", ["aggs", "extras"])
def test_another_runs_kept_aggregates_are_not_merged_with_lines_appended_since(
    home, cli, tmp_path: Path, swapped: str
) -> None:  # type: ignore[no-untyped-def]
    """A run's cache extended by lines appended since merges them into its kept aggregates:
    another run's file in their place is no part of the merge."""
    run_dir, other = finished_runs(tmp_path)
    report(cli, run_dir)
    report(cli, other)
    (mine,) = read_meta(run_dir)["aggs"].values()
    (theirs,) = read_meta(other)["aggs"].values()
    source = cache_folder(other) / theirs[swapped]
    shutil.copyfile(source, cache_folder(run_dir) / mine[swapped])
    with open(run_dir / "attempts.jsonl", "a") as fh:
        fh.write(json.dumps(attempt_row("golden-a", "suite/task-001", 9, "pass")) + "\n")
    drop_kept_reports()
    assert report(cli, run_dir) == report(cli, run_dir, "--no-cache")


@pytest.mark.parametrize("damage", ["cut short", "body replaced"])
def test_a_kept_report_cut_short_or_replaced_under_its_header_is_not_printed(
    home, cli, tmp_path: Path, damage: str
) -> None:  # type: ignore[no-untyped-def]
    run_dir, other = finished_runs(tmp_path)
    truth = report(cli, run_dir, "--no-cache")
    assert report(cli, run_dir) == truth
    (entry,) = kept_reports()
    data = entry.read_bytes()
    if damage == "cut short":
        entry.write_bytes(data[: len(data) - 200])
    else:  # the other run's report under this entry's header lines
        body = report(cli, other, "--no-cache").encode()
        start = data.index(b"\n{") + 1  # the header lines are JSON arrays and objects
        entry.write_bytes(data[:start] + body)
    done = cli("report", str(run_dir), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stdout == truth


def _run(root: Path, name: str, day: int, passes: int) -> Path:
    """A run of 6 tasks × 4 attempts, each task passing ``passes`` of its 4."""
    outcomes = ["pass"] * passes + ["fail"] * (4 - passes)
    rows: list[dict[str, Any] | str] = [
        attempt_row(name, f"t{task}", attempt, outcome)
        for task in range(6)
        for attempt, outcome in enumerate(outcomes)
    ]
    run_dir = write_run(root, name, rows, tasks=[f"t{i}" for i in range(6)], repeat=4)
    set_started(run_dir, f"2026-11-{day:02d}T10:00:00Z")
    return run_dir


def _edit_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    """The same number of bytes, other figures, the mtime put back (``touch -r``)."""
    stat = path.stat()
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    path.write_bytes(data.replace(old, new))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size


def test_trend_and_check_trend_see_a_same_size_edit_with_its_mtime_put_back(
    home, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "runs"
    runs = [_run(folder, "a", 1, 4), _run(folder, "b", 2, 4), _run(folder, "c", 3, 4)]
    before = cli("trend", "--runs", str(folder), "--json")
    assert before.returncode == 0, before.stderr
    check = cli("check", str(runs[2]), "--trend", "--runs", str(folder))
    assert check.returncode == 0, check.stdout + check.stderr
    # every pass of the newest run a fail: a regression, in as many bytes
    _edit_keeping_size_and_mtime(
        runs[2] / "attempts.jsonl", b'"outcome": "pass"', b'"outcome": "fail"'
    )
    truth = cli("--no-cache", "trend", "--runs", str(folder), "--json")
    assert truth.returncode == 0, truth.stderr
    assert json.loads(truth.stdout) != json.loads(before.stdout)  # the test can fail
    after = cli("trend", "--runs", str(folder), "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == json.loads(truth.stdout)
    judged = cli("check", str(runs[2]), "--trend", "--runs", str(folder))
    assert judged.returncode == 1, judged.stdout + judged.stderr
    assert "regression" in judged.stdout


def test_the_runs_lists_measured_success_sees_a_same_size_edit_with_its_mtime_put_back(
    home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from driftdesk.analysis import run_success

    run_success.forget_measured()
    run_dir = _run(tmp_path, "a", 1, 4)
    run_success.measure_success(run_dir)
    assert run_success.known_success(run_dir) == 1.0
    later = time.monotonic() + 3600  # any measurement due again by then
    assert run_success.success_to_measure([(run_dir, None)], later) == []
    _edit_keeping_size_and_mtime(
        run_dir / "attempts.jsonl", b'"outcome": "pass"', b'"outcome": "fail"'
    )
    assert run_success.success_to_measure([(run_dir, None)], later) == [run_dir]
    run_success.forget_measured()  # the next start reads the store: the same
    assert run_success.success_to_measure([(run_dir, None)], later) == [run_dir]
    run_success.forget_measured()


def test_a_forged_whole_trend_entry_is_not_printed(home, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "runs"
    for name, day, passes in (("a", 1, 4), ("b", 2, 4), ("c", 3, 3)):
        _run(folder, name, day, passes)
    first = cli("trend", "--runs", str(folder), "--json")
    assert first.returncode == 0, first.stderr
    (entry,) = (cache_dir() / "trend" / "whole").glob("*.json")
    data = entry.read_bytes()
    assert data.count(b'"success_rate": 0.75') == 1
    entry.write_bytes(data.replace(b'"success_rate": 0.75', b'"success_rate": 0.5'))
    again = cli("trend", "--runs", str(folder), "--json")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    entry.write_bytes(data[: len(data) // 2])  # cut short: the text table reads its state
    table = cli("trend", "--runs", str(folder))
    assert table.returncode == 0, table.stderr
    assert table.stdout == cli("--no-cache", "trend", "--runs", str(folder)).stdout


def test_a_trend_figures_entry_of_wrong_types_or_another_runs_is_read_again(
    home, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from driftdesk.analysis.trend_data import CACHE_FILE

    folder = tmp_path / "runs"
    runs = [_run(folder, "a", 1, 4), _run(folder, "b", 2, 2)]
    truth = cli("--no-cache", "trend", "--runs", str(folder), "--json").stdout
    assert cli("trend", "--runs", str(folder), "--json").stdout == truth
    shutil.rmtree(cache_dir() / "trend")  # the whole trend kept: the runs' entries are read
    a_entry, b_entry = (run / CACHE_FILE for run in runs)
    b_entry.write_bytes(a_entry.read_bytes())  # another run's figures
    done = cli("trend", "--runs", str(folder), "--json")
    assert done.returncode == 0 and done.stdout == truth, done.stderr
    shutil.rmtree(cache_dir() / "trend")
    data = a_entry.read_bytes()
    assert data.count(b'"slots":24') == 1
    a_entry.write_bytes(data.replace(b'"slots":24', b'"slots":"2"'))  # a wrong type
    done = cli("trend", "--runs", str(folder), "--json")
    assert done.returncode == 0 and done.stdout == truth, done.stderr


def test_a_pair_verdict_of_another_pair_or_of_wrong_types_is_computed_again(
    home, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from driftdesk.analysis import cache_seal

    folder = tmp_path / "runs"
    for name, day, passes in (("a", 1, 4), ("b", 2, 1), ("c", 3, 4)):
        _run(folder, name, day, passes)
    truth = cli("--no-cache", "trend", "--runs", str(folder), "--json").stdout
    assert '"regression"' in truth and '"improvement"' in truth  # two verdicts that differ
    assert cli("trend", "--runs", str(folder), "--json").stdout == truth
    pairs = sorted((cache_dir() / "trend" / "pairs").glob("*.json"))
    assert len(pairs) == 2
    first, second = (p.read_bytes() for p in pairs)
    pairs[0].write_bytes(second)  # each the other's verdict
    pairs[1].write_bytes(first)
    shutil.rmtree(cache_dir() / "trend" / "whole")
    assert cli("trend", "--runs", str(folder), "--json").stdout == truth
    for path in pairs:  # the right key and seal, a wrong type
        key, _, payload = path.read_bytes().split(b"\n", 2)
        verdict = json.loads(payload)
        verdict["shared_tasks"] = str(verdict["shared_tasks"])
        path.write_bytes(cache_seal.sealed(key, json.dumps(verdict).encode()))
    shutil.rmtree(cache_dir() / "trend" / "whole")
    done = cli("trend", "--runs", str(folder), "--json")
    assert done.returncode == 0 and done.stdout == truth, done.stderr


# -- item 7: a hung trend helper -------------------------------------------------------------


def _children_running(pid: int, needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")),
                    "")  # fmt: skip
        if ppid == str(pid) and needle.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the helper needs a second core")
def test_a_hung_trend_helper_is_given_up_on_and_its_share_computed_here(
    home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from driftdesk.analysis.trend_pairs import PARALLEL_FROM

    folder = tmp_path / "runs"
    for index in range(PARALLEL_FROM + 3):
        _run(folder, f"r{index:02d}", index + 1, 1 + index % 4)
    command = [sys.executable, "-m", "driftdesk", "trend", "--runs", str(folder), "--json"]
    truth = subprocess.run(
        [sys.executable, "-m", "driftdesk", "--no-cache", *command[3:]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert truth.returncode == 0, truth.stderr
    env = {**os.environ, "DRIFTDESK_TREND_HELPER_TIMEOUT": "2"}
    trend = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    stopped: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while not stopped and trend.poll() is None and time.monotonic() < deadline:
            for pid in _children_running(trend.pid, "trend_pairs"):
                os.kill(pid, signal.SIGSTOP)  # it never answers
                stopped.append(pid)
            time.sleep(0.002)
        assert stopped, "the trend started no helper"
        out, err = trend.communicate(timeout=60)
        for pid in stopped:  # ended by the trend, not left behind
            assert not Path(f"/proc/{pid}").exists()
    finally:
        if trend.poll() is None:
            trend.kill()
            trend.wait()
        for pid in stopped:  # a helper the trend left behind (the old code's)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert trend.returncode == 0, err
    assert json.loads(out) == json.loads(truth.stdout)
