"""Trend's paired verdicts split with a second process (``trend_pairs.Helper``): the same
verdicts as computed here, whatever happens to the helper, and nothing in its environment."""

from __future__ import annotations

import dataclasses
import random
import time
from pathlib import Path

import pytest

from driftdesk.analysis import trend_pairs
from driftdesk.analysis.trend_pairs import Helper, PairInput, compute, helper_for


def _inputs(count: int, seed: int = 3) -> list[PairInput]:
    rng = random.Random(seed)
    skills = [rng.choice([1.0, 0.9, 0.6, 0.2, 0.0]) for _ in range(60)]

    def run(drop: float = 0.0) -> dict[str, list[int]]:
        return {
            f"t{i}": [8, sum(rng.random() < s - drop for _ in range(8))]
            for i, s in enumerate(skills)
        }

    # every third pair's second run lost a fifth of its skill: a regression
    return [(f"run-{i}", run(), run(0.2 * (i % 3 == 0)), 0.0) for i in range(count)]


def test_the_helpers_verdicts_are_the_ones_computed_here() -> None:
    inputs = _inputs(trend_pairs.PARALLEL_FROM + 6)
    helper = Helper()
    try:
        assert helper.give(inputs[1::2])
        theirs = helper.result(len(inputs[1::2]))
    finally:
        helper.close()
    assert theirs == compute(inputs[1::2])  # computed there, not by a fallback here
    with helper_for(runs=len(inputs) + 1) as second:
        assert second is not None
        split = trend_pairs._compute_all(inputs, second)
    assert split == compute(inputs)
    assert {o.passed for o in split} == {True, False}  # both verdicts occur among them


def test_a_helper_that_dies_leaves_its_share_to_this_process() -> None:
    inputs = _inputs(trend_pairs.PARALLEL_FROM + 2, seed=5)
    helper = Helper()
    assert helper.process is not None
    helper.process.kill()
    helper.process.wait()
    try:
        assert trend_pairs._compute_all(inputs, helper) == compute(inputs)
    finally:
        helper.close()
    assert helper.process is None


def test_the_helper_gets_no_environment_but_where_python_finds_driftdesk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-in-the-helper-0123456789")
    monkeypatch.setenv("HOME", "/nowhere-the-helper-needs")
    with helper_for(runs=trend_pairs.PARALLEL_FROM + 1) as helper:
        assert helper is not None and helper.process is not None
        environ = b""
        deadline = time.monotonic() + 10
        while not environ and time.monotonic() < deadline:  # empty until it has exec'd
            environ = Path(f"/proc/{helper.process.pid}/environ").read_bytes()
            time.sleep(0.01)
        names = {entry.split(b"=", 1)[0] for entry in environ.split(b"\0") if entry}
        process = helper.process
    assert names == {b"PYTHONPATH", b"PYTHONSAFEPATH"}
    assert b"sk-test-never" not in environ
    assert process.returncode is not None  # ended on exit, unused: killed and reaped


def test_few_runs_start_no_helper() -> None:
    with helper_for(runs=trend_pairs.PARALLEL_FROM) as helper:
        assert helper is None


def test_verdicts_are_kept_and_the_oldest_go_past_the_limit(
    home, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from driftdesk.analysis.trend_data import RunAggregate
    from driftdesk.paths import cache_dir

    inputs = _inputs(6, seed=7)
    runs = [RunAggregate(f"r{i}", f"/runs/r{i}", tasks=t) for i, (_, t, _, _) in enumerate(inputs)]
    pairs = [(i - 1, i) for i in range(1, len(runs))]
    digests = [trend_pairs.tasks_digest(r.tasks) for r in runs]
    first = trend_pairs.paired_outcomes(runs, pairs, digests, 0.0)
    folder = cache_dir() / "trend" / "pairs"
    assert len(list(folder.iterdir())) == len(pairs)
    # kept: read back, not computed (a computation here would fail)
    computing = trend_pairs.compute
    monkeypatch.setattr(trend_pairs, "compute", lambda inputs: pytest.fail("computed again"))
    assert trend_pairs.paired_outcomes(runs, pairs, digests, 0.0) == first
    monkeypatch.setattr(trend_pairs, "compute", computing)
    monkeypatch.setattr(trend_pairs, "CACHE", dataclasses.replace(trend_pairs.CACHE, keep=2))
    changed = [*digests[:-1], "another run's counts"]
    trend_pairs.paired_outcomes(runs, pairs, changed, 0.0)  # one new verdict: the folder pruned
    assert len(list(folder.iterdir())) == 2
