"""compare's verdicts at their edges, found unguarded by mutation testing (tests/mutants): what
the sentence says at p = 0.05 exactly and around "the same" (a change under 0.05 pp), and the
table's cells. Real run dirs where the runs matter; ``paired_deltas`` on task outcomes (what
compare reads of each task) where only the arithmetic does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.compare import TaskOutcome, compare_runs, paired_deltas
from driftdesk.analysis.injection_report import r_fault
from driftdesk.analysis.sources import SourceError


def _outcome(n: int, passes: int) -> TaskOutcome:
    """A task's outcome as compare reads it (spread 1 when it both passed and failed)."""
    return TaskOutcome(n, passes, passes / n, 1.0 if 0 < passes < n else 0.0, None)


def test_p_exactly_0_05_could_be_noise(tmp_path: Path) -> None:
    # One task: A's one attempt passed, B's 39 all failed. The pass is A's in 1 deal of 40:
    # p = 2/40 = 0.05, not below 0.05; the CI reaches 0 exactly.
    a = write_run(tmp_path, "a", [attempt_row("a", "t0", 0, "pass")], tasks=["t0"], repeat=1)
    rows = [attempt_row("b", "t0", k, "fail") for k in range(39)]
    b = write_run(tmp_path, "b", list(rows), tasks=["t0"], repeat=39)
    success = compare_runs(a, b).delta["success_rate"]
    assert success.sentence == (
        "B is worse by 100.0 pp (success rate), 95 % CI -102.6 to 0.0 pp; "
        "could be noise (p = 0.05, stratified-permutation, 1 tasks)"
    )
    assert success.cells() == ("-100.0 pp", "-102.6–0.0", "0.05")


def test_a_change_under_0_05_pp_is_the_same_and_0_05_is_not() -> None:
    # One task, A failed its one attempt; B passed 1 of 2000 (+0.05 pp) or of 2001 (+0.04998).
    at = paired_deltas([(_outcome(1, 0), _outcome(2000, 1))])["success_rate"]
    assert at.value is not None and at.value * 100 == 0.05
    assert at.sentence.startswith("B is better by 0.1 pp (success rate), 95 % CI ")
    under = paired_deltas([(_outcome(1, 0), _outcome(2001, 1))])["success_rate"]
    assert under.sentence.startswith(
        "B and A have the same success rate over the 1 shared tasks, 95 % CI "
    )


def test_a_one_point_change_is_named_with_its_direction() -> None:
    # Ten tasks of 10: one went from 10/10 to 9/10, so success −1 pp and the gap +10 pp.
    pairs = [(_outcome(10, 10), _outcome(10, 9))] + [(_outcome(10, 10), _outcome(10, 10))] * 9
    deltas = paired_deltas(pairs)
    success, gap = deltas["success_rate"], deltas["consistency_gap_pp"]
    assert success.sentence == (
        "B is worse by 1.0 pp (success rate), 95 % CI -2.0 to 0.0 pp; "
        "could be noise (p = 1, stratified-permutation, 10 tasks)"
    )
    assert gap.sentence.startswith("B is worse by 10.0 pp (consistency gap), 95 % CI ")
    assert "could be noise" in gap.sentence and gap.sentence.endswith("10 tasks)")
    assert gap.cells()[0] == "+10.0 pp"  # the gap is in points already: not scaled again
    better = paired_deltas([(y, x) for x, y in pairs])["consistency_gap_pp"]
    assert better.sentence.startswith("B is better by 10.0 pp (consistency gap)")


def test_no_shared_task_has_nothing_to_say() -> None:
    deltas = paired_deltas([])
    for name, delta in deltas.items():
        assert (delta.name, delta.value, delta.ci95, delta.p_value, delta.test) == (
            name, None, None, None, "none"
        )  # fmt: skip
        assert delta.sentence == "no task was judged by both runs, so there is nothing to compare"
        assert delta.cells() == ("—", "—", "—")
    assert set(deltas) == {"success_rate", "consistency_gap_pp"}


