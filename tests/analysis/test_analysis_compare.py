"""compare: the shared-task, paired answer (the tests recompute each statistic by brute force)."""

from __future__ import annotations

import itertools
import json
import math
import os
import random
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.compare import compare_runs
from driftdesk.analysis.paired import sign_flip, stratified_permutation
from driftdesk.analysis.report import build_report

approx = pytest.approx


def run_with(
    root: Path,
    run_id: str,
    rates: dict[str, float],
    repeat: int,
    *,
    started: str,
    model: str = "gpt-4o",
    seed: int = 1,
) -> Path:
    rng = random.Random(seed)
    rows = [
        attempt_row(run_id, task, a, "pass" if rng.random() < p else "fail", model=model)
        for task, p in rates.items()
        for a in range(repeat)
    ]
    run = write_run(root, run_id, list(rows), tasks=list(rates), repeat=repeat, model=model)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["started_at"] = started
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_rerun_of_some_tasks_is_compared_on_the_shared_tasks(tmp_path: Path) -> None:
    """Seen: rerunning 16 volatile tasks of 34 and comparing with the original printed the
    success rates of two different task sets and 18 lines of "pass → absent"."""
    rng = random.Random(5)
    rates = {f"t{i:02d}": rng.choice([0.0, 0.5, 1.0]) for i in range(34)}
    original = run_with(tmp_path, "orig", rates, 3, started="2026-11-29T10:00:00Z")
    rerun_tasks = {t: 0.5 for t in list(rates)[:16]}
    rerun = run_with(tmp_path, "rerun", rerun_tasks, 5, started="2026-11-30T10:00:00Z")
    comparison = compare_runs(original, rerun)
    assert (comparison.shared_tasks, comparison.only_in_a, comparison.only_in_b) == (16, 18, 0)
    assert all("absent" not in (c.before, c.after) for c in comparison.changed)
    shared_a = [t for t in build_report([original])[0].tasks if t.task_id in rerun_tasks]
    success = next(m for m in comparison.metrics if m.name == "success_rate")
    assert success.a == approx(sum(t.success_rate or 0 for t in shared_a) / 16)
    assert any("repeat counts differ (A 3, B 5)" in w for w in comparison.warnings)
    assert any("18 only in A" in w for w in comparison.warnings)
    data = comparison.to_json()
    assert (data["shared_tasks"], data["only_in_a"], data["only_in_b"]) == (16, 18, 0)
    assert data["a"]["repeats"] == 3 and data["b"]["repeats"] == 5
    # --all-tasks keeps the whole-run view (and lists the one-sided tasks)
    whole = compare_runs(original, rerun, all_tasks=True)
    assert any(c.after == "absent" for c in whole.changed)


def test_the_runs_stay_in_the_order_given_and_a_newer_a_is_said(tmp_path: Path) -> None:
    """Runs given newest first used to be swapped (the newer as B), flipping the sign of every
    delta against the order the user gave. Now A and B stay; a warning says A is newer."""
    rates = {f"t{i}": 0.5 for i in range(6)}
    old = run_with(tmp_path, "old", rates, 2, started="2026-11-01T00:00:00Z")
    new = run_with(tmp_path, "new", rates, 2, started="2026-11-02T00:00:00Z", model="gpt-4.1")
    comparison = compare_runs(new, old)
    assert (comparison.a.run_id, comparison.b.run_id, comparison.swapped) == ("new", "old", False)
    assert comparison.newer == "a" and comparison.to_json()["newer"] == "a"
    assert any("A (new) started after B (old)" in w for w in comparison.warnings)
    assert any("models differ (A gpt-4.1, B gpt-4o)" in w for w in comparison.warnings)
    assert compare_runs(old, new).warnings == [
        w for w in compare_runs(old, new).warnings if "started after" not in w
    ]
    swapped = compare_runs(new, old, newer_as_b=True)  # asked for: said, and marked
    assert (swapped.a.run_id, swapped.swapped) == ("old", True)
    assert any("new is the newer run, so it is B" in w for w in swapped.warnings)


