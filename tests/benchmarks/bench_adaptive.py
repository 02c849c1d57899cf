"""Benchmark: adaptive reruns against a fixed 10× design on the sandbox's built-in suite.

The sandbox decides each answer with a fixed per-task skill (``sandbox.task_skill``) and a draw
from ``Random(f"{seed}:{task}:{request}")``: the second draw of a task's answer request (the
first picks a fault). The in-process part reuses exactly that model — the k-th attempt of a
task in either design gets the same draw, as it would from one sandbox seed — and part 1 checks
it against the real engine on a real ``SandboxServer``, row by row. Part 2 runs both designs
through the real engine; part 3 runs ``--seeds`` seeds in process (fast) through the same
``AdaptivePolicy`` the engine asks, at the same concurrency.

Prints, side by side per target: attempts (adaptive / fixed), the volatile sets' agreement,
the success CI half-width and its coverage of the true rate (mean task skill).

    .venv/bin/python tests/benchmarks/bench_adaptive.py [--seeds 40] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import load, private_home

FIXED_REPEAT = 10
KEY = "sk-bench-adaptive-0123456789abcdef"


@dataclass
class Outcome:
    attempts: int
    volatile: set[str]
    half_width: float
    covered: bool


def sandbox_model(seed: int) -> Callable[[str, int], bool]:
    """Whether the k-th attempt of a task passes: the sandbox's own ``SimulatedModel`` plays
    the answer request with the sandbox's draw, and the suite's check judges the answer."""
    from driftdesk.reruns.simulated_endpoint import SimulatedModel
    from driftdesk.reruns.suites import judge, load_suite
    from driftdesk.wire.conversation import Conversation

    suite = load_suite("basic")
    model = SimulatedModel(suite.tasks)

    def passes(task_id: str, attempt: int) -> bool:
        task = suite.task(task_id)
        # A task with canned tools takes two requests per attempt: the tool calls, the answer.
        per_attempt = 2 if task.tools else 1
        request = attempt * per_attempt + per_attempt - 1
        rng = random.Random(f"{seed}:{task_id}:{request}")
        rng.random()  # the fault draw (no faults asked for)
        conv = Conversation(user_texts=[task.prompt_text])
        if task.tools:
            conv.results = {"call": "(the canned tool result)"}
        action = model.play(task, conv, rng)
        return judge(task.expected, action.text)

    return passes


def simulate(design_text: str | None, seed: int, concurrency: int, **options: int) -> Outcome:
    """One run in process: the engine's scheduling (a free worker asks the policy; attempts
    land in a seeded random order) with the sandbox's outcomes. ``None``: fixed 10×."""
    from driftdesk.analysis.metrics import repeat_ci95, repeat_half_width
    from driftdesk.reruns.adaptive import AdaptiveDesign, AdaptivePolicy
    from driftdesk.reruns.simulated_endpoint import task_skill
    from driftdesk.reruns.suites import load_suite

    tasks = load_suite("basic").task_ids
    truth = statistics.mean(task_skill(t) for t in tasks)
    passes = sandbox_model(seed)
    if design_text is None:
        counts = []
        volatile = set()
        for task_id in tasks:
            c = sum(passes(task_id, a) for a in range(FIXED_REPEAT))
            counts.append((FIXED_REPEAT, c))
            if 0 < c < FIXED_REPEAT:
                volatile.add(task_id)
        found, half = repeat_ci95(counts), repeat_half_width(counts)
        assert found is not None and half is not None
        return Outcome(len(tasks) * FIXED_REPEAT, volatile, half[1], found[1] <= truth <= found[2])
    policy = AdaptivePolicy(AdaptiveDesign.parse(design_text, **options), tasks)
    order = random.Random(f"order:{seed}")
    flight: list[tuple[str, int]] = []
    while True:
        while len(flight) < concurrency and (slot := policy.next_slot()) is not None:
            flight.append(slot)
        if not flight:
            break
        task_id, attempt = flight.pop(order.randrange(len(flight)))
        outcome = "pass" if passes(task_id, attempt) else "fail"
        policy.finished({"task_id": task_id, "attempt": attempt, "outcome": outcome})
    found = policy.interval()
    half = policy.progress().ci_half_width
    assert found is not None and half is not None and policy.stop_reason
    volatile = {t for t, tally in policy.tallies.items() if tally.passes and tally.fails}
    return Outcome(policy.rows, volatile, half, found[1] <= truth <= found[2])