def _run(root: Path, run_id: str, passes: dict[str, int], repeat: int, **manifest: object) -> Path:
    model = str(manifest.pop("model", "gpt-4o"))
    rows = [
        attempt_row(run_id, task, k, "pass" if k < passed else "fail", model=model)
        for task, passed in passes.items()
        for k in range(repeat)
    ]
    run = write_run(root, run_id, list(rows), tasks=list(passes), repeat=repeat, model=model)
    data = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(data | manifest))
    return run


def test_the_comparison_json_names_everything_it_compared(tmp_path: Path) -> None:
    """``compare --format json``'s every top-level entry, in process: two runs that differ in
    all a comparison warns about (start order, injected faults, tasks, repeats, models)."""
    clean = _run(
        tmp_path, "clean", {"t0": 2, "t1": 0, "t2": 1, "t3": 2}, 2,
        started_at="2026-11-02T00:00:00Z",
    )  # fmt: skip
    faulted = _run(
        tmp_path, "faulted", {"t0": 3, "t1": 3, "t2": 0, "t4": 1}, 3,
        model="gpt-4o-mini", started_at="2026-11-01T00:00:00Z",
        injection={"spec": "truncate:0.3"},
    )  # fmt: skip
    comparison = compare_runs(clean, faulted)
    data = comparison.to_json()
    assert list(data) == [
        "injection", "r_fault", "a", "b", "shared_tasks", "only_in_a", "only_in_b",
        "all_tasks", "swapped", "newer", "warnings", "delta", "metrics", "changed",
    ]  # fmt: skip
    assert data["injection"] == {"a": None, "b": "truncate:0.3"}
    # R_fault over t0, t1, t2: (clean, faulted) success (1, 1), (0, 1), (0.5, 0)
    assert data["r_fault"] == r_fault([(1.0, 1.0), (0.0, 1.0), (0.5, 0.0)]).to_json()
    assert data["r_fault"]["value"] == 4 / 3 and data["r_fault"]["tasks"] == 3
    unknown = {"kind": "builtin", "client": None, "version": None, "recorded": False}
    assert data["a"] == {
        "run_id": "clean", "repeats": 2, "models": ["gpt-4o"], "agent": unknown,
        "started_at": "2026-11-02T00:00:00Z", "tasks_judged": 4,
    }  # fmt: skip
    assert data["b"] == {
        "run_id": "faulted", "repeats": 3, "models": ["gpt-4o-mini"], "agent": unknown,
        "started_at": "2026-11-01T00:00:00Z", "tasks_judged": 4,
    }  # fmt: skip
    assert (data["shared_tasks"], data["only_in_a"], data["only_in_b"]) == (3, 1, 1)
    assert (data["all_tasks"], data["swapped"], data["newer"]) == (False, False, "a")
    assert data["warnings"] == [
        "A (clean) started after B (faulted) (an imported run starts when it was imported): "
        "the deltas are B − A in the order given, older minus newer",
        "B injected faults at the proxy (--inject truncate:0.3): its success change is what "
        "those faults cost",
        "compared over the 3 tasks both runs judged; left out: 1 only in A, 1 only in B",
        "repeat counts differ (A 2, B 3): a task run more often is more likely to show both a "
        "pass and a fail, so the consistency gap is biased towards the run with more repeats",
        "models differ (A gpt-4o, B gpt-4o-mini)",
    ]
    assert data["changed"] == [
        {"task_id": "t1", "before": "fail", "after": "pass", "success_a": 0.0, "success_b": 1.0},
        {"task_id": "t2", "before": "volatile", "after": "fail", "success_a": 0.5,
         "success_b": 0.0},
    ]  # fmt: skip
    # success over t0..t2: A 1/2 mean, B 2/3 mean: +1/6, to 6 decimals
    success = comparison.delta["success_rate"]
    assert data["delta"]["success_rate"] == {
        "value": 0.166667,
        "ci95": [round(v, 6) for v in success.ci95 or []],
        "p_value": round(success.p_value or 0.0, 6),
        "test": "stratified-permutation",
        "sentence": success.sentence,
    }
    low, high = success.ci95 or [0.0, 0.0]
    assert round(low, 6) != low and round(high, 6) != high  # so the rounding shows
    assert success.cells() == (
        "+16.7 pp",
        f"{low * 100:.1f}–{high * 100:.1f}",
        f"{success.p_value:.3g}",
    )
    assert high > 0  # the upper end scaled to points like the lower one
    assert success.sentence.startswith(
        f"B is better by 16.7 pp (success rate), 95 % CI {low * 100:.1f} to {high * 100:.1f} pp; "
    )
    nothing = compare_runs(clean, _run(tmp_path, "other", {"t9": 1}, 1)).to_json()
    assert nothing["delta"]["success_rate"] | {"sentence": ""} == {
        "value": None, "ci95": None, "p_value": None, "test": "none", "sentence": ""
    }  # fmt: skip
    assert nothing["r_fault"] is None and nothing["injection"] == {"a": None, "b": None}


