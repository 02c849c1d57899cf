"""compare's verdicts at their edges, found unguarded by mutation testing (tests/mutants): what
the sentence says at p = 0.05 exactly and around "the same" (a change under 0.05 pp), and the
table's cells. Real run dirs where the runs matter; ``paired_deltas`` on task outcomes (what
compare reads of each task) where only the arithmetic does."""

from __future__ import annotations

from pathlib import Path

from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.compare import TaskOutcome, compare_runs, paired_deltas


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
