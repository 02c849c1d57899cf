"""Tasks that change files, judged by a check: fresh workspace per attempt, setup, check
outcomes, the check's output and the workspace diff beside the attempt's log — with the builtin
and command agents (the client presets have their own tests, with the real clients)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reruns_helpers import read_rows

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.execution import RunOutcome
from driftdesk.reruns.run_spec import RunSetupError, RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.reruns.suites import SuiteError, load_suite
from driftdesk.rundir import (
    CHECK_OUTPUT_SUFFIX,
    WORKSPACE_DIFF_SUFFIX,
    WORKSPACE_SUFFIX,
    attempt_file,
    attempt_folder,
)

KEY = "sk-REAL-coding-0123456789abcdef"


def _suite(folder: Path, tasks: list[dict]) -> Path:
    (folder / "ws").mkdir(parents=True, exist_ok=True)
    (folder / "ws" / "start.txt").write_text("start\n")
    path = folder / "suite.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def _answer_task(task_id: str, check: str, **more: object) -> dict:
    return {
        "task_id": task_id,
        "prompt": f"{task_id}: what is two plus two?",
        "expected": {"equals": "4"},
        "reference_answer": "4",
        "workspace": "ws",
        "check": check,
        **more,
    }


def _profile(server: SandboxServer) -> Profile:
    return Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)


async def _run(server: SandboxServer, suite: Path, out: Path, **spec: Any) -> RunOutcome:
    return await execute_run(
        RunSpec(profile=_profile(server), suite=str(suite), out_dir=out, api_key=KEY, **spec)
    )


async def test_the_check_judges_a_builtin_attempt_and_its_output_is_kept(
    tmp_path: Path, sandbox_for
) -> None:
    suite = _suite(
        tmp_path / "suite",
        [
            # The answer is right (skill aside, the check reads it) but the check says fail.
            _answer_task("check-fails", "echo 'start.txt is still here'; exit 1"),
            _answer_task("check-passes", 'test -f start.txt && test -n "$DRIFTDESK_ANSWER"'),
            _answer_task("check-crashes", "echo broken check >&2; exit 125"),
            _answer_task(
                "setup-and-check",
                'test "$(cat state.txt)" = ready',
                setup="echo ready > state.txt",
            ),
        ],
    )
    server = sandbox_for(suite)
    outcome = await _run(server, suite, tmp_path / "runs", repeat=2, timeout_s=20)
    rows = {(r["task_id"], r["attempt"]): r for r in read_rows(outcome.run_dir / "attempts.jsonl")}
    assert {k: r["outcome"] for k, r in rows.items()} == {
        ("check-fails", 0): "fail",
        ("check-fails", 1): "fail",
        ("check-passes", 0): "pass",
        ("check-passes", 1): "pass",
        ("check-crashes", 0): "harness_error",
        ("check-crashes", 1): "harness_error",
        ("setup-and-check", 0): "pass",
        ("setup-and-check", 1): "pass",
    }
    assert rows[("check-crashes", 0)]["error_code"] == "check_error"
    assert "broken check" in rows[("check-crashes", 0)]["error_message"]
    run_dir = outcome.run_dir
    check_text = attempt_file(run_dir, "check-fails", 1, CHECK_OUTPUT_SUFFIX).read_text()
    assert "start.txt is still here" in check_text and "exit code 1" in check_text
    log = (attempt_folder(run_dir, "check-crashes") / "0.log").read_text()
    assert "[check] broken check" in log
    # The diff shows what changed after setup only: setup's file is not in it.
    diff = attempt_file(run_dir, "setup-and-check", 0, WORKSPACE_DIFF_SUFFIX).read_text()
    assert diff == ""
    assert (
        attempt_file(run_dir, "setup-and-check", 0, WORKSPACE_SUFFIX)
        .joinpath("state.txt")
        .read_text()
        == "ready\n"
    )


async def test_check_timeout_is_a_harness_error(tmp_path: Path, sandbox_for) -> None:
    suite = _suite(tmp_path / "suite", [_answer_task("slow-check", "echo waiting; sleep 30")])
    server = sandbox_for(suite)
    outcome = await _run(server, suite, tmp_path / "runs", repeat=1, timeout_s=1.0)
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"]) == ("harness_error", "check_timeout")
    text = attempt_file(outcome.run_dir, "slow-check", 0, CHECK_OUTPUT_SUFFIX).read_text()
    assert "killed at the timeout" in text


async def test_command_agent_works_in_a_fresh_copy_per_attempt(tmp_path: Path, sandbox_for) -> None:
    suite = _suite(
        tmp_path / "suite",
        [
            {
                "task_id": "append",
                "prompt": "append a line",
                "workspace": "ws",
                "check": "test $(wc -l < start.txt) -eq 2",
            },
            {"task_id": "empty-start", "prompt": "no workspace", "check": "test -f made.txt"},
        ],
    )
    server = sandbox_for(suite)
    outcome = await _run(
        server,
        suite,
        tmp_path / "runs",
        repeat=3,
        concurrency=3,
        timeout_s=20,
        agent="command",
        command="echo more >> start.txt; touch made.txt; pwd",
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    # Each attempt appended to its own copy: a shared copy would have 3, 4 lines.
    assert sorted((r["task_id"], r["outcome"]) for r in rows) == [
        ("append", "pass"),
        ("append", "pass"),
        ("append", "pass"),
        ("empty-start", "pass"),
        ("empty-start", "pass"),
        ("empty-start", "pass"),
    ]
    for attempt in range(3):
        ws = attempt_file(outcome.run_dir, "append", attempt, WORKSPACE_SUFFIX)
        assert ws.joinpath("start.txt").read_text() == "start\nmore\n"
        log = (attempt_folder(outcome.run_dir, "append") / f"{attempt}.log").read_text()
        assert str(ws) in log  # the harness ran there (pwd)
        diff = attempt_file(outcome.run_dir, "append", attempt, WORKSPACE_DIFF_SUFFIX).read_text()
        assert "diff --git a/start.txt b/start.txt" in diff and "+more" in diff
        assert "new file mode" in diff and "b/made.txt" in diff
    # The suite's own folder is never touched.
    assert (tmp_path / "suite" / "ws" / "start.txt").read_text() == "start\n"
    assert sorted(p.name for p in (tmp_path / "suite" / "ws").iterdir()) == ["start.txt"]


def test_suite_fields_are_validated(tmp_path: Path) -> None:
    good = _suite(tmp_path / "a", [_answer_task("t", "true", setup="true")])
    task = load_suite(good).task("t")
    assert task.workspace == (tmp_path / "a" / "ws").resolve()
    assert (task.setup, task.check) == ("true", "true")
    bad_cases = [
        ({"workspace": "missing-folder"}, "not a folder"),
        ({"check": ""}, "check must be a non-empty shell command"),
        ({"setup": 3}, "setup must be a non-empty shell command"),
        ({"simulated": {"commands": "ls"}}, "simulated must be"),
        ({"simulated": {"commands": ["ls"], "skill": 2}}, "simulated must be"),
    ]
    for number, (fields, message) in enumerate(bad_cases):
        path = _suite(
            tmp_path / f"bad{number}",
            [{"task_id": "t", "prompt": "p", "check": "true", **fields}],
        )
        with pytest.raises(SuiteError, match=message):
            load_suite(path)


async def test_a_preset_without_its_client_is_refused_before_the_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    suite = _suite(tmp_path / "suite", [_answer_task("t", "true")])
    for agent, install in (
        ("claude-code", "npm install -g @anthropic-ai/claude-code"),
        ("codex", "npm install -g @openai/codex"),
    ):
        protocol = "anthropic" if agent == "claude-code" else "openai"
        with pytest.raises(RunSetupError, match=install):
            await execute_run(
                RunSpec(
                    profile=Profile(
                        name="p", protocol=protocol, base_url="http://127.0.0.1:9", model="m"
                    ),
                    suite=str(suite),
                    repeat=1,
                    out_dir=tmp_path / "runs",
                    api_key=KEY,
                    agent=agent,  # type: ignore[arg-type]
                )
            )
    assert not (tmp_path / "runs").exists()  # nothing half-created