def test_one_attempt_tasks_are_classed_and_a_task_on_one_side_is_absent(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {"t0": 1, "t1": 0, "t2": 1}, 1)
    b = _run(tmp_path, "b", {"t0": 0, "t1": 0, "t2": 1, "t3": 1}, 1)
    changed = [(c.task_id, c.before, c.after) for c in compare_runs(a, b).changed]
    assert changed == [("t0", "pass", "fail")]
    everything = compare_runs(a, b, all_tasks=True).changed
    assert [(c.task_id, c.before, c.after) for c in everything] == [
        ("t0", "pass", "fail"),
        ("t3", "absent", "pass"),
    ]
    assert (everything[1].success_a, everything[1].success_b) == (None, 1.0)
    # B judged a task A did not: its success is over the shared tasks, so the runs' own CIs
    # (over other task sets) are not shown beside it; whole-run counts are each run's own.
    metrics = {m.name: m for m in compare_runs(a, b).metrics}
    assert (metrics["success_rate"].a, metrics["success_rate"].b) == (2 / 3, 1 / 3)
    assert (metrics["success_rate"].ci_a, metrics["success_rate"].ci_b) == (None, None)
    assert (metrics["tasks_judged"].a, metrics["tasks_judged"].b) == (3, 4)
    assert (metrics["attempts_judged"].b, metrics["attempts_judged"].delta) == (4, 1)


def test_a_side_naming_several_runs_is_refused_saying_so(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {"t0": 1}, 1)
    _run(tmp_path, "b", {"t0": 1}, 1)
    with pytest.raises(SourceError, match=r"names 2 runs; compare takes one run a side"):
        compare_runs(tmp_path / "*", a)


def test_a_drop_every_repeat_confirms_is_unlikely_to_be_noise_in_so_many_words() -> None:
    # Four tasks of 4: two went from 4/4 to 0/4. Each split of its 4 passes over 8 attempts
    # has probability C(4,a)C(4,4−a)/70; all 4 in A for both is 1/4900, so p = 2/4900, and
    # the CI is −50 pp ∓ the null's 2.5 % quantile (a mean of ±25 pp, P = 0.074 past it).
    unchanged, dropped = (_outcome(4, 4), _outcome(4, 4)), (_outcome(4, 4), _outcome(4, 0))
    deltas = paired_deltas([dropped, dropped, unchanged, unchanged])
    assert deltas["success_rate"].sentence == (
        "B is worse by 50.0 pp (success rate), 95 % CI -75.0 to -25.0 pp; "
        "unlikely to be noise (p = 0.000408, stratified-permutation, 4 tasks)"
    )
    assert deltas["consistency_gap_pp"].sentence == (
        "B and A have the same consistency gap over the 4 shared tasks, 95 % CI 0.0 to 0.0 pp; "
        "could be noise (p = 1, sign-flip-permutation, 4 tasks)"
    )


