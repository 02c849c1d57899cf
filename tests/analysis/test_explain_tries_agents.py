"""Tries in the step model for the agents that are not client presets: a command harness (a
small agent loop of its own, over the proxy, against the sandbox's simulated model) whose
tries an injected 429 cuts and driftdesk runs again from a fresh workspace, and the builtin
agent, whose attempt is one try; the same harness on a Ray cluster, where each try is a Ray
task. (Claude Code and Codex: test_explain_tries_real_clients.py.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from driftdesk.analysis.explain import explain_task
from driftdesk.analysis.trajectory import action_sequence, load_trajectory
from driftdesk.reruns.simulated_endpoint import SandboxServer
from tests.sandbox_runs import RIGHT, WRONG, command_harness_run, sandbox_run

REAL_KEY = "sk-test-REALKEY-tries-agents-0123456789"


def _commands(actions: list) -> list[str]:
    return [json.loads(a.value)["command"] for a in actions if a.kind == "call"]


async def test_a_command_harness_attempt_is_its_final_try(tmp_path: Path) -> None:
    _check_command_run(await command_harness_run(tmp_path, REAL_KEY))


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
@pytest.mark.xdist_group("ray")
@pytest.mark.timeout(600)
async def test_on_a_ray_cluster_each_try_is_numbered_as_here(tmp_path: Path) -> None:
    from driftdesk.reruns.ray_executor import RaySettings
    from tests.reruns.ray_helpers import loopback_cluster

    with loopback_cluster(nodes=2) as cluster:
        run_dir = await command_harness_run(
            tmp_path, REAL_KEY, executor="ray", ray=RaySettings(address=cluster.address)
        )
    _check_command_run(run_dir)


def _check_command_run(run_dir: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    calls = [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]
    outcomes = {r["attempt"]: r["outcome"] for r in rows}
    retried = {r["attempt"] for r in rows if r["retries"]}
    assert retried, f"no retried try with this seed: {outcomes}"
    # Every row says its try; a retried attempt's rows count its tries up from 1.
    for attempt in outcomes:
        tries = [c["try"] for c in calls if c["attempt"] == attempt]
        assert tries == sorted(tries) and tries[0] == 1
        assert max(tries) == 1 + next(r["retries"] for r in rows if r["attempt"] == attempt)
    judged = {a: o for a, o in outcomes.items() if o in ("pass", "fail")}
    assert "pass" in judged.values() and "fail" in judged.values(), outcomes
    for attempt, result in judged.items():
        traj = load_trajectory(run_dir, "fix-add", attempt)
        assert traj is not None and traj.tries_known and not traj.problems
        # The final try's script alone, whatever the abandoned tries had run.
        assert _commands(action_sequence(traj)) == (RIGHT if result == "pass" else WRONG)
        assert [s.kind for s in traj.steps if s.kind != "link_event"] == [
            "user", "model", "tool_result", "model", "tool_result", "model", "tool_result",
            "model",
        ]  # fmt: skip
        assert len(traj.earlier_tries) == traj.try_number - 1
        for earlier in traj.earlier_tries:
            assert earlier.ended_by is not None and earlier.ended_by.startswith("429 at call")
            assert earlier.steps[-1].kind == "link_event"
    explanation = explain_task(run_dir, "fix-add")
    assert {d.step for _, _, d in explanation.pairs if d is not None} == {1}
    assert all(d is not None for _, _, d in explanation.pairs)


async def test_a_builtin_attempt_is_one_try(tmp_path: Path) -> None:
    with SandboxServer(seed=1) as server:
        run_dir = await sandbox_run(
            server.base_url,
            tmp_path / "runs",
            tasks=["invoice-7_2"],
            repeat=2,
            timeout_s=60.0,
            api_key=REAL_KEY,
        )
    calls = [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]
    assert calls and {c["try"] for c in calls} == {1}
    for attempt in (0, 1):
        traj = load_trajectory(run_dir, "invoice-7_2", attempt)
        assert traj is not None and traj.source == "recording"
        assert (traj.try_number, traj.earlier_tries, traj.tries_known) == (1, [], True)