async def real_run(base_url: str, out: Path, concurrency: int, **spec: object) -> list[dict]:
    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.run_spec import RunSpec
    from driftdesk.reruns.run_start import execute_run
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL

    outcome = await execute_run(
        RunSpec(
            profile=Profile("sim", "openai", base_url, SIM_MODEL),
            suite="basic",
            concurrency=concurrency,
            timeout_s=10,
            out_dir=out,
            api_key=KEY,
            **spec,  # type: ignore[arg-type]
        )
    )
    assert outcome.status == "completed", outcome
    lines = (outcome.run_dir / "attempts.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def part_real(seeds: list[int], concurrency: int) -> None:
    from driftdesk.reruns.adaptive import AdaptiveDesign
    from driftdesk.reruns.simulated_endpoint import SandboxServer

    print("1. the in-process model against the real engine on a real SandboxServer")
    with tempfile.TemporaryDirectory(prefix="bench-adaptive-") as tmp:
        seed = seeds[0]
        with SandboxServer(seed=seed) as server:
            # concurrency 1: a task's k-th attempt is its k-th answer request
            rows = asyncio.run(real_run(server.base_url, Path(tmp) / "check", 1, repeat=3))
        model = sandbox_model(seed)
        same = sum((r["outcome"] == "pass") == model(r["task_id"], r["attempt"]) for r in rows)
        print(f"   seed {seed}: {same} of {len(rows)} rows as the model predicts")
        if same != len(rows):
            raise SystemExit("the in-process model is not the sandbox's: figures below invalid")
        print(
            f"2. both designs through the real engine (concurrency {concurrency}; attempts in "
            "flight together draw in request order, so the pairing with the fixed run is looser "
            "than in process)"
        )
        for seed in seeds[:2]:
            results = {}
            for name, spec in (
                ("fixed 10x", {"repeat": FIXED_REPEAT}),
                ("volatile", {"adaptive": AdaptiveDesign.parse("volatile")}),
                ("ci=5pp", {"adaptive": AdaptiveDesign.parse("ci=5pp")}),
            ):
                with SandboxServer(seed=seed) as server:
                    out = Path(tmp) / f"{name}-{seed}".replace(" ", "")
                    rows = asyncio.run(real_run(server.base_url, out, concurrency, **spec))
                by_task: dict[str, set[str]] = {}
                for row in rows:
                    by_task.setdefault(row["task_id"], set()).add(row["outcome"])
                volatile = {t for t, seen in by_task.items() if seen == {"pass", "fail"}}
                results[name] = (len(rows), volatile, set(by_task))
            fixed_n, fixed_vol, tasks = results["fixed 10x"]
            for name in ("volatile", "ci=5pp"):
                n, vol, _ = results[name]
                agree = sum((t in vol) == (t in fixed_vol) for t in tasks) / len(tasks)
                print(
                    f"   seed {seed} {name:>8}: {n} attempts vs {fixed_n} "
                    f"({n / fixed_n:.2f}); volatile sets agree on {agree:.1%} of tasks"
                )


def part_simulated(seeds: list[int], concurrency: int) -> None:
    print(f"3. {len(seeds)} seeds in process (the engine's policy, concurrency {concurrency})")
    fixed = {seed: simulate(None, seed, concurrency) for seed in seeds}
    tasks = 34
    fixed_attempts = statistics.mean(f.attempts for f in fixed.values())
    fixed_half = statistics.mean(f.half_width for f in fixed.values())
    fixed_cover = sum(f.covered for f in fixed.values()) / len(seeds)
    print(
        f"   fixed 10x: {fixed_attempts:.0f} attempts, success ± {fixed_half * 100:.2f} pp, "
        f"coverage {fixed_cover:.1%}"
    )
    runs = {seed: simulate("volatile", seed, concurrency) for seed in seeds}
    agree = statistics.mean(
        sum((t in runs[s].volatile) == (t in fixed[s].volatile) for t in _tasks()) / tasks
        for s in seeds
    )
    ratio = statistics.mean(runs[s].attempts / fixed[s].attempts for s in seeds)
    print(
        f"   --target volatile: attempts {ratio:.2f} of fixed (goal ≤ 0.50); the same volatile "
        f"set on {agree:.1%} of tasks (goal ≥ 95 %)"
    )
    for target in ("ci=5pp", f"ci={fixed_half * 100:.2f}pp"):
        runs = {seed: simulate(target, seed, concurrency) for seed in seeds}
        ratio = statistics.mean(runs[s].attempts / fixed[s].attempts for s in seeds)
        half = statistics.mean(r.half_width for r in runs.values())
        narrower = sum(runs[s].half_width <= fixed[s].half_width for s in seeds) / len(seeds)
        cover = sum(r.covered for r in runs.values()) / len(seeds)
        print(
            f"   --target {target}: attempts {ratio:.2f} of fixed; success ± {half * 100:.2f} pp "
            f"(as narrow as fixed in {narrower:.0%} of seeds); true rate inside the 95 % CI in "
            f"{cover:.1%} of seeds (goal ≥ 93 %)"
        )
    print(
        f"   oracle: knowing every task's true rate, the fixed design's sampling variance "
        f"takes at least {_oracle_share():.2f} of its attempts (Neyman allocation)"
    )
    (kp, kf, share, agree), hull = _volatile_frontier()
    print(
        f"   oracle, --target volatile: knowing every task's true rate, the cheapest rule that "
        f"keeps the fixed run's volatile set on ≥ 95 % of tasks (stop after {kp} agreeing "
        f"passes, {kf} agreeing fails) takes {share:.3f} of its attempts ({agree:.1%}); a "
        f"random mix of two such rules, {hull:.3f}"
    )
    for planned, prior in ((0.95, "run"), (0.99, "run"), (0.95, "fixed run")):
        share, agree = _empirical_bayes(seeds, planned, prior)
        source = (
            "the fixed 10x run's outcomes (more than any adaptive run has)"
            if prior == "fixed run"
            else "the run's own outcomes so far"
        )
        print(
            f"   empirical Bayes, --target volatile: the suite's skills learnt from {source}, "
            f"stopping to keep {planned:.0%} agreement expected: {share:.3f} of the fixed "
            f"design's attempts, the same volatile set on {agree:.1%} of tasks"
        )


def _tasks() -> list[str]:
    from driftdesk.reruns.suites import load_suite

    return load_suite("basic").task_ids


def _oracle_share() -> float:
    """The least share of the fixed design's attempts any allocation needs for the same
    sampling variance, knowing every task's true rate (Neyman: n_i ∝ σ_i): (Σ σ_i)² / (10 Σ σ_i²)
    of 10 T attempts — a bound the ci target cannot beat on this suite."""
    from driftdesk.reruns.simulated_endpoint import task_skill

    sigmas = [(task_skill(t) * (1 - task_skill(t))) ** 0.5 for t in _tasks()]
    fixed_variance = sum(s * s for s in sigmas) / FIXED_REPEAT
    attempts = sum(sigmas) ** 2 / fixed_variance
    return attempts / (FIXED_REPEAT * len(sigmas))


def _volatile_frontier(goal: float = 0.95) -> tuple[tuple[int, int, float, float], float]:
    """What any rule for ``--target volatile`` can reach on this suite, exactly, knowing
    every task's true rate p. Both designs see the same draws, so they disagree on a task
    only when the adaptive one stops on a streak of one outcome that attempts up to the 10th
    of the fixed one would have broken. What a task's outcomes tell a rule before it stops is
    the streak's outcome and length, so every rule is a streak length to stop at for passes
    and one for fails (or a random mix of such rules). Returns the cheapest pair (k_pass,
    k_fail, share of the fixed design's attempts, agreement) with agreement ≥ ``goal``, and
    the least share a mix of two pairs reaches at ``goal`` (the lower convex hull)."""
    from driftdesk.reruns.simulated_endpoint import task_skill

    skills = [task_skill(t) for t in _tasks()]

    def task(p: float, k_pass: int, k_fail: int) -> tuple[float, float]:
        attempts = disagree = 0.0
        for q, k in ((p, k_pass), (1 - p, k_fail)):  # the first outcome, then its streak
            # stopped at attempt j by the first other outcome, or at k on the streak
            attempts += sum(q * q ** (j - 2) * (1 - q) * j for j in range(2, k + 1))
            attempts += q**k * k
            disagree += q**k * (1 - q ** max(0, FIXED_REPEAT - k))
        return attempts, disagree

    points = []
    for k_pass in range(2, FIXED_REPEAT + 1):
        for k_fail in range(2, FIXED_REPEAT + 1):
            figures = [task(p, k_pass, k_fail) for p in skills]
            share = sum(a for a, _ in figures) / (FIXED_REPEAT * len(skills))
            points.append((k_pass, k_fail, share, 1 - sum(d for _, d in figures) / len(skills)))
    best = min((pt for pt in points if pt[3] >= goal), key=lambda pt: pt[2])
    hull = best[2]
    for _, _, share_a, agree_a in points:
        for _, _, share_b, agree_b in points:
            if agree_a < goal <= agree_b:  # the mix that agrees on exactly ``goal``
                w = (goal - agree_a) / (agree_b - agree_a)
                hull = min(hull, (1 - w) * share_a + w * share_b)
    return best, hull


GRID = [i / 100 for i in range(101)]


def _fit_skills(counts: dict[tuple[int, int], int]) -> list[float]:
    """The suite's skill distribution on ``GRID`` that makes the tasks' (attempts, passes)
    most likely (NPMLE, by EM): the prior an empirical-Bayes rule plugs in."""
    weights = [1 / len(GRID)] * len(GRID)
    likelihood = {(n, s): [p**s * (1 - p) ** (n - s) for p in GRID] for n, s in counts}
    total = sum(counts.values())
    for _ in range(300):
        new = [0.0] * len(GRID)
        for key, many in counts.items():
            row = likelihood[key]
            z = sum(w * x for w, x in zip(weights, row, strict=True))
            for g, (w, x) in enumerate(zip(weights, row, strict=True)):
                new[g] += many * w * x / z
        weights = [x / total for x in new]
    return weights


def _streak_plan(
    weights: list[float], streaks: list[tuple[int, int]], allowed: float
) -> dict[tuple[int, int], tuple[bool, float]]:
    """Under the prior ``weights``: for each streak (outcome, length), stop now or not, and
    the chance that the fixed run would call the task volatile after a stop. The least
    expected attempts for the open ``streaks`` with at most ``allowed`` expected disagreements
    (a Lagrangian backward induction over streak lengths, its multiplier by bisection)."""

    def moment(outcome: int, n: int, more: int) -> float:  # E[q^(n+more)] / E[q^n]
        pairs = [(w, p if outcome else 1 - p) for w, p in zip(weights, GRID, strict=True)]
        below = sum(w * q**n for w, q in pairs)
        return sum(w * q ** (n + more) for w, q in pairs) / below if below else 1.0

    def solve(price: float) -> tuple[dict[tuple[int, int], tuple[bool, float]], float]:
        plan: dict[tuple[int, int], tuple[bool, float]] = {}
        expected: dict[tuple[int, int], tuple[float, float]] = {}  # (value, disagreement)
        for outcome in (0, 1):
            expected[(outcome, FIXED_REPEAT)] = (0.0, 0.0)
            for n in range(FIXED_REPEAT - 1, 1, -1):
                risk = 1 - moment(outcome, n, FIXED_REPEAT - n)
                same = moment(outcome, n, 1)
                value, disagree = expected[(outcome, n + 1)]
                if price * risk <= 1 + same * value:
                    plan[(outcome, n)] = (True, risk)
                    expected[(outcome, n)] = (price * risk, risk)
                else:
                    plan[(outcome, n)] = (False, risk)
                    expected[(outcome, n)] = (1 + same * value, same * disagree)
        return plan, sum(expected[s][1] for s in streaks)

    low, high = 0.0, 1e6
    for _ in range(60):
        middle = (low + high) / 2
        if solve(middle)[1] > allowed:
            low = middle
        else:
            high = middle
    return solve(high)[0]


def _empirical_bayes(seeds: list[int], planned: float, prior: str) -> tuple[float, float]:
    """A rule that, unlike the oracle, does not know the skills: after a first round of 2,
    each round it fits the skills (``_fit_skills``, from the run's outcomes so far, or from
    the fixed run's when ``prior`` says so), stops the streaks ``_streak_plan`` says, and
    gives every open task one more attempt. Returns (share of the fixed design's attempts,
    agreement with its volatile set), means over ``seeds`` (rounds, no concurrency)."""
    tasks = _tasks()
    shares, agreements = [], []
    for seed in seeds:
        passes = sandbox_model(seed)
        fixed = {t: [passes(t, a) for a in range(FIXED_REPEAT)] for t in tasks}
        seen = {t: fixed[t][:2] for t in tasks}
        risk_taken = 0.0
        open_tasks = [t for t in tasks if len(set(seen[t])) == 1]
        while open_tasks:
            source = fixed if prior == "fixed run" else seen
            counts: dict[tuple[int, int], int] = {}
            for outcomes in source.values():
                key = (len(outcomes), sum(outcomes))
                counts[key] = counts.get(key, 0) + 1
            streaks = [(int(seen[t][0]), len(seen[t])) for t in open_tasks]
            allowed = (1 - planned) * len(tasks) - risk_taken
            plan = _streak_plan(_fit_skills(counts), streaks, allowed)
            still = []
            for task_id, streak in zip(open_tasks, streaks, strict=True):
                stop, risk = plan.get(streak, (True, 0.0))
                if stop:
                    risk_taken += risk
                    continue
                seen[task_id].append(fixed[task_id][len(seen[task_id])])
                if len(set(seen[task_id])) == 1:
                    still.append(task_id)
            open_tasks = still
        volatile = {t for t in tasks if len(set(seen[t])) == 2}
        fixed_volatile = {t for t in tasks if len(set(fixed[t])) == 2}
        shares.append(sum(map(len, seen.values())) / (FIXED_REPEAT * len(tasks)))
        agreements.append(sum((t in volatile) == (t in fixed_volatile) for t in tasks) / len(tasks))
    return statistics.mean(shares), statistics.mean(agreements)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=40, help="in-process seeds (≥ 20)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--skip-real", action="store_true", help="only the in-process part")
    args = parser.parse_args()
    if args.seeds < 20:
        parser.error("--seeds must be at least 20")
    private_home("bench-adaptive-home-")
    seeds = list(range(1, args.seeds + 1))
    print(f"bench_adaptive: basic suite (34 tasks), fixed {FIXED_REPEAT}x vs adaptive; {load()}")
    if not args.skip_real:
        part_real(seeds, args.concurrency)
    part_simulated(seeds, args.concurrency)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