def test_the_newer_run_made_b_is_said_and_a_run_without_judged_tasks_has_no_repeats(
    tmp_path: Path,
) -> None:
    older = _run(tmp_path, "older", {"t0": 1}, 1, started_at="2026-11-01T00:00:00Z")
    newer = _run(tmp_path, "newer", {"t0": 0}, 1, started_at="2026-11-02T00:00:00Z")
    swapped = compare_runs(newer, older, newer_as_b=True)
    assert (swapped.a.run_id, swapped.b.run_id) == ("older", "newer")
    assert (swapped.swapped, swapped.newer) == (True, "b")
    assert swapped.warnings[0] == "newer is the newer run, so it is B (after)"
    assert compare_runs(older, newer, all_tasks=True).all_tasks is True
    # Only link errors, no repeat in the manifest: no attempt per task to report.
    rows = [attempt_row("broken", "t0", k, "link_error", error_code="500") for k in range(2)]
    broken = write_run(tmp_path, "broken", list(rows))
    assert compare_runs(broken, older).repeats == (None, 1)


def test_r_fault_reads_the_faulted_side_whichever_it_is(tmp_path: Path) -> None:
    clean = _run(tmp_path, "clean", {"t0": 2, "t1": 0, "t2": 1}, 2)
    faulted = _run(
        tmp_path, "faulted", {"t0": 2, "t1": 2, "t2": 0}, 2, injection={"spec": "truncate:0.3"}
    )
    # (clean, faulted) success per task: (1, 1), (0, 1), (0.5, 0), with either run as A
    expected = r_fault([(1.0, 1.0), (0.0, 1.0), (0.5, 0.0)]).to_json()
    for a, b in ((clean, faulted), (faulted, clean)):
        found = compare_runs(a, b).r_fault
        assert found is not None and found.to_json() == expected


def test_report_options_apply_to_run_dirs_compared(tmp_path: Path) -> None:
    # t0 has one attempt a side: below min_runs=2 it is judged by neither run.
    a = _run(tmp_path, "a", {"t1": 1, "t2": 2}, 2)
    b = _run(tmp_path, "b", {"t1": 2, "t2": 2}, 2)
    for run, passed in ((a, "pass"), (b, "fail")):
        with (run / "attempts.jsonl").open("a") as rows:
            rows.write(json.dumps(attempt_row(run.name, "t0", 0, passed)) + "\n")
    assert compare_runs(a, b).shared_tasks == 3
    assert compare_runs(a, b, min_runs=2).shared_tasks == 2


def test_each_side_names_the_models_its_rows_name_else_its_manifests(tmp_path: Path) -> None:
    # Rows that name two models (a dated snapshot served for some): both, sorted.
    served = [
        attempt_row("served", "t0", k, "pass", model=model)
        for k, model in enumerate(["gpt-4o-2024-08-06", "gpt-4o"])
    ]
    served_run = write_run(tmp_path, "served", list(served), tasks=["t0"], repeat=2)
    # Rows that name none (a command agent's): the model the manifest asked for.
    unnamed = [attempt_row("unnamed", "t0", k, "pass", model=None) for k in range(2)]
    unnamed_run = write_run(
        tmp_path, "unnamed", list(unnamed), tasks=["t0"], repeat=2, model="claude-sonnet-4"
    )
    comparison = compare_runs(served_run, unnamed_run)
    data = comparison.to_json()
    assert data["a"]["models"] == ["gpt-4o", "gpt-4o-2024-08-06"]
    assert data["b"]["models"] == ["claude-sonnet-4"]
    both = "gpt-4o, gpt-4o-2024-08-06"
    assert comparison.warnings[-1] == f"models differ (A {both}, B claude-sonnet-4)"
    other_way = compare_runs(unnamed_run, served_run).warnings[-1]
    assert other_way == f"models differ (A claude-sonnet-4, B {both})"
    # Neither names one (a manifest without a model): no model, not a None one.
    manifest = json.loads((unnamed_run / "manifest.json").read_text())
    del manifest["model"]
    (unnamed_run / "manifest.json").write_text(json.dumps(manifest))
    comparison = compare_runs(served_run, unnamed_run)
    assert comparison.to_json()["b"]["models"] == []
    assert comparison.warnings[-1] == f"models differ (A {both}, B ?)"
    assert compare_runs(unnamed_run, served_run).warnings[-1] == f"models differ (A ?, B {both})"


