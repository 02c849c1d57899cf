"""A run executed in a child process (``reruns.run_process``): events cross a pipe as JSON lines
and arrive as the engine emitted them; the child is interrupted cleanly by SIGTERM, by its
parent's end, and reports a run that could not start in the engine's own words."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import (
    AttemptEnded,
    AttemptFinished,
    AttemptOutput,
    AttemptPlaced,
    AttemptRetrying,
    AttemptStarted,
    CallRecorded,
    RunEvent,
    RunFinished,
    RunStarted,
    RunStats,
    event_from_json,
    event_to_json,
)
from driftdesk.reruns.ray_executor import RaySettings
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_process import (
    OUTPUT_LINE_CHARS,
    OUTPUT_LINES_PER_ATTEMPT,
    RunProcessFailed,
    _EventWriter,
    new_run_request,
    resume_request,
    run_in_child,
    spec_of,
)
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

KEY = "sk-run-process-test-0123456789abcdef"


def _events() -> list[RunEvent]:
    stats = RunStats(total=4, done=3, retries=1, calls=5, prompt_tokens=40, completion_tokens=9)
    stats.by_outcome.update(pass_=0, **{"pass": 2, "link_error": 1})
    stats.link_errors["http_429"] += 1
    row = {"run_id": "r", "task_id": "t1", "attempt": 0, "outcome": "pass", "latency_ms": 12.5}
    call = {"task_id": "t1", "attempt": 0, "call_index": 0, "status": 200, "total_tokens": 49}
    return [
        RunStarted(
            "r", Path("/tmp/runs/r"), {"profile": "p", "notices": ["n"]}, ("t1", "t2"), 2, 4
        ),
        AttemptStarted("r", "t1", 0),
        AttemptPlaced("r", "t1", 0, "10.0.0.2/abcd1234"),
        AttemptOutput("r", "t1", 0, "stderr", "naïve → ünïcode\ttab"),
        CallRecorded("r", "t1", 0, call),
        AttemptRetrying("r", "t1", 0, 1, "http_429", 0.5),
        AttemptEnded("r", "t1", 0),
        AttemptFinished("r", row),
        RunFinished("r", "completed", stats),
    ]


def test_every_event_crosses_as_one_json_line_and_comes_back_equal() -> None:
    from driftdesk.tui.state import LiveRun

    direct, relayed = LiveRun(label="direct"), LiveRun(label="relayed")
    events = _events()
    assert len(events) > 5
    for event in events:
        line = event_to_json(event)
        assert "\n" not in line
        back = event_from_json(line.encode())
        if isinstance(event, RunFinished):
            assert isinstance(back, RunFinished) and back.status == event.status
            # the same counters (elapsed time goes on counting on the other side)
            assert {**back.stats.to_dict(), "elapsed_seconds": 0} == {
                **event.stats.to_dict(),
                "elapsed_seconds": 0,
            }
        else:
            assert back == event
        direct.on_event(event)
        relayed.on_event(back)
    # the live pane's state is the same whether the events came in-process or over the pipe
    for name in ("cells", "rows", "running_per_node", "task_ids", "status", "run_dir"):
        assert getattr(relayed, name) == getattr(direct, name), name
    assert relayed.stats.to_dict() | {"elapsed_seconds": 0} == direct.stats.to_dict() | {
        "elapsed_seconds": 0
    }
    assert list(relayed.logs[("t1", 0)]) == list(direct.logs[("t1", 0)])


@pytest.mark.parametrize("line", ['{"event": "Nope"}', "[1, 2]", '{"event": "AttemptEnded"}'])
def test_a_line_that_is_no_event_is_refused(line: str) -> None:
    with pytest.raises(ValueError):
        event_from_json(line)


def test_a_spec_crosses_as_json_with_its_key_beside_it() -> None:
    spec = RunSpec(
        profile=Profile("mem", "openai", "http://127.0.0.1:9/v1", "m", headers={"X-A": "b"}),
        suite="basic",
        repeat=3,
        concurrency=7,
        timeout_s=9.5,
        tasks=["arith-01"],
        seed=4,
        only_failed=Path("runs/earlier"),
        out_dir=Path("/tmp/out"),
        api_key=KEY,
        retry_policy=RetryPolicy(max_retries=2, base_delay_s=0.1, max_delay_s=3.0),
        probe=True,
        executor="ray",
        ray=RaySettings(address="127.0.0.1:6379", resources={"gpu_x": 1.0}),
    )
    request = json.loads(json.dumps(new_run_request(spec)))
    assert KEY not in json.dumps(request["spec"]) and request["api_key"] == KEY
    assert spec_of(request) == spec
    saved = RunSpec(profile="work", suite="basic")
    assert spec_of(json.loads(json.dumps(new_run_request(saved)))) == saved


def test_output_crosses_the_pipe_capped_per_attempt() -> None:
    import concurrent.futures

    read_fd, write_fd = os.pipe()
    loop = asyncio.new_event_loop()
    with concurrent.futures.ThreadPoolExecutor(1) as reader:  # the parent's side
        received = reader.submit(lambda: os.fdopen(read_fd, "rb").read())
        try:
            writer = _EventWriter(write_fd, loop, on_gone=lambda: None)
            long_line = "x" * (OUTPUT_LINE_CHARS + 50)
            writer.on_event(AttemptOutput("r", "t1", 0, "stdout", long_line))
            for i in range(OUTPUT_LINES_PER_ATTEMPT + 500):
                writer.on_event(AttemptOutput("r", "t1", 0, "stdout", f"line {i}"))
            writer.on_event(AttemptOutput("r", "t2", 0, "stdout", "another attempt"))
            writer.flush()
        finally:
            os.close(write_fd)
            loop.close()
        events = [event_from_json(line) for line in received.result(60).splitlines()]
    first = [e for e in events if isinstance(e, AttemptOutput) and e.task_id == "t1"]
    assert len(first) == OUTPUT_LINES_PER_ATTEMPT + 1
    assert len(first[0].text) == OUTPUT_LINE_CHARS + 1 and first[0].text.endswith("…")
    assert first[-2].text == f"line {OUTPUT_LINES_PER_ATTEMPT - 2}"
    assert "attempt's files hold all of it" in first[-1].text
    assert [e.text for e in events if isinstance(e, AttemptOutput) and e.task_id == "t2"] == [
        "another attempt"
    ]


class Collect:
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent) -> None:
        self.events.append(event)


async def test_a_run_in_a_child_relays_every_event_and_the_rows(home, tmp_path: Path) -> None:
    with SandboxServer(latency_ms=0.0) as server:
        profile = Profile("unsaved", "openai", server.base_url, SIM_MODEL)
        spec = RunSpec(profile=profile, suite="basic", repeat=2, out_dir=tmp_path, api_key=KEY)
        seen = Collect()
        pids: list[int] = []
        await run_in_child(new_run_request(spec), seen, on_start=pids.append)
    started = next(e for e in seen.events if isinstance(e, RunStarted))
    finished = [e for e in seen.events if isinstance(e, AttemptFinished)]
    rows = (started.run_dir / "attempts.jsonl").read_text().splitlines()
    assert len(finished) == len(rows) == len(started.task_ids) * 2
    assert isinstance(seen.events[-1], RunFinished) and seen.events[-1].status == "completed"
    assert pids and pids[0] != os.getpid()


async def test_a_run_that_cannot_start_fails_in_the_engines_words(home, tmp_path: Path) -> None:
    with pytest.raises(RunProcessFailed, match="no profile named 'nope'"):
        await run_in_child(
            new_run_request(RunSpec(profile="nope", suite="basic", out_dir=tmp_path)), Collect()
        )


async def _until(condition: Any, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_cancelling_interrupts_the_child_and_the_run_dir_stays_resumable(
    home, tmp_path: Path
) -> None:
    with SandboxServer(latency_ms=100.0) as server:
        profile = Profile("unsaved", "openai", server.base_url, SIM_MODEL)
        spec = RunSpec(profile=profile, suite="basic", repeat=3, out_dir=tmp_path, api_key=KEY)
        seen = Collect()
        task = asyncio.create_task(run_in_child(new_run_request(spec), seen))
        await _until(lambda: any(isinstance(e, AttemptFinished) for e in seen.events))
        task.cancel()  # the TUI's x / quit: SIGTERM to the child
        with pytest.raises(asyncio.CancelledError):
            await task
        run_dir = next(e for e in seen.events if isinstance(e, RunStarted)).run_dir
        last = seen.events[-1]
        assert isinstance(last, RunFinished) and last.status == "interrupted"
        assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
        # the rest of the slots, resumed through the same child path with the key on stdin
        again = Collect()
        await run_in_child(resume_request(run_dir, api_key=KEY, profile=profile), again)
    rows = [json.loads(r) for r in (run_dir / "attempts.jsonl").read_text().splitlines()]
    assert len(rows) == len({(r["task_id"], r["attempt"]) for r in rows})
    assert len(rows) == len(json.loads((run_dir / "manifest.json").read_text())["tasks"]) * 3
    assert isinstance(again.events[-1], RunFinished) and again.events[-1].status == "completed"


def test_the_child_interrupts_its_run_when_its_parent_goes_away(home, tmp_path: Path) -> None:
    """The parent's end of stdin closes (the app was killed): the run stops, resumable."""
    with SandboxServer(latency_ms=100.0) as server:
        profile = Profile("unsaved", "openai", server.base_url, SIM_MODEL)
        spec = RunSpec(profile=profile, suite="basic", repeat=3, out_dir=tmp_path, api_key=KEY)
        child = subprocess.Popen(
            [sys.executable, "-m", "driftdesk.reruns.run_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(json.dumps(new_run_request(spec)).encode() + b"\n")
        child.stdin.flush()
        events = []
        for line in child.stdout:
            events.append(event_from_json(line))
            if isinstance(events[-1], AttemptFinished):
                break
        child.stdin.close()
        events += [event_from_json(line) for line in child.stdout]
        assert child.wait(60) == 130
    run_dir = next(e for e in events if isinstance(e, RunStarted)).run_dir
    assert isinstance(events[-1], RunFinished) and events[-1].status == "interrupted"
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
