"""Tries in the step model for the agents that are not client presets: a command harness (a
small agent loop of its own, over the proxy, against the sandbox's simulated model) whose
tries an injected 429 cuts and driftdesk runs again from a fresh workspace, and the builtin
agent, whose attempt is one try; the same harness on a Ray cluster, where each try is a Ray
task. (Claude Code and Codex: test_explain_tries_real_clients.py.)"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

from driftdesk.analysis.explain import explain_task
from driftdesk.analysis.trajectory import action_sequence, load_trajectory
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

REAL_KEY = "sk-test-REALKEY-tries-agents-0123456789"
RIGHT = ["cat calc.py", "sed -i 's/a - b/a + b/' calc.py", "python3 -c 'import calc'"]
WRONG = ["cat calc.py", "sed -i 's/a - b/a * b/' calc.py", "python3 -c 'import calc'"]
FIX_ADD = {
    "task_id": "fix-add",
    "prompt": "In calc.py, add() subtracts. Make it add.",
    "workspace": "fix-add",
    "check": "python3 -c 'import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)'",
    "simulated": {"commands": RIGHT, "wrong": WRONG, "answer": "Done.", "skill": 0.5},
}
# An agent loop: chat completions with one shell tool, each command run in the workspace and
# its output sent back; an HTTP error ends the try (exit 3), as a client without retries does.
HARNESS = textwrap.dedent(
    """
    import json, os, subprocess, sys, urllib.error, urllib.request
    tools = [{"type": "function", "function": {"name": "shell", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": os.environ["DRIFTDESK_PROMPT"]}]
    while True:
        body = {"model": os.environ["DRIFTDESK_MODEL"], "messages": messages, "tools": tools}
        request = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                     "Content-Type": "application/json"})
        try:
            answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
        except urllib.error.HTTPError as exc:
            print(f"provider said {exc.code}", file=sys.stderr)
            sys.exit(3)
        message = answer["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            sys.exit(0)
        for call in message["tool_calls"]:
            command = json.loads(call["function"]["arguments"])["command"]
            done = subprocess.run(command, shell=True, capture_output=True, text=True)
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": done.stdout + done.stderr})
    """
)


def _suite(folder: Path) -> Path:
    (folder / "fix-add").mkdir(parents=True)
    (folder / "fix-add" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    suite = folder / "fix-add.jsonl"
    suite.write_text(json.dumps(FIX_ADD) + "\n")
    return suite


def _commands(actions: list) -> list[str]:
    return [json.loads(a.value)["command"] for a in actions if a.kind == "call"]


async def _command_run(tmp_path: Path, **more: object) -> Path:
    suite = _suite(tmp_path / "suite")
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    with SandboxServer(seed=5, suites=[suite]) as server:
        outcome = await execute_run(
            RunSpec(
                profile=Profile(
                    name="p", protocol="openai", base_url=server.base_url, model=SIM_MODEL
                ),
                suite=str(suite),
                repeat=8,
                concurrency=1,
                seed=5,
                inject="429=25%:0.01s",
                link_faults="retry",  # the faults end tries: what this test studies
                timeout_s=60.0,
                out_dir=tmp_path / "runs",
                agent="command",
                command=f"{sys.executable} {script}",
                api_key=REAL_KEY,
                retry_policy=RetryPolicy(max_retries=6, base_delay_s=0.01, max_delay_s=1.0),
                **more,  # type: ignore[arg-type]
            )
        )
    assert outcome.status == "completed", outcome.reason
    return outcome.run_dir


async def test_a_command_harness_attempt_is_its_final_try(tmp_path: Path) -> None:
    _check_command_run(await _command_run(tmp_path))


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
@pytest.mark.xdist_group("ray")
@pytest.mark.timeout(600)
async def test_on_a_ray_cluster_each_try_is_numbered_as_here(tmp_path: Path) -> None:
    from driftdesk.reruns.ray_executor import RaySettings
    from tests.reruns.ray_helpers import loopback_cluster

    with loopback_cluster(nodes=2) as cluster:
        run_dir = await _command_run(
            tmp_path, executor="ray", ray=RaySettings(address=cluster.address)
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
        outcome = await execute_run(
            RunSpec(
                profile=Profile(
                    name="p", protocol="openai", base_url=server.base_url, model=SIM_MODEL
                ),
                suite="basic",
                tasks=["invoice-7_2"],
                repeat=2,
                timeout_s=60.0,
                out_dir=tmp_path / "runs",
                api_key=REAL_KEY,
            )
        )
    calls = [
        json.loads(line) for line in (outcome.run_dir / "calls.jsonl").read_text().splitlines()
    ]
    assert calls and {c["try"] for c in calls} == {1}
    for attempt in (0, 1):
        traj = load_trajectory(outcome.run_dir, "invoice-7_2", attempt)
        assert traj is not None and traj.source == "recording"
        assert (traj.try_number, traj.earlier_tries, traj.tries_known) == (1, [], True)
