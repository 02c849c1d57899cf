"""The check rule (``exit-v2``): a check's exit code as an outcome, in real runs of the builtin
agent against the sandbox. 0 passes; 1–124 fail (grep exits 2 on the file the agent never
wrote: the model's failure); 125 ("could not judge"), 126, 127 and a signal are check_error;
the timeout is check_timeout; a task's ``check_error_codes`` are check_error too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reruns_helpers import read_rows

from driftdesk import __version__
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.execution import RunOutcome
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run, resume_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.reruns.suites import SuiteError, load_suite
from driftdesk.reruns.workspace import CHECK_RULE, StepRun, check_outcome

KEY = "sk-REAL-checkrule-0123456789abcdef"


def _task(task_id: str, check: str, **more: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "prompt": f"{task_id}: what is two plus two?",
        "expected": {"equals": "4"},
        "reference_answer": "4",
        "workspace": "ws",
        "check": check,
        **more,
    }


def _suite(folder: Path, tasks: list[dict[str, Any]]) -> Path:
    (folder / "ws").mkdir(parents=True, exist_ok=True)
    (folder / "ws" / "start.txt").write_text("start\n")
    path = folder / "suite.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


async def _run(server: SandboxServer, suite: Path, out: Path, **spec: Any) -> RunOutcome:
    profile = Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
    return await execute_run(
        RunSpec(profile=profile, suite=str(suite), out_dir=out, api_key=KEY, **spec)
    )


async def test_a_check_exiting_2_is_a_fail_and_only_could_not_judge_is_check_error(
    tmp_path: Path, sandbox_for: Any
) -> None:
    suite = _suite(
        tmp_path / "suite",
        [
            # The agent never wrote hello.txt: grep exits 2, the model's failure.
            _task("grep-missing", "grep -qx hello hello.txt"),
            _task("exit-3", "echo three; exit 3"),
            _task("exit-124", "exit 124"),
            _task("exit-125", "echo cannot tell; exit 125"),
            _task("exit-126", "exit 126"),
            _task("not-found", "no-such-command-for-driftdesk"),  # sh: 127
            _task("signal-sh", "kill -9 $$"),  # the shell itself: Python sees -9
            _task("signal-child", "sh -c 'kill -9 $$'"),  # sh reports 128+9
            _task("pytest-3", "exit 3", check_error_codes=[3, 4]),
            _task("passes", "test -f start.txt"),
        ],
    )
    server = sandbox_for(suite)
    outcome = await _run(server, suite, tmp_path / "runs", repeat=1, timeout_s=20)
    rows = {r["task_id"]: r for r in read_rows(outcome.run_dir / "attempts.jsonl")}
    judged = {task: (r["outcome"], r["error_code"]) for task, r in rows.items()}
    assert judged == {
        "grep-missing": ("fail", None),
        "exit-3": ("fail", None),
        "exit-124": ("fail", None),
        "exit-125": ("harness_error", "check_error"),
        "exit-126": ("harness_error", "check_error"),
        "not-found": ("harness_error", "check_error"),
        "signal-sh": ("harness_error", "check_error"),
        "signal-child": ("harness_error", "check_error"),
        "pytest-3": ("harness_error", "check_error"),
        "passes": ("pass", None),
    }
    assert "could not judge" in rows["exit-125"]["error_message"]
    assert "could not run" in rows["not-found"]["error_message"]
    assert "killed by signal 9" in rows["signal-sh"]["error_message"]
    assert "killed by signal 9" in rows["signal-child"]["error_message"]
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert manifest["check_rule"] == CHECK_RULE == "exit-v2"


async def test_a_check_past_the_timeout_stays_check_timeout(
    tmp_path: Path, sandbox_for: Any
) -> None:
    suite = _suite(tmp_path / "suite", [_task("slow", "sleep 30")])
    server = sandbox_for(suite)
    outcome = await _run(server, suite, tmp_path / "runs", repeat=1, timeout_s=1.0)
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"]) == ("harness_error", "check_timeout")


def test_the_rule_at_its_edges() -> None:
    def outcome(code: int | None, codes: tuple[int, ...] = ()) -> tuple[str, str | None]:
        result = check_outcome(StepRun(code, "", code is None), codes)
        return result.outcome, result.error_code

    assert outcome(0) == ("pass", None)
    assert [outcome(c)[0] for c in (1, 2, 5, 124)] == ["fail"] * 4
    assert {outcome(c) for c in (125, 126, 127, 128, 137, 255, -15)} == {
        ("harness_error", "check_error")
    }
    assert outcome(4, (3, 4)) == ("harness_error", "check_error")
    assert outcome(5, (3, 4)) == ("fail", None)
    assert outcome(None) == ("harness_error", "check_timeout")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("3", "must be a list of exit codes from 1 to 124"),
        ([0], "must be a list of exit codes from 1 to 124"),
        ([125], "must be a list of exit codes from 1 to 124"),
        ([True], "must be a list of exit codes from 1 to 124"),
        ([3.0], "must be a list of exit codes from 1 to 124"),
    ],
)
def test_check_error_codes_are_validated(tmp_path: Path, value: Any, problem: str) -> None:
    path = _suite(tmp_path, [_task("t", "exit 3", check_error_codes=value)])
    with pytest.raises(SuiteError, match=problem):
        load_suite(str(path))


def test_check_error_codes_need_a_check(tmp_path: Path) -> None:
    row = {"task_id": "t", "prompt": "p", "expected": {"equals": "4"}, "check_error_codes": [3]}
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(SuiteError, match="check_error_codes needs a check"):
        load_suite(str(path))
    good = _suite(tmp_path / "good", [_task("t", "exit 3", check_error_codes=[4, 3, 3])])
    assert load_suite(str(good)).tasks[0].check_error_codes == (3, 4)


async def test_report_warns_where_most_attempts_are_check_error_and_names_an_old_rule(
    home: Any, tmp_path: Path, sandbox_for: Any, cli: Any
) -> None:
    from driftdesk.analysis.check_rule import CURRENT_RULE
    from driftdesk.analysis.report import build_report

    assert CURRENT_RULE == CHECK_RULE  # the analysis side names the rule the runs record
    suite = _suite(
        tmp_path / "suite",
        [
            _task("cannot-judge", "exit 125"),
            # the first of its two attempts to get here cannot judge (the task's folder holds
            # the mark): half, not more than half, so no warning
            _task("half", "mkdir ../half.mark 2>/dev/null && exit 125; exit 0"),
            _task("passes", "true"),
        ],
    )
    server = sandbox_for(suite)
    outcome = await _run(server, suite, tmp_path / "runs", repeat=2, timeout_s=20)
    [report] = build_report([outcome.run_dir])
    data = report.to_json()
    assert data["check_rule"] == "exit-v2"
    assert data["harness_errors_by_kind"] == {"check_error": 3}
    assert data["check_warnings"] == [
        "task cannot-judge: 2 of 2 attempts are check_error (the check could not judge them: "
        "they are out of the success denominator)"
    ]
    text = cli("report", str(outcome.run_dir))
    assert "warning: task cannot-judge: 2 of 2 attempts are check_error" in text.stdout

    # A run recorded before the rule was named: judged by exit-v1, and the report says so.
    manifest_path = outcome.run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["check_rule"]
    manifest_path.write_text(json.dumps(manifest))
    [old] = build_report([outcome.run_dir])
    assert old.check_rule == "exit-v1"
    assert old.check_warnings[-1].startswith("checks judged by the old rule exit-v1 (")
    # ... and resumed since (for real: two rows lost): the resume judges by the current rule
    # and says so in its entry, with its client
    attempts = outcome.run_dir / "attempts.jsonl"
    attempts.write_text("".join(attempts.read_text().splitlines(keepends=True)[:-2]))
    manifest["status"] = "interrupted"
    manifest_path.write_text(json.dumps(manifest))
    profile = Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
    resumed_run = await resume_run(outcome.run_dir, api_key=KEY, profile=profile)
    assert resumed_run.status == "completed", resumed_run.reason
    [entry] = json.loads(manifest_path.read_text())["resumes"]
    assert entry["check_rule"] == CHECK_RULE
    assert entry["client"] == {"name": "driftdesk", "version": __version__}
    assert "check_rule" not in json.loads(manifest_path.read_text())
    [resumed] = build_report([outcome.run_dir])
    assert resumed.check_rule == "exit-v1+exit-v2"
    assert resumed.check_warnings[-1].startswith(
        "checks judged by the old rule exit-v1 until it was resumed (then exit-v2)"
    )
