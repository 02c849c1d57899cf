"""The engine against a real local endpoint: outcomes, error kinds, honest retry counts."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from reruns_helpers import ScriptedEndpoint, cancel_after_rows, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import AttemptFinished, CallRecorded, RunEvent, RunFinished, RunStarted
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run, resume_run
from driftdesk.rundir import latest_rows
from tests.ports import refused_port

REAL_KEY = "sk-test-REALKEY-0123456789abcdef"
FAST_RETRIES = RetryPolicy(max_retries=4, base_delay_s=0.01, max_delay_s=0.05)

# behaviour -> (outcome, error_code, requests per attempt or None when variable)
EXPECTED = {
    "answer-42": ("pass", None, 1),
    "wrong": ("fail", None, 1),
    "unauthorized": ("link_error", "401", 1),
    "not-found": ("link_error", "404", 1),
    "no-quota": ("link_error", "insufficient_quota", 1),
    "rate-limited": ("link_error", "429", 5),  # 1 try + 4 retries
    "server-error": ("link_error", "500", 5),
    "hang": ("link_error", "timeout", 5),
    "truncated": ("link_error", "truncated", 1),
    "empty": ("link_error", "empty_response", 1),
    "rate-limited-then-ok": ("pass", None, None),
}


class Recorder:
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent) -> None:
        self.events.append(event)


def profile_for(url: str) -> Profile:
    return Profile(name="local", protocol="openai", base_url=url, model="test-model")


def scripted_spec(
    scripted: ScriptedEndpoint, suite: Path, tmp_path: Path, **overrides: Any
) -> RunSpec:
    """A run of ``suite`` against the scripted endpoint, with the key in memory, under tmp/runs."""
    return RunSpec(
        profile=profile_for(scripted.url),
        suite=str(suite),
        out_dir=tmp_path / "runs",
        api_key=REAL_KEY,
        **overrides,
    )


async def test_outcomes_error_kinds_and_retries_match_the_server(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", list(EXPECTED))
    repeat = 3
    recorder = Recorder()
    spec = scripted_spec(
        scripted,
        suite,
        tmp_path,
        repeat=repeat,
        concurrency=6,
        timeout_s=2.5,  # "hang" must time out; on a loaded machine (load 9 seen) the others must not
        retry_policy=FAST_RETRIES,
    )
    outcome = await execute_run(spec, recorder)

    assert outcome.status == "completed"
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert len(rows) == len(EXPECTED) * repeat
    assert {(r["task_id"], r["attempt"]) for r in rows} == {
        (t, a) for t in EXPECTED for a in range(repeat)
    }
    for row in rows:
        want_outcome, want_code, per_attempt = EXPECTED[row["task_id"]]
        assert (row["outcome"], row["error_code"]) == (want_outcome, want_code), row
        assert row["success"] is {"pass": True, "fail": False}.get(want_outcome)
        if per_attempt is not None:
            assert row["retries"] == per_attempt - 1, row
            assert row["calls"] == per_attempt, row
        assert row["base_url"] == scripted.url and row["model"] == "test-model"
    # Every retry the engine reports was a request the server really received.
    for task_id in EXPECTED:
        task_rows = [r for r in rows if r["task_id"] == task_id]
        assert scripted.requests[task_id] == repeat + sum(r["retries"] for r in task_rows)
    assert sum(r["retries"] for r in rows) == outcome.stats.retries
    flaky = [r for r in rows if r["task_id"] == "rate-limited-then-ok"]
    assert sum(r["retries"] for r in flaky) >= 1

    # calls.jsonl: one row per request the proxy forwarded, tokens from the SSE usage chunk.
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert len(calls) == sum(scripted.requests.values())
    ok_calls = [c for c in calls if c["status"] == 200 and c["error_kind"] is None]
    assert ok_calls and all(c["prompt_tokens"] == 11 for c in ok_calls)
    assert all(c["streamed"] for c in ok_calls)
    passing = [r for r in rows if r["task_id"] == "answer-42"]
    assert all(r["total_tokens"] == 14 for r in passing)

    # The real key reached the endpoint (the run's throwaway key never did), and no file of
    # the run holds it although the endpoint's 401s echoed it.
    assert all(a == f"Bearer {REAL_KEY}" for a in scripted.authorizations)
    assert not any(scripted.api_key_headers)
    # Attempt logs and transcripts are private to their owner, like the JSONL files.
    attempt_files = [p for p in (outcome.run_dir / "attempts").rglob("*") if p.is_file()]
    kinds_of_file = {p.name.split(".", 1)[1] for p in attempt_files}
    assert kinds_of_file == {"log", "transcript.json", "calls.jsonl.gz"}
    assert {oct(p.stat().st_mode & 0o777) for p in attempt_files} == {"0o600"}
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".gz":  # a call recording: the 401s it holds echoed the key
                data = gzip.decompress(data)
            assert REAL_KEY.encode() not in data, path

    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["ended_at"]
    assert manifest["tasks"] == list(EXPECTED) and manifest["repeat"] == repeat

    kinds = [type(e) for e in recorder.events]
    assert kinds[0] is RunStarted and kinds[-1] is RunFinished
    assert kinds.count(AttemptFinished) == len(rows)
    assert kinds.count(CallRecorded) == len(calls)


async def test_connection_errors_are_retried_then_reported(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42"])
    with refused_port() as port:  # nothing listens on it
        outcome = await execute_run(
            RunSpec(
                profile=profile_for(f"http://127.0.0.1:{port}/v1"),
                suite=str(suite),
                repeat=2,
                timeout_s=2,
                out_dir=tmp_path / "runs",
                api_key=REAL_KEY,
                retry_policy=RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02),
            )
        )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [(r["outcome"], r["error_code"], r["retries"]) for r in rows] == [
        ("link_error", "connection", 2)
    ] * 2
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert len(calls) == 6 and {c["error_kind"] for c in calls} == {"connection"}


async def test_cancel_interrupts_cleanly_and_resume_fills_exactly_the_gaps(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    behaviours = ["answer-42", "wrong", "hang"]
    suite = write_suite(tmp_path / "suite.jsonl", behaviours)
    spec = scripted_spec(
        scripted,
        suite,
        tmp_path,
        repeat=4,
        concurrency=3,
        timeout_s=30,  # the hang task stays in flight until we cancel
    )
    recorder = Recorder()
    attempts = await cancel_after_rows(spec, 4, recorder, tries=200)
    run_dir = attempts.parent
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    before = read_rows(attempts)
    assert all(r["task_id"] != "hang" for r in before)  # in-flight: cancelled, not recorded
    finished = [e for e in recorder.events if isinstance(e, RunFinished)]
    assert finished and finished[0].status == "interrupted"

    scripted.overrides["hang"] = "answer-42"
    outcome = await resume_run(run_dir, api_key=REAL_KEY, profile=profile_for(scripted.url))
    assert outcome.status == "completed"
    rows = read_rows(attempts)
    slots = [(r["task_id"], r["attempt"]) for r in rows]
    assert len(slots) == len(set(slots)) == len(behaviours) * 4
    assert rows[: len(before)] == before  # nothing rewritten
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"


async def test_retry_link_errors_supersedes_only_link_error_slots(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42", "wrong", "unauthorized"])
    first = await execute_run(
        scripted_spec(
            scripted,
            suite,
            tmp_path,
            repeat=2,
        )
    )
    before = read_rows(first.run_dir / "attempts.jsonl")
    assert Counter(r["outcome"] for r in before) == {"pass": 2, "fail": 2, "link_error": 2}

    nothing = await resume_run(first.run_dir, api_key=REAL_KEY)
    assert nothing.stats.total == 0  # no missing slot: nothing runs twice

    scripted.overrides["unauthorized"] = "answer-42"  # the key was fixed
    again = await resume_run(first.run_dir, retry_link_errors=True, api_key=REAL_KEY)
    assert again.stats.total == 2
    rows = read_rows(first.run_dir / "attempts.jsonl")
    assert len(rows) == 8 and rows[:6] == before
    latest = latest_rows(rows)
    assert len(latest) == 6
    assert Counter(r["outcome"] for r in latest.values()) == {"pass": 4, "fail": 2}


async def test_sample_and_task_selection_are_seeded_and_in_suite_order(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    names = [f"answer-42-{i}" for i in range(10)]
    suite = write_suite(tmp_path / "suite.jsonl", names)

    async def run(**kw: object) -> list[str]:
        spec = scripted_spec(
            scripted,
            suite,
            tmp_path,
            repeat=1,
            **kw,
        )
        outcome = await execute_run(spec)
        return list(json.loads((outcome.run_dir / "manifest.json").read_text())["tasks"])

    sampled = await run(sample=4, seed=7)
    assert len(sampled) == 4 and sampled == [n for n in names if n in sampled]
    assert await run(sample=4, seed=7) == sampled
    assert await run(tasks=["answer-42-3", "answer-42-1"]) == ["answer-42-1", "answer-42-3"]


async def test_only_failed_and_only_volatile_rerun_just_those_tasks(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42", "wrong", "unauthorized"])
    first = await execute_run(
        scripted_spec(
            scripted,
            suite,
            tmp_path,
            repeat=2,
        )
    )

    async def tasks_of(**kw: object) -> list[str]:
        outcome = await execute_run(
            scripted_spec(
                scripted,
                suite,
                tmp_path,
                repeat=1,
                **kw,
            )
        )
        return list(json.loads((outcome.run_dir / "manifest.json").read_text())["tasks"])

    failed = await tasks_of(only_failed=first.run_dir)
    assert failed == ["wrong"]  # a link error is not a model failure
    with pytest.raises(ValueError, match="no volatile tasks"):
        await tasks_of(only_volatile=first.run_dir)


async def test_running_never_exceeds_the_concurrency(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    from driftdesk.reruns.progress import TextProgress

    class Watcher:
        """Checks the progress line's counter, and the engine's own, after every event."""

        def __init__(self) -> None:
            self.progress = TextProgress(io.StringIO(), is_tty=False)
            self.seen: list[int] = []

        def on_event(self, event: RunEvent) -> None:
            self.progress.on_event(event)
            self.seen.append(self.progress.stats.running)

    watcher = Watcher()
    suite = write_suite(tmp_path / "suite.jsonl", [f"answer-42-{i}" for i in range(8)])
    outcome = await execute_run(
        scripted_spec(
            scripted,
            suite,
            tmp_path,
            repeat=3,
            concurrency=2,
        ),
        watcher,
    )
    assert outcome.status == "completed" and outcome.stats.done == 24
    assert max(watcher.seen) == 2  # both workers busy at some point, never more
    assert watcher.seen[-1] == 0 and outcome.stats.running == 0


async def test_a_failing_listener_is_logged_with_the_key_masked(
    scripted: ScriptedEndpoint, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Leaky:
        def on_event(self, event: RunEvent) -> None:
            raise RuntimeError(f"face bug while showing {REAL_KEY}")

    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42"])
    with caplog.at_level("ERROR", logger="driftdesk.reruns.execution"):
        outcome = await execute_run(
            scripted_spec(
                scripted,
                suite,
                tmp_path,
                repeat=2,
            ),
            Leaky(),
        )
    assert outcome.status == "completed" and outcome.stats.done == 2  # the run went on
    assert len(caplog.records) == 1  # logged once
    assert "run listener failed" in caplog.text and "face bug while showing" in caplog.text
    assert "Traceback" in caplog.text
    assert REAL_KEY not in caplog.text


async def test_a_rerun_keeps_the_runs_conditions(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    """Seen: the workbench's rerun rebuilt the spec from a few manifest fields, so a rerun of
    a Codex or Claude Code run ran the built-in agent instead, outside --isolate and with the
    default retries. The rerun is a real run here, of a command-agent run."""
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42-a", "answer-42-b"])
    endpoint = scripted
    if True:  # (the endpoint's fixture scope)
        source = await execute_run(
            RunSpec(
                profile=Profile(name="p", protocol="openai", base_url=endpoint.url, model="m"),
                suite=str(suite),
                repeat=2,
                concurrency=3,
                timeout_s=45.0,
                seed=7,
                agent="command",
                command="true {task_id}",
                out_dir=tmp_path / "runs",
                api_key="sk-test-rerun-0123456789",
                retry_policy=RetryPolicy(max_retries=1, base_delay_s=0.25, max_delay_s=2.0),
            )
        )
        manifest = json.loads((source.run_dir / "manifest.json").read_text())
        spec = RunSpec.rerun_of(
            manifest, ["answer-42-b"], source.run_dir, api_key="sk-test-rerun-0123456789"
        )
        assert (spec.agent, spec.command, spec.isolate) == ("command", "true {task_id}", False)
        assert spec.out_dir == source.run_dir.parent  # beside the run it reruns
        spec.profile = Profile(name="p", protocol="openai", base_url=endpoint.url, model="m")
        rerun = await execute_run(spec)
    again = json.loads((rerun.run_dir / "manifest.json").read_text())
    same = ("agent", "command", "isolate", "repeat", "concurrency", "timeout_seconds", "seed")
    assert {k: again[k] for k in same} == {k: manifest[k] for k in same}
    assert (
        again["retry_policy"]
        == manifest["retry_policy"]
        == {
            "max_retries": 1,
            "base_delay_seconds": 0.25,
            "max_delay_seconds": 2.0,
        }
    )
    assert again["suite"] == manifest["suite"] and again["tasks"] == ["answer-42-b"]
    for agent in ("claude-code", "codex", "inspect"):
        assert RunSpec.rerun_of({**manifest, "agent": agent}, ["x"], source.run_dir).agent == agent
    assert spec.executor == "local"
    on_ray = {**manifest, "executor": {"kind": "ray", "ray_address": "127.0.0.1:6379"}}
    ray_rerun = RunSpec.rerun_of(on_ray, ["x"], source.run_dir)
    assert (ray_rerun.executor, ray_rerun.ray.address) == ("ray", "127.0.0.1:6379")
    imported = {**manifest, "agent": "import:tau2"}  # no agent of ours: rerun built in
    assert RunSpec.rerun_of(imported, ["x"], source.run_dir).agent == "builtin"
