"""The whole trend kept in the user's cache (``analysis.trend_cache``): a history where no run
changed is answered from it without reading a run; a changed run, other options or a
rewritten aggregate entry make it computed again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run
from trend_history import set_started

from driftdesk.analysis import cache_seal
from driftdesk.analysis.trend import Trend, build_trend
from driftdesk.analysis.trend_cache import CACHE, entry_file


def _run(root: Path, name: str, day: int, passes: int) -> Path:
    """A run of 6 tasks × 4 attempts, each task passing ``passes`` of its 4."""
    outcomes = ["pass"] * passes + ["fail"] * (4 - passes)
    rows = [
        attempt_row(name, f"t{task}", attempt, outcome)
        for task in range(6)
        for attempt, outcome in enumerate(outcomes)
    ]
    run_dir = write_run(root, name, list(rows), tasks=[f"t{i}" for i in range(6)], repeat=4)
    set_started(run_dir, f"2026-11-{day:02d}T10:00:00Z")
    return run_dir


def _blank_keeping_size_and_mtime(path: Path) -> None:
    """Overwrite ``path`` with as many bytes of nothing usable, its mtime put back: its
    (path, size, mtime) unchanged, so only reading it could tell."""
    stat = path.stat()
    path.write_bytes(b"x" * stat.st_size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _entries(home) -> list[Path]:  # type: ignore[no-untyped-def]
    return sorted((home.root / ".cache" / "driftdesk" / "trend" / "whole").glob("*.json"))


def test_an_unchanged_history_is_printed_from_the_kept_trend_without_reading_a_run(
    cli, home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "runs"
    runs = [_run(folder, "a", 1, 4), _run(folder, "b", 2, 4), _run(folder, "c", 3, 3)]
    first = cli("trend", "--runs", str(folder), "--json")
    assert first.returncode == 0, first.stderr
    figures = json.loads(first.stdout)
    assert [r["success_rate"] for r in figures["runs"]] == [1.0, 1.0, 0.75]
    (entry,) = _entries(home)
    made = entry.stat()
    # The same answer, to the byte, read from the entry, not made again (that replaces it) …
    again = cli("trend", "--runs", str(folder), "--json")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    read = entry.stat()
    assert (read.st_ino, read.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)
    # … and the kept text is what is printed: a planted figure, sealed again as a forger
    # holding the user's rights could (``cache_seal``), shows
    key, _, payload = entry.read_bytes().split(b"\n", 2)
    assert payload.count(b'"success_rate": 0.75') == 1
    planted_text = payload.replace(b'"success_rate": 0.75', b'"success_rate": 0.5', 1)
    entry.write_bytes(cache_seal.sealed(key, planted_text))
    planted = json.loads(cli("trend", "--runs", str(folder), "--json").stdout)
    assert [r["success_rate"] for r in planted["runs"]] == [1.0, 1.0, 0.5]
    # The text table and the Trend view read the kept state: the same figures
    assert build_trend(runs).to_json() == figures
    # One run's rows blanked, its size and mtime put back: its ctime changed, so it is
    # computed again. That run is read (its rows are now blank), the others come from their
    # aggregates, unchanged.
    _blank_keeping_size_and_mtime(runs[2] / "attempts.jsonl")
    changed = json.loads(cli("trend", "--runs", str(folder), "--json").stdout)
    assert [r["success_rate"] for r in changed["runs"]] == [1.0, 1.0, None]
    assert changed["runs"][2]["skipped_lines"] == 1
    assert _entries(home) == [entry]  # the same selection's entry, replaced
    assert (
        cli("trend", "--runs", str(folder), "--json").stdout
        == json.dumps(changed, ensure_ascii=False) + "\n"
    )


def test_other_options_and_a_run_s_own_figures_are_computed_again(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = [_run(tmp_path, "a", 1, 4), _run(tmp_path, "b", 2, 4), _run(tmp_path, "c", 3, 1)]
    whole = build_trend(runs)
    assert "regression" in whole.runs[2].flag_names()
    # other options: their own answer (and entry), not the kept one
    assert [r.run_id for r in build_trend(runs, last=2).runs] == ["b", "c"]
    lenient = build_trend(runs, allowed_pp=80.0)
    assert "regression" not in lenient.runs[2].flag_names()
    assert len(_entries(home)) == 3
    assert entry_file([d.resolve() for d in runs], {}) not in _entries(home)
    # a kept trend is keyed by the runs' files, not by another cache's: once it is gone, a
    # run's aggregate entry is what is read (rewritten and sealed again, as a forger holding
    # the user's rights could: ``cache_seal``), so what it says shows
    for kept in _entries(home):
        kept.unlink()
    entry = runs[0] / ".trend-aggregate.json"
    key, _, payload = entry.read_bytes().split(b"\n", 2)
    cached = json.loads(payload)
    cached["harness_errors"] = 5
    entry.write_bytes(cache_seal.sealed(key, json.dumps(cached).encode()))
    assert build_trend(runs).runs[0].run.harness_errors == 5
    # the kept entries are bounded: the oldest go
    for day in range(4, 4 + (CACHE.keep or 0)):
        build_trend([*runs, _run(tmp_path, f"d{day}", day, 4)])
    assert len(_entries(home)) == CACHE.keep


def test_a_kept_trend_is_the_same_trend(
    home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    runs = [_run(tmp_path, "a", 1, 4), _run(tmp_path, "b", 2, 1), _run(tmp_path, "c", 3, 2)]
    with monkeypatch.context() as off:
        off.setenv("DRIFTDESK_NO_CACHE", "1")  # computed, not the kept one
        trend = build_trend(runs)
    assert [r.flag_names() for r in trend.runs] == [[], ["regression"], []]
    state = json.loads(json.dumps(trend.to_state()))
    assert Trend.from_state(state) == trend
    assert build_trend(runs) == trend  # computed and kept
    assert build_trend(runs) == trend  # read from what was kept