def test_compare_of_imported_runs_keeps_the_order_given(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Seen: `compare A B` of imported runs put the later import as B, so the delta had the
    sign the user did not ask for."""
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(
        "".join(json.dumps({"task_id": f"t{i}", "success": True}) + "\n" for i in range(8))
    )
    bad.write_text(
        "".join(json.dumps({"task_id": f"t{i}", "success": i < 2}) + "\n" for i in range(8))
    )
    out = tmp_path / "runs"
    for source, run_id in ((good, "good"), (bad, "bad")):  # bad is imported later
        done = cli("import", str(source), "--out", str(out), "--run-id", run_id)
        assert done.returncode == 0, done.stderr
    done = cli("compare", str(out / "bad"), str(out / "good"), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["a"]["run_id"], data["b"]["run_id"]) == ("bad", "good")
    assert data["delta"]["success_rate"]["value"] == approx(0.75)  # good − bad, as asked
    assert data["newer"] == "a" and not data["swapped"]
    assert any("started after" in w for w in data["warnings"])


def brute_mcnemar(a_only: int, b_only: int) -> float:
    """Two-sided binomial test at ½: the sum of the outcomes no more likely than the observed."""
    n = a_only + b_only
    pmf = [math.comb(n, i) / 2**n for i in range(n + 1)]
    return min(1.0, sum(p for p in pmf if p <= pmf[a_only] * (1 + 1e-9)))


@pytest.mark.parametrize(("a_only", "b_only"), [(0, 0), (1, 6), (3, 3), (2, 9), (10, 1)])
def test_one_attempt_per_task_the_permutation_test_is_mcnemars(a_only: int, b_only: int) -> None:
    tables = [(1, 1, 1, 0)] * a_only + [(1, 0, 1, 1)] * b_only + [(1, 1, 1, 1), (1, 0, 1, 0)]
    assert stratified_permutation(tables).p_value == approx(brute_mcnemar(a_only, b_only))


def brute_stratified(tables: list[tuple[int, int, int, int]]) -> tuple[float, float]:
    """Every way of dealing each task's passes between its A and B attempts, enumerated: the
    observed mean difference and its two-sided (twice the smaller tail) p-value."""
    outcomes = []  # (mean difference, probability) of each joint deal
    per_task = []
    for na, pa, nb, pb in tables:
        attempts = [1] * (pa + pb) + [0] * (na + nb - pa - pb)
        deals = list(itertools.combinations(range(na + nb), nb))
        per_task.append([(sum(attempts[i] for i in deal), 1 / len(deals)) for deal in deals])
    for joint in itertools.product(*per_task):
        diff = sum(
            b / nb - (pa + pb - b) / na
            for (b, _), (na, pa, nb, pb) in zip(joint, tables, strict=True)
        )
        outcomes.append((diff / len(tables), math.prod(w for _, w in joint)))
    observed = sum(pb / nb - pa / na for na, pa, nb, pb in tables) / len(tables)
    low = sum(w for d, w in outcomes if d <= observed + 1e-12)
    high = sum(w for d, w in outcomes if d >= observed - 1e-12)
    return observed, min(1.0, 2 * min(low, high))


@pytest.mark.parametrize(
    "tables",
    [
        [(3, 3, 3, 0), (3, 1, 3, 1), (2, 2, 2, 2)],
        [(4, 2, 3, 0), (2, 1, 3, 3), (3, 0, 3, 1)],  # repeats differ per task and per run
        [(2, 2, 2, 0), (2, 2, 2, 0), (2, 0, 2, 1), (1, 1, 1, 0)],
    ],
)
def test_stratified_permutation_is_exact(tables: list[tuple[int, int, int, int]]) -> None:
    value, p_value = brute_stratified(tables)
    test = stratified_permutation(tables)
    assert (test.value, test.p_value) == (approx(value), approx(p_value))
    assert test.method == "stratified-permutation"


def test_ci_and_p_value_never_disagree() -> None:
    """Seen: 'CI -45.0–-5.0 pp; could be noise (p = 0.0625)': a bootstrap CI and a sign-flip
    p-value. Now both come from one null: p < 0.05 exactly when the CI excludes 0, on exact
    and on normal-approximation nulls (big runs), for success and for the gap."""
    rng = random.Random(3)
    methods = set()
    for case in range(300):
        tasks = rng.choice([1, 2, 5, 20, 60]) if case % 30 else 3000
        tables = []
        for _ in range(tasks):
            na, nb = rng.choice([1, 3, 5]), rng.choice([1, 3, 5])
            p, q = rng.random(), rng.random() if rng.random() < 0.3 else None
            pa = sum(rng.random() < p for _ in range(na))
            pb = sum(rng.random() < (p if q is None else q) for _ in range(nb))
            tables.append((na, pa, nb, pb))
        gap = [100.0 * rng.choice([-1, 0, 0, 1]) for _ in range(tasks)]
        for test in (stratified_permutation(tables), sign_flip(gap)):
            methods.add(test.method)
            low, high = test.ci95
            assert low <= test.value <= high
            assert (test.p_value < 0.05) == (not low <= 0 <= high), (test, tables)
    assert methods == {
        "stratified-permutation",
        "stratified-permutation-normal",
        "sign-flip-permutation",
        "sign-flip-normal",
    }


def test_sign_flip_is_exact_for_few_tasks() -> None:
    diffs = [0.5, 0.25, -0.25, 1.0, 0.0, 0.75, 0.5]
    nonzero = [d for d in diffs if d]
    observed = abs(sum(nonzero))
    sums = [
        abs(sum(s * d for s, d in zip(signs, nonzero, strict=True)))
        for signs in itertools.product((1, -1), repeat=len(nonzero))
    ]
    expected = sum(1 for s in sums if s >= observed - 1e-12) / len(sums)
    assert sign_flip(diffs).p_value == approx(expected)
    many = [0.5] * 30 + [-0.25] * 5
    assert sign_flip(many).p_value < 0.001


def test_one_attempt_per_task_gives_mcnemars_p_value(tmp_path: Path) -> None:
    # 20 tasks; A passes t0..t9; B passes t3..t17: A only 3 (t0..t2), B only 8 (t10..t17)
    a_rows = [attempt_row("a", f"t{i:02d}", 0, "pass" if i < 10 else "fail") for i in range(20)]
    b_rows = [
        attempt_row("b", f"t{i:02d}", 0, "pass" if 3 <= i < 18 else "fail") for i in range(20)
    ]
    a = write_run(tmp_path, "a", list(a_rows))
    b = write_run(tmp_path, "b", list(b_rows))
    comparison = compare_runs(a, b)
    delta = comparison.delta["success_rate"]
    assert delta.test == "stratified-permutation"
    assert delta.value == approx((15 - 10) / 20)
    assert delta.p_value == approx(brute_mcnemar(3, 8))
    low, high = delta.ci95 or [None, None]
    assert low is not None and high is not None and low <= 0.25 <= high
    assert compare_runs(a, b).delta["success_rate"].ci95 == delta.ci95  # seeded
    assert delta.sentence.startswith("B is better by 25.0 pp (success rate), 95 % CI ")
    assert "could be noise" in delta.sentence  # p = 0.23


def test_several_attempts_are_permuted_within_tasks_and_it_says_when_it_is_not_noise(
    tmp_path: Path,
) -> None:
    before = {f"t{i:02d}": 0.3 for i in range(40)}
    after = {f"t{i:02d}": 0.9 for i in range(40)}
    a = run_with(tmp_path, "a", before, 4, started="2026-11-01T00:00:00Z", seed=2)
    b = run_with(tmp_path, "b", after, 4, started="2026-11-02T00:00:00Z", seed=3)
    comparison = compare_runs(a, b)
    delta = comparison.delta["success_rate"]
    assert delta.test == "stratified-permutation"
    pairs = list(zip(*(build_report([run], sort="task")[0].tasks for run in (a, b)), strict=True))
    diffs = [(tb.success_rate or 0) - (ta.success_rate or 0) for ta, tb in pairs]
    assert delta.value == approx(sum(diffs) / len(diffs))
    assert delta.p_value is not None and delta.p_value < 0.001
    assert "unlikely to be noise" in delta.sentence
    # The gap's delta, B − A, recomputed: its value and sign, not only that it has a p and CI.
    gap = comparison.delta["consistency_gap_pp"]
    gap_diffs = [((tb.spread or 0) - (ta.spread or 0)) * 100 for ta, tb in pairs]
    assert gap.value == approx(sum(gap_diffs) / len(gap_diffs))
    assert gap.value < -10  # at 0.9, fewer tasks both pass and fail than at 0.3
    shown = next(m for m in comparison.metrics if m.name == "consistency_gap_pp")
    assert shown.a is not None and shown.b is not None
    assert gap.value == approx(shown.b - shown.a)
    assert gap.p_value == approx(sign_flip(gap_diffs).p_value)
    assert gap.ci95 is not None and gap.ci95[0] <= gap.value <= gap.ci95[1]
    assert gap.sentence.startswith("B is better by ") and "(consistency gap)" in gap.sentence


def test_compare_json_contract(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rates = {f"t{i}": 0.5 for i in range(8)}
    a = run_with(tmp_path, "a", rates, 3, started="2026-11-01T00:00:00Z")
    b = run_with(tmp_path, "b", dict(list(rates.items())[:6]), 3, started="2026-11-02T00:00:00Z")
    done = cli("compare", str(a), str(b), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["shared_tasks"], data["only_in_a"], data["only_in_b"]) == (6, 2, 0)
    assert data["a"]["run_id"] == "a" and data["a"]["repeats"] == 3
    assert data["a"]["models"] == ["gpt-4o"]
    for name in ("success_rate", "consistency_gap_pp"):
        entry = data["delta"][name]
        assert set(entry) >= {"value", "ci95", "p_value"}
        assert len(entry["ci95"]) == 2 and 0 <= entry["p_value"] <= 1
    table = cli("compare", str(a), str(b)).stdout
    assert "shared tasks 6  left out: 2 only in A, 0 only in B" in table
    assert "95 % CI" in table and "p = " in table


def test_compare_of_run_dirs_reads_no_task_stats_and_says_what_compare_of_reports_says(
    tmp_path: Path,
) -> None:
    """Seen at 10M rows a run: ``compare`` of two such runs peaked at 975 MiB, 49 MiB under
    its 1 GiB bound, and most of it was the two runs' 400,000 ``TaskStats`` (a report of one
    such run peaks at 578 MiB). Given run dirs, a comparison now reads the five facts per task
    it uses, and its reports carry no task lists; what it says is what the full reports say."""
    rng = random.Random(8)
    rates = {f"t{i:02d}": rng.choice([0.0, 0.3, 0.7, 1.0]) for i in range(30)}
    # no repeat in the manifests (the repeats are read from the tasks), tasks on one side only,
    # a retried slot, a link error and a bad line
    a_rows: list[dict[str, object] | str] = [
        attempt_row("a", task, k, "pass" if rng.random() < p else "fail")
        for task, p in list(rates.items())[:26]
        for k in range(3)
    ]
    a_rows += [attempt_row("a", "t00", 1, "pass"), attempt_row("a", "t01", 0, "link_error")]
    a_rows.append("{not json")
    b_rows: list[dict[str, object] | str] = [
        attempt_row("b", task, k, "pass" if rng.random() < p else "fail")
        for task, p in list(rates.items())[4:]
        for k in range(4)
    ]
    a, b = write_run(tmp_path, "a", a_rows), write_run(tmp_path, "b", b_rows)
    for all_tasks in (False, True):
        from_dirs = compare_runs(a, b, all_tasks=all_tasks)
        from_reports = compare_runs(build_report([a])[0], build_report([b])[0], all_tasks=all_tasks)
        assert from_dirs.to_json() == from_reports.to_json()
        assert (from_dirs.shared_tasks, from_dirs.only_in_a, from_dirs.only_in_b) == (22, 4, 4)
        assert from_dirs.to_json()["a"]["repeats"] == 3
        assert from_dirs.to_json()["b"]["repeats"] == 4
        assert from_dirs.a.tasks == [] and from_dirs.b.tasks == []
        assert from_dirs.a.skipped_line_count == 1


def test_compare_of_a_run_with_itself_and_of_a_glob_of_runs(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Seen: ``driftdesk compare RUN RUN`` stopped with "not enough values to unpack" (the two
    sources were read as one list, which holds a run once); a glob naming two runs was
    compared by its first run, or stopped the same way."""
    rates = {f"t{i}": 0.5 for i in range(5)}
    a = run_with(tmp_path, "a", rates, 3, started="2026-11-01T00:00:00Z")
    run_with(tmp_path, "b", rates, 3, started="2026-11-02T00:00:00Z")
    done = cli("compare", str(a), str(a), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["shared_tasks"], data["changed"]) == (5, [])
    assert data["delta"]["success_rate"]["value"] == 0
    both = cli("compare", str(tmp_path / "*"), str(a))
    assert both.returncode != 0
    assert "names 2 runs; compare takes one run a side" in both.stderr


