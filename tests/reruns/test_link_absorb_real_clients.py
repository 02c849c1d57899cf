"""``--link-faults absorb`` with the REAL Claude Code and Codex: under
``--inject 429=10%,500=5%`` the client never sees a fault (no try is retried, every attempt is
judged), and every attempt takes the same actions as its fault-free twin (the same seed, the
sandbox's draws unchanged by faults it never received)."""

from __future__ import annotations

from pathlib import Path

import pytest
from coding_helpers import write_coding_suite
from reruns_helpers import client_profile, read_rows

from driftdesk.analysis.trajectory import action_sequence, load_trajectory
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SandboxServer

REAL_KEY = "sk-test-REALKEY-absorb-clients-0123456789"
INJECT = "429=10%:0.05s,500=5%"
SEED = 6


async def _run(agent: str, suite: Path, out: Path, inject: str, link_faults: str) -> Path:
    with SandboxServer(seed=SEED, suites=[suite], linger_s=0.3) as server:
        outcome = await execute_run(
            RunSpec(
                profile=client_profile(agent, server),
                suite=str(suite),
                tasks=["fix-add", "rename"],
                repeat=3,
                concurrency=1,  # the sandbox's draws fall in the same order in both runs
                timeout_s=120.0,
                seed=SEED,
                out_dir=out,
                api_key=REAL_KEY,
                agent=agent,  # type: ignore[arg-type]
                retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.05, max_delay_s=1.0),
                inject=inject,
                link_faults=link_faults,
            )
        )
    return Path(outcome.run_dir)


def _actions(run_dir: Path, task_id: str, attempt: int) -> list[tuple[str, str]]:
    traj = load_trajectory(run_dir, task_id, attempt)
    assert traj is not None and not traj.problems
    return [(a.kind, a.value) for a in action_sequence(traj)]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
async def test_absorbed_faults_never_reach_the_real_client(
    agent: str, clients_on_path: None, tmp_path: Path
) -> None:
    suite = write_coding_suite(tmp_path / "suite")
    faulted = await _run(agent, suite, tmp_path / "faulted", INJECT, "absorb")
    twin = await _run(agent, suite, tmp_path / "twin", "none", "absorb")
    calls = read_rows(faulted / "calls.jsonl")
    rows = read_rows(faulted / "attempts.jsonl")
    injected = [c for c in calls if c["injected"]]
    assert injected, "the seed injects no fault: choose another"
    assert all(c["absorbed"] for c in injected)
    # What the client was sent: answers only.
    assert all(c["error_kind"] is None for c in calls if not c["absorbed"])
    assert all(r["outcome"] in ("pass", "fail") and r["retries"] == 0 for r in rows), rows
    assert sum(r["absorbed_faults"] for r in rows) == len(injected)
    assert sum(r["injected_absorbed"] for r in rows) == len(injected)
    twin_rows = {(r["task_id"], r["attempt"]): r for r in read_rows(twin / "attempts.jsonl")}
    for row in rows:
        slot = (row["task_id"], row["attempt"])
        assert row["outcome"] == twin_rows[slot]["outcome"], slot
        assert _actions(faulted, *slot) == _actions(twin, *slot), slot