def test_the_newer_run_is_said_only_when_both_starts_are_known_and_differ(tmp_path: Path) -> None:
    older = _run(tmp_path, "older", {"t0": 1}, 1, started_at="2026-11-01T00:00:00Z")
    newer = _run(tmp_path, "newer", {"t0": 1}, 1, started_at="2026-11-02T00:00:00Z")
    in_order = compare_runs(older, newer)
    assert (in_order.newer, in_order.swapped) == ("b", False)
    assert not any("started after" in w for w in in_order.warnings)
    assert compare_runs(newer, older).newer == "a"
    unknown = _run(tmp_path, "unknown", {"t0": 1}, 1, started_at=None)
    assert compare_runs(unknown, newer).newer is None
    assert compare_runs(newer, unknown).newer is None
    together = _run(tmp_path, "together", {"t0": 1}, 1, started_at="2026-11-02T00:00:00Z")
    assert compare_runs(together, newer).newer is None


def test_only_a_run_compared_with_itself_is_the_same_run(tmp_path: Path) -> None:
    run = _run(tmp_path, "r", {"t0": 1, "t1": 0}, 1, started_at="2026-11-01T00:00:00Z")
    itself = compare_runs(run, run)
    assert itself.warnings == ["A and B are the same run (r): every delta is 0 by construction"]
    # Other runs that started together, or a run id reused by a later run: not the same run.
    other = _run(tmp_path, "other", {"t0": 1, "t1": 0}, 1, started_at="2026-11-01T00:00:00Z")
    assert compare_runs(run, other).warnings == []
    again = _run(tmp_path / "later", "r", {"t0": 1, "t1": 0}, 1, started_at="2026-11-02T00:00:00Z")
    assert compare_runs(run, again).warnings == []


def test_the_adaptive_side_is_named_in_its_warning(tmp_path: Path) -> None:
    # As --adaptive --target volatile leaves a run: a task that both passed and failed stopped
    # at its 2nd attempt; the steady ones ran to 8.
    outcomes = {"t0": ["pass", "fail"], "t1": ["pass"] * 8, "t2": ["fail"] * 8}
    rows = [
        attempt_row("adaptive", task, k, outcome)
        for task, runs in outcomes.items()
        for k, outcome in enumerate(runs)
    ]
    adaptive = write_run(tmp_path, "adaptive", rows, tasks=list(outcomes), repeat=2)
    manifest = json.loads((adaptive / "manifest.json").read_text())
    manifest["adaptive"] = {"target": "volatile", "min_repeats": 2, "max_repeats": 8}
    (adaptive / "manifest.json").write_text(json.dumps(manifest))
    fixed = _run(tmp_path, "fixed", {"t0": 1, "t1": 2, "t2": 0}, 2)
    for a, b, side in ((adaptive, fixed, "A"), (fixed, adaptive, "B")):
        said = [w for w in compare_runs(a, b).warnings if "adaptive" in w]
        assert len(said) == 1
        assert said[0].startswith(f"{side}'s repeats were adaptive: its tasks have 2..8 attempts")
    # The same uneven attempts in a fixed run (one cut short): not worth a line.
    partial = write_run(tmp_path, "partial", rows, tasks=list(outcomes), repeat=8)
    comparison = compare_runs(partial, fixed)
    assert comparison.a.unequal_repeats is not None and comparison.a.adaptive is None
    assert not any("adaptive" in w for w in comparison.warnings)
