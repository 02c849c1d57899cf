"""Adaptive reruns through the real engine: against the sandbox (known per-task skills) and
the scripted endpoint (link errors, hangs), with the manifest and resume."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from reruns_helpers import ScriptedEndpoint, cancel_after_rows, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.adaptive import AdaptiveDesign, stable_after
from driftdesk.reruns.events import (
    AdaptiveProgress,
    AttemptEnded,
    AttemptStarted,
    RunEvent,
    event_from_json,
    event_to_json,
)
from driftdesk.reruns.run_spec import RunSetupError, RunSpec
from driftdesk.reruns.run_start import execute_run, resume_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer, task_skill
from driftdesk.reruns.suites import load_suite

KEY = "sk-test-REALKEY-adaptive-0123456789"


class Recorder:
    def __init__(self) -> None:
        self.events: list[RunEvent] = []
        self.running = 0
        self.most_running = 0

    def on_event(self, event: RunEvent) -> None:
        self.events.append(event)
        if isinstance(event, AttemptStarted):
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        elif isinstance(event, AttemptEnded):
            self.running -= 1


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    server = SandboxServer(seed=5)
    server.start()
    yield server
    server.stop()


def _outcomes(rows: list[dict]) -> dict[str, dict[int, str]]:
    by_task: dict[str, dict[int, str]] = defaultdict(dict)
    for row in rows:
        by_task[row["task_id"]][row["attempt"]] = row["outcome"]
    return by_task


async def test_volatile_target_on_the_sandbox_classifies_every_task(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    suite = load_suite("basic")
    always = [t for t in suite.task_ids if task_skill(t) == 1.0][:3]
    flaky = [t for t in suite.task_ids if 0.4 < task_skill(t) < 0.7][:3]
    recorder = Recorder()
    outcome = await execute_run(
        RunSpec(
            profile=Profile("sim", "openai", sandbox.base_url, SIM_MODEL),
            suite="basic",
            tasks=always + flaky,
            concurrency=4,
            timeout_s=5,
            out_dir=tmp_path,
            api_key=KEY,
            adaptive=AdaptiveDesign.parse("volatile", max_repeats=12),
        ),
        recorder,
    )
    assert outcome.status == "completed"
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    by_task = _outcomes(rows)
    assert set(by_task) == set(always + flaky)
    for attempts in by_task.values():
        assert sorted(attempts) == list(range(len(attempts)))  # numbers stay 0..n-1
        seen = set(attempts.values())
        if seen == {"pass", "fail"}:
            # volatile once both outcomes are in: at most the attempts then in flight follow
            first_mixed = next(
                i for i in range(len(attempts)) if len({attempts[j] for j in range(i + 1)}) == 2
            )
            assert len(attempts) <= first_mixed + 1 + 3
        else:  # stable: exactly enough agreeing outcomes, never more
            assert len(attempts) == stable_after()
    for task_id in always:
        assert set(by_task[task_id].values()) == {"pass"}
        assert len(by_task[task_id]) == stable_after()
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert manifest["repeat"] == 2  # the first round
    assert manifest["adaptive"]["target"] == "volatile"
    assert manifest["adaptive"]["rule"]["stable_after"] == stable_after()
    result = manifest["adaptive"]["result"]
    assert result["attempts"] == len(rows)
    assert result["stop_reason"].startswith("target met")
    mixed = sorted(t for t, a in by_task.items() if set(a.values()) == {"pass", "fail"})
    assert result["volatile_tasks"] == mixed
    assert recorder.most_running == 4  # the concurrency stays full while work remains
    progress = [e for e in recorder.events if isinstance(e, AdaptiveProgress)]
    assert progress and progress[-1].stop_reason == result["stop_reason"]
    assert progress[-1].open_tasks == {}
    assert progress[0].open_tasks == dict.fromkeys(always + flaky, "first round")
    # the progress bar's total narrows from "at most" to what was made
    assert progress[0].execution_total == 6 * stable_after()
    assert progress[-1].execution_total == len(rows) == outcome.stats.total
    # the event travels to a face in another process unchanged
    assert event_from_json(event_to_json(progress[-1])) == progress[-1]


async def test_link_errors_are_replaced_not_judged_and_capped(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42", "wrong", "unauthorized"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile("local", "openai", scripted.url, "test-model"),
            suite=str(suite),
            out_dir=tmp_path / "runs",
            api_key=KEY,
            concurrency=2,
            adaptive=AdaptiveDesign.parse("volatile", max_repeats=3),
        )
    )
    by_task = _outcomes(read_rows(outcome.run_dir / "attempts.jsonl"))
    assert by_task["answer-42"] == {0: "pass", 1: "pass", 2: "pass"}  # at --max-repeats
    assert by_task["wrong"] == {0: "fail", 1: "fail", 2: "fail"}
    # every row a real attempt; none judged; stopped once its errors reached --max-repeats
    assert by_task["unauthorized"] == {0: "link_error", 1: "link_error", 2: "link_error"}


async def test_a_budget_of_attempts_is_never_exceeded(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42", "wrong", "rate-limited-then-ok"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile("local", "openai", scripted.url, "test-model"),
            suite=str(suite),
            out_dir=tmp_path / "runs",
            api_key=KEY,
            concurrency=4,
            adaptive=AdaptiveDesign.parse("volatile", budget_attempts=5),
        )
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert len(rows) == 5
    result = json.loads((outcome.run_dir / "manifest.json").read_text())["adaptive"]["result"]
    assert result["stop_reason"] == "budget spent: 5 of 5 attempts"


async def test_an_interrupted_adaptive_run_resumes_its_design(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42", "wrong", "hang"])
    spec = RunSpec(
        profile=Profile("local", "openai", scripted.url, "test-model"),
        suite=str(suite),
        out_dir=tmp_path / "runs",
        api_key=KEY,
        concurrency=3,
        timeout_s=30,
        adaptive=AdaptiveDesign.parse("volatile", max_repeats=4),
    )
    recorder = Recorder()
    attempts = await cancel_after_rows(spec, 6, recorder, tries=300)
    before = read_rows(attempts)
    assert before and all(r["task_id"] != "hang" for r in before)
    manifest = json.loads((attempts.parent / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["adaptive"]["result"]["stop_reason"] is None

    scripted.overrides["hang"] = "answer-42"
    outcome = await resume_run(
        attempts.parent, api_key=KEY, profile=Profile("local", "openai", scripted.url, "test-model")
    )
    assert outcome.status == "completed"
    rows = read_rows(attempts)
    assert rows[: len(before)] == before  # nothing rewritten
    by_task = _outcomes(rows)
    assert {t: len(a) for t, a in by_task.items()} == {"answer-42": 4, "wrong": 4, "hang": 4}
    assert all(sorted(a) == list(range(4)) for a in by_task.values())
    manifest = json.loads((attempts.parent / "manifest.json").read_text())
    assert manifest["adaptive"]["result"]["attempts"] == 12
    # resumed once more: the design is done, nothing runs
    again = await resume_run(
        attempts.parent, api_key=KEY, profile=Profile("local", "openai", scripted.url, "test-model")
    )
    assert again.status == "completed" and len(read_rows(attempts)) == 12


async def test_adaptive_refuses_the_inspect_agent(tmp_path: Path) -> None:
    with pytest.raises(RunSetupError, match="--adaptive chooses each next attempt"):
        await execute_run(
            RunSpec(
                profile=Profile("local", "openai", "http://127.0.0.1:9/v1", "m"),
                suite="basic",
                agent="inspect",
                out_dir=tmp_path,
                adaptive=AdaptiveDesign.parse("volatile"),
            )
        )


async def test_a_dollar_budget_is_priced_and_never_overrun(
    home: object, scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    from driftdesk.analysis.prices import prices_path

    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42", "wrong"])
    spec = RunSpec(
        profile=Profile("local", "openai", scripted.url, "priced-model"),
        suite=str(suite),
        out_dir=tmp_path / "runs",
        api_key=KEY,
        concurrency=1,
        adaptive=AdaptiveDesign.parse("volatile", budget_usd=5.0),
    )
    with pytest.raises(RunSetupError, match="--budget-usd needs a price for model 'priced-model'"):
        await execute_run(spec)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())

    # 11 prompt + 3 completion tokens a call (the scripted endpoint's usage) at $0.10 a token:
    # $1.40 an attempt, so the 4th would end at $5.60
    prices_path().parent.mkdir(parents=True, exist_ok=True)
    prices_path().write_text(
        '[models."priced-model"]\ninput_per_mtok = 100000\noutput_per_mtok = 100000\n'
    )
    outcome = await execute_run(spec)
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert len(rows) == 3
    result = json.loads((outcome.run_dir / "manifest.json").read_text())["adaptive"]["result"]
    assert result["spent_usd"] == pytest.approx(4.2)
    assert result["stop_reason"] == "budget spent: $4.2000 of $5"


async def test_a_rerun_of_an_adaptive_run_keeps_its_design(tmp_path: Path) -> None:
    design = AdaptiveDesign.parse("ci=3pp", min_repeats=3, max_repeats=9, budget_attempts=50)
    manifest = {
        "profile": "p",
        "suite": {"name": "basic"},
        "repeat": 3,
        "adaptive": design.to_manifest(),
    }
    spec = RunSpec.rerun_of(manifest, ["arith-01"], tmp_path)
    assert spec.adaptive == design
    fixed = RunSpec.rerun_of({"profile": "p", "repeat": 4}, ["arith-01"], tmp_path)
    assert fixed.adaptive is None and fixed.repeat == 4
