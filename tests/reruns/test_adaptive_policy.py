"""The adaptive allocation policy alone (pure: rows in, next slot and stop reason out)."""

from __future__ import annotations

import pytest

from driftdesk.reruns.adaptive import AdaptiveDesign, AdaptivePolicy, DesignError, stable_after


def row(task_id: str, attempt: int, outcome: str, **extra: object) -> dict:
    return {"task_id": task_id, "attempt": attempt, "outcome": outcome, **extra}


def drain(policy: AdaptivePolicy) -> list[tuple[str, int]]:
    """Every slot the policy hands out now, none finishing."""
    slots = []
    while (slot := policy.next_slot()) is not None:
        slots.append(slot)
        assert len(slots) < 1000
    return slots


def test_the_stable_rule_is_the_stated_one() -> None:
    n = stable_after()
    assert n == 8
    assert (2 / 3) ** n <= 0.05 < (2 / 3) ** (n - 1)
    assert stable_after(0.3, 0.9) == 7


def test_volatile_target_starts_only_what_could_still_be_needed() -> None:
    policy = AdaptivePolicy(AdaptiveDesign.parse("volatile"), ["a", "b"])
    slots = drain(policy)
    # the first round first, spread over the tasks; then up to 8 per task, no more
    assert slots[:4] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    assert sorted(slots) == [(t, i) for t in "ab" for i in range(8)]
    assert policy.stop_reason is None  # attempts in flight: not done yet
    policy.finished(row("a", 0, "pass"))
    policy.finished(row("a", 1, "fail"))  # volatile now: its other 6 in flight still land
    for i in range(8):
        policy.finished(row("b", i, "pass"))
    assert policy.next_slot() is None and policy.stop_reason is None
    for i in range(2, 8):
        policy.finished(row("a", i, "pass"))
    assert policy.next_slot() is None
    assert policy.stop_reason == "target met: every task classified (or at --max-repeats)"
    assert policy.summary()["volatile_tasks"] == ["a"]
    assert policy.task_state("b").why == "always-pass"


def test_link_errors_are_replaced_by_new_attempts_and_capped() -> None:
    design = AdaptiveDesign.parse("volatile", max_repeats=3)
    rows = [row("a", 0, "link_error"), row("a", 1, "pass"), row("a", 2, "harness_error")]
    policy = AdaptivePolicy(design, ["a"], rows)
    assert policy.tallies["a"].judged == 1 and policy.tallies["a"].errors == 2
    assert policy.next_slot() == ("a", 3)  # another attempt in place of the errors
    policy.finished(row("a", 3, "link_error"))  # errors reach --max-repeats: no more
    assert policy.next_slot() is None
    assert policy.task_state("a").why == "stopped: 3 link/harness errors"


def test_an_interrupted_runs_gap_is_filled_first_so_numbers_stay_dense() -> None:
    rows = [row("a", 0, "pass"), row("a", 2, "pass"), row("b", 0, "fail"), row("b", 1, "fail")]
    policy = AdaptivePolicy(AdaptiveDesign.parse("volatile"), ["b", "a"], rows)
    assert policy.next_slot() == ("a", 1)
    policy.abandoned("a", 1)  # cancelled again: the number is free again
    assert policy.next_slot() == ("a", 1)


def test_ci_target_sends_attempts_where_the_variance_drops_most() -> None:
    rows = [row("flaky", 0, "pass"), row("flaky", 1, "fail")]
    rows += [row("sure", i, "pass") for i in range(2)]
    policy = AdaptivePolicy(AdaptiveDesign.parse("ci=5pp"), ["sure", "flaky"], rows)
    assert policy.next_slot() == ("flaky", 2)


def test_ci_target_waits_for_in_flight_attempts_that_would_meet_it() -> None:
    design = AdaptiveDesign.parse("ci=20pp", min_repeats=2)
    rows = [row(t, i, "pass") for t in ("a", "b", "c", "d") for i in range(2)]
    policy = AdaptivePolicy(design, ["a", "b", "c", "d"], rows)
    slots = drain(policy)
    assert slots  # ± 20 pp is not known from two passes per task yet
    assert policy.stop_reason is None and policy.in_flight() == len(slots)
    for task_id, attempt in slots:
        policy.finished(row(task_id, attempt, "pass"))
    assert policy.next_slot() is None
    assert policy.stop_reason is not None and policy.stop_reason.startswith("target met")
    found = policy.interval()
    assert found is not None and found[0] == 1.0 and found[2] == 1.0  # cut at 100 %
    assert policy.progress().ci_half_width is not None
    assert policy.progress().ci_half_width <= 0.20


def test_budgets_in_attempts_and_dollars() -> None:
    attempts = AdaptivePolicy(AdaptiveDesign.parse("volatile", budget_attempts=3), ["a", "b"])
    assert len(drain(attempts)) == 3
    for task_id, attempt in [("a", 0), ("b", 0), ("a", 1)]:
        attempts.finished(row(task_id, attempt, "pass"))
    assert attempts.next_slot() is None
    assert attempts.stop_reason == "budget spent: 3 of 3 attempts"

    design = AdaptiveDesign.parse("volatile", budget_usd=1.0)
    dollars = AdaptivePolicy(design, ["a"], cost_of=lambda r: float(r["cost"]))
    assert dollars.next_slot() == ("a", 0)
    dollars.finished(row("a", 0, "pass", cost=0.3))
    assert dollars.next_slot() == ("a", 1)  # 0.3 spent + 0.3 expected ≤ 1
    assert dollars.next_slot() == ("a", 2)  # 0.3 + 2 × 0.3 ≤ 1
    assert dollars.next_slot() is None  # 0.3 + 3 × 0.3 > 1: never started
    with pytest.raises(DesignError, match="price"):
        AdaptivePolicy(design, ["a"])


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("ci=5", {}, None),
        ("CI=2.5pp", {}, None),
        ("ci=0pp", {}, "above 0"),
        ("vol", {}, "use ci=<N>pp"),
        ("volatile", {"min_repeats": 1}, "--min-repeats 2"),
        ("ci=5pp", {"min_repeats": 4, "max_repeats": 3}, "at least --min-repeats"),
        ("ci=5pp", {"budget_attempts": 3, "budget_usd": 1.0}, "not both"),
        ("ci=5pp", {"budget_usd": 0.0}, "positive"),
    ],
)
def test_design_parsing(target: str, options: dict, message: str | None) -> None:
    if message is None:
        design = AdaptiveDesign.parse(target, **options)
        assert AdaptiveDesign.from_manifest(design.to_manifest()) == design
    else:
        with pytest.raises(DesignError, match=message):
            AdaptiveDesign.parse(target, **options)