def test_a_run_that_is_not_there_is_refused_before_the_other_is_read(
    cli, home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Both runs are checked before either is read (reading one of 10M rows takes a minute).
    Run A's attempts file here is a pipe nobody writes: reading it would never end."""
    a = tmp_path / "a"
    a.mkdir()
    (a / "manifest.json").write_text(json.dumps({"run_id": "a", "tasks": ["t"], "repeat": 1}))
    os.mkfifo(a / "attempts.jsonl")
    done = cli("compare", str(a), str(tmp_path / "nope"), timeout=30)
    assert done.returncode != 0
    assert f"{tmp_path / 'nope'}: no such run dir or attempts file" in done.stderr


def test_the_comparison_as_json_in_process(tmp_path: Path) -> None:
    """What ``compare --format json`` prints, for the McNemar case above: each metric's A, B,
    delta and CIs, and each paired delta, rounded to 6 decimals."""
    a_rows = [attempt_row("a", f"t{i:02d}", 0, "pass" if i < 10 else "fail") for i in range(20)]
    b_rows = [
        attempt_row("b", f"t{i:02d}", 0, "pass" if 3 <= i < 18 else "fail") for i in range(20)
    ]
    a, b = write_run(tmp_path, "a", list(a_rows)), write_run(tmp_path, "b", list(b_rows))
    data = compare_runs(a, b).to_json()
    metrics = {m["name"]: m for m in data["metrics"]}
    assert metrics["success_rate"] == {
        "name": "success_rate", "a": 0.5, "b": 0.75, "delta": 0.25,
        "ci_a": [0.25, 0.75], "ci_b": [0.55, 0.9],
    }  # fmt: skip
    assert metrics["c_out"] == {
        "name": "c_out", "a": None, "b": None, "delta": None, "ci_a": None, "ci_b": None
    }  # fmt: skip
    success = data["delta"]["success_rate"]
    assert {k: success[k] for k in ("value", "p_value", "test")} == {
        "value": 0.25,
        "p_value": 0.226562,  # 29/128, to 6 decimals: exact McNemar, which it equals here
        "test": "stratified-permutation",
    }
    assert success["ci95"] == [-0.1, 0.6]  # from the same permutation null as its p-value
    assert success["sentence"].startswith("B is better by 25.0 pp (success rate)")
    # A delta of a third, to 6 decimals.
    thirds = [write_run(tmp_path / side, side, [
        attempt_row(side, f"t{i}", 0, "pass" if i < passes else "fail") for i in range(3)
    ]) for side, passes in (("x", 1), ("y", 2))]  # fmt: skip
    third = compare_runs(*thirds).to_json()
    assert next(m for m in third["metrics"] if m["name"] == "success_rate")["delta"] == 0.333333
    assert third["delta"]["success_rate"]["value"] == 0.333333
