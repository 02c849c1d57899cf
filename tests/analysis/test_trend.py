"""``driftdesk trend`` and ``check --trend`` on a history of real runs (the sandbox through the
metering proxy, ``trend_history``), and on hand-made runs for the rules one at a time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run
from trend_history import (
    REGRESSION,
    ROUTED,
    SERVED_CHANGE,
    UNCHANGED,
    make_history,
    set_started,
)

from driftdesk.analysis.trend import build_trend
from driftdesk.analysis.trend_data import CACHE_FILE, user_cache_file

# One xdist worker runs this module, so its history fixture (a real six-run demo
# history, ~40 s) is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("trend-history")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Path], frozenset]]:
    """Made once by ``driftdesk demo --history`` (what a newcomer runs)."""
    out = tmp_path_factory.mktemp("nightly")
    runs, shifted, printed = make_history(out / "runs")
    # the demo prints the trend it made: the two flagged nights among the six
    assert printed.startswith("suite basic: 6 runs, oldest first")
    assert f"  3 served_model_changed: served {ROUTED}" in printed
    assert f"  5 regression: vs {runs[3].name}" in printed
    yield runs, shifted


def test_trend_flags_exactly_the_served_model_change_and_the_regression(history) -> None:  # type: ignore[no-untyped-def]
    runs, shifted = history
    trend = build_trend(runs)
    assert [r.run_id for r in trend.runs] == [p.name for p in runs]  # start order
    flagged = {i: r.flag_names() for i, r in enumerate(trend.runs) if r.flags}
    assert set(flagged) == {SERVED_CHANGE, REGRESSION}, flagged
    assert set(flagged[SERVED_CHANGE]) == {"served_model_changed", "fingerprint_changed"}
    assert "regression" in flagged[REGRESSION]
    served = trend.runs[SERVED_CHANGE].flags[0].evidence
    assert ROUTED in served and "simulated-model-1" in served and runs[1].name in served
    regression = next(f for f in trend.runs[REGRESSION].flags if f.name == "regression")
    assert f"vs {runs[REGRESSION - 1].name}" in regression.evidence
    assert "unlikely to be noise" in regression.evidence
    # the five tasks made to fail: always right before, never on the regression night
    assert len(shifted) == 5
    strips = {t.task_id: t for t in trend.tasks}
    for task_id in shifted:
        assert strips[task_id].success[REGRESSION - 1] == 1.0
        assert strips[task_id].success[REGRESSION] == 0.0
        assert strips[task_id].flips >= 1
    # sorted by flips, most first
    flips = [t.flips for t in trend.tasks]
    assert flips == sorted(flips, reverse=True) and len(flips) == 34
    first = trend.runs[0]
    assert set(first.run.served_models) == {"simulated-model-1"}
    assert set(trend.runs[-1].run.served_models) == {ROUTED}
    low, high = first.success_ci95 or (1.0, 0.0)
    assert first.success_rate is not None and low < first.success_rate < high
    p50, p95 = first.run.latency_p50_ms, first.run.latency_p95_ms
    assert p50 is not None and p95 is not None and p95 >= p50 > 0


def test_check_trend_fails_each_flagged_night_and_passes_an_unchanged_rerun(cli, history) -> None:  # type: ignore[no-untyped-def]
    runs, _ = history
    folder = runs[0].parent
    for index in (SERVED_CHANGE, REGRESSION):
        done = cli("check", str(runs[index]), "--trend", "--runs", str(folder))
        assert done.returncode == 1, done.stdout + done.stderr
    served = cli("check", str(runs[SERVED_CHANGE]), "--trend", "--format", "json")
    by_name = {c["name"]: c for c in json.loads(served.stdout)["conditions"]}
    assert not by_name["trend: no served_model_changed flag"]["passed"]
    assert by_name["trend: no regression flag"]["passed"]
    for index in (1, REGRESSION - 1, UNCHANGED):
        done = cli("check", str(runs[index]), "--trend")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "PASS  trend: no regression flag" in done.stdout
    # which flags gate is the job's choice
    only = cli("check", str(runs[SERVED_CHANGE]), "--trend", "--trend-flags", "regression")
    assert only.returncode == 0, only.stdout
    fingerprint = cli(
        "check", str(runs[SERVED_CHANGE]), "--trend", "--trend-flags", "fingerprint_changed"
    )
    assert fingerprint.returncode == 1, fingerprint.stdout
    bad = cli("check", str(runs[1]), "--trend", "--trend-flags", "regresion")
    assert bad.returncode == 2 and "unknown flag regresion" in bad.stderr


def test_the_regression_flag_and_check_baseline_never_disagree(cli, history) -> None:  # type: ignore[no-untyped-def]
    runs, _ = history
    trend = build_trend(runs)
    verdicts = []
    for index in range(1, len(runs)):
        done = cli("check", str(runs[index]), "--baseline", str(runs[index - 1]))
        assert done.returncode in (0, 1), done.stderr
        flagged = "regression" in trend.runs[index].flag_names()
        verdicts.append(flagged)
        assert (done.returncode == 1) == flagged, (index, done.stdout)
    assert verdicts.count(True) == 1  # both sides were seen


def test_trend_cli_table_and_json(cli, history) -> None:  # type: ignore[no-untyped-def]
    runs, _ = history
    folder = runs[0].parent
    table = cli("trend", "--runs", str(folder))
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("suite basic: 6 runs, oldest first")
    assert f"  5 regression: vs {runs[3].name}" in table.stdout
    assert "  3 served_model_changed: served routed-model-2" in table.stdout
    done = cli("trend", "--runs", str(folder), "--json", "--last", "3")
    data = json.loads(done.stdout)
    assert [r["run_id"] for r in data["runs"]] == [p.name for p in runs[-3:]]
    assert data["notes"] == ["showing the newest 3 of 6 runs (--last)"]
    first = data["runs"][0]
    for key in ("run_id", "started_at", "success_rate", "success_ci95", "consistency_gap_pp",
                "link_errors", "harness_errors", "served_models", "fingerprints",
                "tokens_per_attempt", "latency_p50_ms", "latency_p95_ms", "flags"):  # fmt: skip
        assert key in first
    assert [f["name"] for f in data["runs"][1]["flags"]] == ["regression"]
    assert all(len(t["success"]) == 3 for t in data["tasks"])
    # run dirs given one by one, and a suite named
    named = cli("trend", *map(str, runs[:2]), "--suite", "basic", "--json")
    assert [r["run_id"] for r in json.loads(named.stdout)["runs"]] == [p.name for p in runs[:2]]


# --- hand-made runs: one rule at a time -------------------------------------------------------


def _run(root: Path, name: str, day: int, outcomes: dict[str, list[str]], **extra) -> Path:  # type: ignore[no-untyped-def]
    rows = [
        attempt_row(name, task, attempt, outcome, **extra)
        for task, results in outcomes.items()
        for attempt, outcome in enumerate(results)
    ]
    run_dir = write_run(root, name, list(rows), tasks=list(outcomes), repeat=4)
    set_started(run_dir, f"2026-11-{day:02d}T10:00:00Z")
    return run_dir


def _same(tasks: int = 10) -> dict[str, list[str]]:
    return {f"t{i}": ["pass", "pass", "fail", "pass"] for i in range(tasks)}


def test_link_errors_up_by_the_exact_test_and_tokens_changed_beyond_noise(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", 1, _same())
    links = {t: ["pass", "link_error", "link_error", "pass"] for t in _same()}
    b = _run(tmp_path, "b", 2, links)
    c = _run(tmp_path, "c", 3, _same(), total_tokens=180)  # 120 → 180 per attempt, no spread
    d = _run(tmp_path, "d", 4, _same(), total_tokens=185)  # +2.8 %: under the 10 % rule
    trend = build_trend([d, c, b, a])
    names = [r.flag_names() for r in trend.runs]
    assert names[0] == []
    assert "link_errors_up" in names[1]
    evidence = next(f.evidence for f in trend.runs[1].flags if f.name == "link_errors_up")
    assert "20 link errors in 40 attempts (50.0%) vs 0 in 40 (0.0%) in a" in evidence
    assert names[2] == ["tokens_changed"] or "tokens_changed" in names[2]
    tokens = next(f.evidence for f in trend.runs[2].flags if f.name == "tokens_changed")
    assert "180 tokens per attempt vs 120 in b" in tokens and "+50.0%" in tokens
    assert "tokens_changed" not in names[3]


def test_runs_with_partly_different_tasks_are_compared_on_shared_ones_and_say_so(
    tmp_path: Path,
) -> None:
    a = _run(tmp_path, "a", 1, _same(10))
    fewer = {t: v for t, v in _same(10).items() if t not in ("t8", "t9")}
    fewer["extra"] = ["pass"] * 4
    b = _run(tmp_path, "b", 2, fewer)
    (second,) = build_trend([a, b]).runs[1:]
    assert second.shared_tasks == 8 and second.baseline == "a"
    assert second.notes == ["compared with a on the 8 shared tasks (1 only here, 2 only there)"]


def test_suite_and_profile_pick_the_runs(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = _run(tmp_path, "a", 1, _same())
    b = _run(tmp_path, "b", 2, _same())
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["suite"]["name"] = "other"
    (b / "manifest.json").write_text(json.dumps(manifest))
    newest = cli("trend", "--runs", str(tmp_path), "--json")
    data = json.loads(newest.stdout)
    assert data["suite"] == "other" and [r["run_id"] for r in data["runs"]] == ["b"]
    assert data["notes"] == ["left out 1 runs of other suites (--suite picks one)"]
    fixture = json.loads(cli("trend", str(a), str(b), "--suite", "fixture", "--json").stdout)
    assert [r["run_id"] for r in fixture["runs"]] == ["a"]
    unknown = cli("trend", "--runs", str(tmp_path), "--suite", "nope")
    assert unknown.returncode == 2 and "no run of suite 'nope'" in unknown.stderr
    profile = cli("trend", "--runs", str(tmp_path), "--profile", "nobody")
    assert profile.returncode == 2 and "no run of profile 'nobody'" in profile.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("trend", "--runs", str(empty)).returncode == 2
    assert cli("trend", "--runs", str(tmp_path / "missing")).returncode == 2


def _forget_kept_trends() -> None:
    import shutil

    from driftdesk.analysis import trend_cache

    shutil.rmtree(trend_cache.CACHE.place(), ignore_errors=True)


def _plant(entry: Path, field: str, value: int) -> None:
    """A figure planted in a run's trend entry, sealed again as a forger holding the user's
    rights could (``cache_seal``): a sealed entry is read as it is. The kept whole trends go
    (they are keyed by the runs' files, not by another cache's)."""
    from driftdesk.analysis import cache_seal

    _forget_kept_trends()

    key, _, payload = entry.read_bytes().split(b"\n", 2)
    aggregate = json.loads(payload)
    aggregate[field] = value
    entry.write_bytes(cache_seal.sealed(key, json.dumps(aggregate).encode()))


def test_the_cache_is_reused_dropped_on_change_and_changes_no_figure(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", 1, _same())
    b = _run(tmp_path, "b", 2, _same())
    cold = build_trend([a, b]).to_json()
    assert (a / CACHE_FILE).is_file() and (b / CACHE_FILE).is_file()
    warm = build_trend([a, b]).to_json()
    assert warm == cold
    # the cache is what is read: a planted figure shows (so the test can see it is used) …
    _plant(b / CACHE_FILE, "link_errors", 99)
    assert build_trend([a, b]).runs[1].run.link_errors == 99
    # … until a source changes: its entry is dropped and the rows read again
    with (b / "attempts.jsonl").open("a") as fh:
        fh.write(json.dumps(attempt_row("b", "t0", 4, "fail")) + "\n")
    again = build_trend([a, b])
    assert again.runs[1].run.link_errors == 0 and again.runs[1].run.tasks["t0"] == [5, 3]
    # deleting it changes no figure
    (b / CACHE_FILE).unlink()
    assert build_trend([a, b]).to_json() == again.to_json()
    # a cache that does not parse is read past
    (a / CACHE_FILE).write_text("{not json")
    assert build_trend([a, b]).to_json() == again.to_json()


def test_a_run_dir_the_cache_cannot_be_written_to_is_cached_under_the_user_cache_dir(
    home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Read-only run dirs (an archive, another user's) get their entry in the user's cache
    dir. Made unwritable here by a folder where the entry goes (chmod does not stop root)."""
    a = _run(tmp_path, "a", 1, _same())
    (a / CACHE_FILE).mkdir()
    figures = build_trend([a]).to_json()
    assert (a / CACHE_FILE).is_dir()
    fallback = user_cache_file(a)
    assert fallback.is_file() and fallback.is_relative_to(home.root / ".cache")
    _plant(fallback, "harness_errors", 7)  # read from there next time
    assert build_trend([a]).runs[0].run.harness_errors == 7
    fallback.unlink()
    _forget_kept_trends()  # made from the planted figure
    assert build_trend([a]).to_json() == figures
