"""Tries kept apart and steps as the client took them, with the REAL Claude Code and Codex.

A ``fix-add`` task whose right and wrong paths differ in one command (the ``sed`` at action
index 1): the sandbox's seeded coin picks the path per conversation, so an attempt whose first
try took one path and was cut by an injected 429 may take the other path in its final try. The
attempt is its final try: its steps are exactly the script the sandbox played in that try (no
re-sent prompt or tool result counted twice), the abandoned try is kept apart, and explain
finds every pass/fail pair parting at the ``sed``, never at an action of a discarded try.

Seeds were found by trying: at concurrency 1 the sandbox's coin and the proxy's injected
faults fall the same way on every run, so each run below has at least two pass/fail pairs,
and each run with ``--inject`` at least one retried try.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from driftdesk.analysis.explain import explain_task
from driftdesk.analysis.trajectory import action_sequence, load_trajectory
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from tests.conftest import real_client

REAL_KEY = "sk-test-REALKEY-tries-0123456789abcdef"
PROTOCOL = {"claude-code": "anthropic", "codex": "openai"}
PROMPT = "In calc.py, add() subtracts. Make it add."
RIGHT_SED = "sed -i 's/a - b/a + b/' calc.py"
WRONG_SED = "sed -i 's/a - b/a * b/' calc.py"
LOOK = "cat calc.py"
TRY_IT = "python3 -c 'import calc; print(calc.add(2, 3))'"
SCRIPTS = {"pass": [LOOK, RIGHT_SED, TRY_IT], "fail": [LOOK, WRONG_SED, TRY_IT]}
ANSWER = "add() now adds."
DIVERGING_ACTION = 1  # the sed, in both paths' actions
FIX_ADD = {
    "task_id": "fix-add",
    "prompt": PROMPT,
    "workspace": "fix-add",
    "check": "python3 -c 'import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)'",
    "simulated": {
        "commands": SCRIPTS["pass"],
        "wrong": SCRIPTS["fail"],
        "answer": ANSWER,
        "skill": 0.5,
    },
}
INJECT = "429=20%:0.01s"
REPEAT = 6
# (agent, --inject) -> the run's seed (the sandbox's and the injector's).
SEEDS: dict[tuple[str, str | None], int] = {
    ("claude-code", None): 3,
    ("claude-code", INJECT): 3,
    ("codex", None): 3,
    ("codex", INJECT): 3,
}


@pytest.fixture
def clients_on_path(home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # A home of the test's own: the clients' shells (Claude Code's Bash tool, Codex's
    # `bash -lc`) read the user's ~/.bashrc otherwise, and a shell hook there (pyenv's rehash
    # lock, left behind when an attempt is killed at its timeout) stalls every command.
    folder = real_client("claude").parent
    real_client("codex")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def _suite(folder: Path) -> Path:
    (folder / "fix-add").mkdir(parents=True)
    (folder / "fix-add" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    suite = folder / "fix-add.jsonl"
    suite.write_text(json.dumps(FIX_ADD) + "\n")
    return suite


async def _run(agent: str, inject: str | None, tmp_path: Path) -> Path:
    seed = SEEDS[(agent, inject)]
    suite = _suite(tmp_path / "suite")
    # Streams stay open a while after their end, as gateways' keep-alives hold them.
    with SandboxServer(seed=seed, suites=[suite], linger_s=0.3) as server:
        outcome = await execute_run(
            RunSpec(
                profile=Profile(
                    name="sim",
                    protocol=PROTOCOL[agent],
                    base_url=server.root_url if agent == "claude-code" else server.base_url,
                    model=SIM_MODEL,
                ),
                suite=str(suite),
                repeat=REPEAT,
                concurrency=1,  # the coin and the faults fall the same way on every run
                seed=seed,
                inject=inject or "none",
                link_faults="retry",  # the faults end tries: what this test studies
                timeout_s=120.0,
                out_dir=tmp_path / "runs",
                api_key=REAL_KEY,
                agent=agent,  # type: ignore[arg-type]
                retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.01, max_delay_s=1.0),
            )
        )
    return outcome.run_dir


def _outcomes(run_dir: Path) -> dict[int, str]:
    rows = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    return {r["attempt"]: r["outcome"] for r in rows}


def _shell_command(arguments: str) -> str:
    """The command of a shell tool call: Claude Code's ``Bash`` {"command"}, Codex's
    ``exec_command`` {"cmd"} (or a list ending in the command)."""
    parsed = json.loads(arguments)
    command = parsed.get("command", parsed.get("cmd"))
    return command[-1] if isinstance(command, list) else str(command)


def _check_steps_as_taken(agent: str, steps: list[Any], script: list[str]) -> None:
    """Exactly the client's turns: the prompt once, then per command one tool call and one
    tool result, then one answer; nothing re-sent counted again."""
    users = [s for s in steps if s.kind == "user"]
    assert sum(PROMPT in s.text for s in users) == 1, [s.text[:80] for s in users]
    taken = [s for s in steps if s.kind != "user"]
    kinds = [s.kind for s in taken]
    assert kinds == ["model", "tool_result"] * len(script) + ["model"], (agent, kinds)
    calls = [s for s in taken if s.kind == "model"]
    for turn, command in zip(calls, script, strict=False):
        assert len(turn.tool_calls) == 1, turn.tool_calls
        assert _shell_command(turn.tool_calls[0][1]) == command
    assert calls[-1].tool_calls == [] and calls[-1].text.strip() == ANSWER
    # The user turns come first: no prompt re-sent among the later turns.
    assert all(s.kind == "user" for s in steps[: len(users)])


def _explain_checks(run_dir: Path, *, retried: bool) -> None:
    outcomes = _outcomes(run_dir)
    judged = {a: o for a, o in outcomes.items() if o in ("pass", "fail")}
    passes = [a for a, o in judged.items() if o == "pass"]
    fails = [a for a, o in judged.items() if o == "fail"]
    assert len(passes) * len(fails) >= 2, outcomes  # the seed gives pairs to compare
    with_earlier = []
    for attempt, outcome in judged.items():
        traj = load_trajectory(run_dir, "fix-add", attempt)
        assert traj is not None and traj.source == "recording" and not traj.problems
        final = [s for s in traj.steps if s.kind != "link_event"]
        _check_steps_as_taken(str(run_dir), final, SCRIPTS[outcome])
        assert traj.tries_known
        for earlier in traj.earlier_tries:
            assert earlier.number < (traj.try_number or 0)
            assert earlier.ended_by is not None and earlier.ended_by.startswith("429 at call")
            with_earlier.append(attempt)
    if retried:
        assert with_earlier, "no attempt had a retried try: choose another seed"

    explanation = explain_task(run_dir, "fix-add")
    assert sorted(explanation.groups["pass"]) == sorted(passes)
    assert sorted(explanation.groups["fail"]) == sorted(fails)
    assert len(explanation.pairs) == len(passes) * len(fails)
    for _, _, divergence in explanation.pairs:
        assert divergence is not None and divergence.step == DIVERGING_ACTION
        assert divergence.a is not None and _shell_command(divergence.a.value) == RIGHT_SED
        assert divergence.b is not None and _shell_command(divergence.b.value) == WRONG_SED
    data = explanation.to_json()
    assert data["tries_unknown"] == []
    assert {d["step"] for d in data["pair_divergences"]} == {DIVERGING_ACTION}
    for view in data["attempts"]:
        if view["outcome"] not in ("pass", "fail"):
            continue
        # The attempt's actions are its final try's script, nothing of an abandoned try.
        commands = [_shell_command(a["arguments"]) for a in view["actions"] if a["kind"] == "call"]
        assert commands == SCRIPTS[view["outcome"]], view["attempt"]
        assert [a["kind"] for a in view["actions"]][-1] == "answer"
        kinds = {s["kind"] for s in view["steps"]}
        assert kinds <= {"user", "model", "tool_result", "link_event"}
        assert all(s["summary"] for s in view["steps"])
        for earlier in view["earlier_tries"]:
            assert earlier["try"] < view["try"] and earlier["ended_by"].startswith("429")
            assert any(s["kind"] == "link_event" for s in earlier["steps"])
    if retried:
        # An abandoned try's actions never reach any attempt's actions: a try that took the
        # other path before its 429 is the test's point when the seed gives one.
        for attempt in with_earlier:
            traj = load_trajectory(run_dir, "fix-add", attempt)
            assert traj is not None
            final_actions = action_sequence(traj)
            assert len(final_actions) == len(SCRIPTS["pass"]) + 1


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
@pytest.mark.parametrize("inject", [None, INJECT], ids=["clean", "429"])
async def test_real_client_attempts_are_their_final_try_as_taken(
    agent: str, inject: str | None, clients_on_path: None, tmp_path: Path
) -> None:
    run_dir = await _run(agent, inject, tmp_path)
    _explain_checks(run_dir, retried=inject is not None)
