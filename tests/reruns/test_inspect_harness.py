"""``run --agent inspect`` and ``import --format inspect`` with the real inspect_ai.

inspect runs a task file with a few samples against a scripted Chat Completions endpoint on
loopback (through the metering proxy); the rows come from the log inspect itself writes, and
the same logs are imported back. The endpoint plays the provider: each sample's input names
its behaviour (``behave:NAME``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from inspect_helpers import write_task
from reruns_helpers import LoopbackServer, read_rows

from driftdesk.analysis.import_formats import ResultsImportError
from driftdesk.analysis.imports import import_results
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import AttemptFinished, RunEvent
from driftdesk.reruns.inspect_harness import InspectRunError
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.suites import SuiteError
from driftdesk.rundir import RECORDING_SUFFIX, attempt_file

REAL_KEY = "sk-test-REALKEY-inspect-0123456789"
MODEL = "test-model"


class ChatEndpoint(LoopbackServer):
    """Chat Completions (JSON answers). ``slow`` waits for ``release``; ``flaky`` gets
    ``flaky_status`` while it is set; ``rate-limited-once`` gets one 429 first."""

    url_suffix = "/v1"
    handler_cancellation = True

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.flaky_status: int | None = None  # what the "flaky" sample gets, None: an answer
        self.limited_once = False
        self.authorizations: list[str] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.chat)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.authorizations.append(request.headers.get("Authorization", ""))
        text = json.dumps(body.get("messages"))
        behaviour = text.split("behave:", 1)[1].split()[0] if "behave:" in text else "answer-42"
        if behaviour == "not-found":
            error = {"error": {"message": "no such model", "code": "model_not_found"}}
            return web.json_response(error, status=404)
        if behaviour == "rate-limited-once" and not self.limited_once:
            self.limited_once = True
            error = {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}
            return web.json_response(error, status=429, headers={"Retry-After": "0"})
        if behaviour == "flaky" and self.flaky_status is not None:
            error = {"error": {"message": "upstream hiccup", "code": "server_error"}}
            return web.json_response(error, status=self.flaky_status)
        if behaviour == "slow":
            await asyncio.wait_for(self.release.wait(), 60)
        served = "other-model" if behaviour == "swapped" else body["model"]
        answer = "41" if behaviour == "wrong" else "42"
        completion = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": served,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
        }
        raw = json.dumps(completion).encode()
        if behaviour != "truncated":
            return web.Response(body=raw, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Length": str(len(raw))})
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(raw[:20])
        assert request.transport is not None
        request.transport.close()
        return response


@pytest.fixture
async def endpoint() -> AsyncIterator[ChatEndpoint]:
    server = ChatEndpoint()
    await server.start()
    yield server
    await server.stop()


def _spec(endpoint: ChatEndpoint, task: Path, tmp_path: Path, **kw: Any) -> RunSpec:
    return RunSpec(
        profile=Profile(name="local", protocol="openai", base_url=endpoint.url, model=MODEL),
        suite=str(task),
        agent="inspect",
        out_dir=tmp_path / "runs",
        api_key=REAL_KEY,
        timeout_s=60,
        **{"retry_policy": RetryPolicy(max_retries=0), **kw},
    )


class ReleaseOnFirstRow:
    """Lets the slow sample answer only once a row of another sample has arrived: a harness
    that produced rows only after inspect exited would never get there."""

    def __init__(self, endpoint: ChatEndpoint) -> None:
        self.endpoint = endpoint
        self.rows: list[dict[str, Any]] = []

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, AttemptFinished):
            self.rows.append(event.row)
            self.endpoint.release.set()


BEHAVIOURS = ["answer-42", "wrong", "not-found", "truncated", "swapped", "slow"]


async def test_inspect_runs_once_with_epochs_and_its_samples_become_attempt_rows(
    endpoint: ChatEndpoint, tmp_path: Path
) -> None:
    task = write_task(tmp_path, BEHAVIOURS)
    listener = ReleaseOnFirstRow(endpoint)
    outcome = await execute_run(_spec(endpoint, task, tmp_path, repeat=2, concurrency=2), listener)
    assert outcome.status == "completed", outcome.notices
    run_dir = outcome.run_dir
    rows = read_rows(run_dir / "attempts.jsonl")
    by_slot = {(r["task_id"], r["attempt"]): r for r in rows}
    assert sorted(by_slot) == sorted((b, a) for b in BEHAVIOURS for a in (0, 1))
    assert len(rows) == 12
    # One inspect process, one log, with both epochs in it.
    (log,) = (run_dir / "inspect").glob("*.eval")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["tasks"] == BEHAVIOURS and manifest["agent"] == "inspect"
    for attempt in (0, 1):
        assert by_slot[("answer-42", attempt)]["outcome"] == "pass"
        assert by_slot[("swapped", attempt)]["outcome"] == "pass"
        assert by_slot[("slow", attempt)]["outcome"] == "pass"  # released by a live row
        assert by_slot[("wrong", attempt)]["outcome"] == "fail"
        missing = by_slot[("not-found", attempt)]
        assert (missing["outcome"], missing["error_code"]) == ("link_error", "404")
        cut = by_slot[("truncated", attempt)]
        assert cut["outcome"] == "link_error", cut
        assert cut["error_code"] == "truncated"
    ok = by_slot[("answer-42", 0)]
    assert (ok["prompt_tokens"], ok["completion_tokens"], ok["total_tokens"]) == (11, 3, 14)
    assert ok["calls"] == 1 and ok["model_mismatches"] == 0 and ok["model_latency_ms"] > 0
    assert ok["score"] == 1.0 and ok["success"] is True and ok["retries"] == 0
    assert by_slot[("swapped", 0)]["model_mismatches"] == 1
    # Every call is attributed to its sample × epoch, with the model that answered.
    calls = read_rows(run_dir / "calls.jsonl")
    assert {(c["task_id"], c["attempt"]) for c in calls} == set(by_slot)
    swapped = [c for c in calls if c["task_id"] == "swapped"]
    assert all(c["served_model"] == "other-model" and c["model_mismatch"] for c in swapped)
    assert all(c["served_model"] == MODEL for c in calls if c["task_id"] == "answer-42")
    assert outcome.stats.model_mismatches == 2
    # Once attributed, each call is recorded in its sample × epoch's recording.
    for task_id, attempt in by_slot:
        with gzip.open(attempt_file(run_dir, task_id, attempt, RECORDING_SUFFIX), "rt") as fh:
            recorded = [json.loads(line) for line in fh]
        mine = [c for c in calls if (c["task_id"], c["attempt"]) == (task_id, attempt)]
        assert [(r["call_index"], r["request_id"]) for r in recorded] == [
            (c["call_index"], c["request_id"]) for c in mine
        ]
    # ... and read back as the sample's trajectory: inspect's own question, the model's answer.
    from driftdesk.analysis.trajectory import load_trajectory

    traj = load_trajectory(run_dir, "answer-42", 0)
    assert traj is not None and traj.source == "recording" and not traj.problems
    assert [s.kind for s in traj.steps][-1] == "model" and traj.model_turns[-1].text.strip()
    assert traj.model_turns[-1].tokens == 14
    # The real key reached the provider, and nowhere else (inspect's env, logs, output).
    assert set(endpoint.authorizations) == {f"Bearer {REAL_KEY}"}
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            data = gzip.decompress(data) if path.suffix == ".gz" else data
            assert REAL_KEY.encode() not in data, path
    env = json.loads((tmp_path / "env-seen.json").read_text())
    assert all(REAL_KEY not in value for value in env.values())
    assert env["DRIFTDESK_API_KEY"].startswith("dd-run-")  # the run's throwaway key
    assert env["DRIFTDESK_BASE_URL"].startswith("http://127.0.0.1:")  # the proxy
    assert "DBUS_SESSION_BUS_ADDRESS" not in env and env["DRIFTDESK_RUN_CHILD"] == outcome.run_id
    # Rows came while inspect ran: the first ones before the slow sample could finish.
    assert listener.rows[0]["task_id"] != "slow"

    # The very logs inspect wrote import as a run with the same verdicts.
    imported = import_results(run_dir / "inspect", out=tmp_path / "imported")
    assert imported.format == "inspect" and imported.attempts == 12 and imported.tasks == 6
    again = {
        (r["task_id"], r["attempt"]): r for r in read_rows(imported.run_dir / "attempts.jsonl")
    }
    assert {k: r["outcome"] for k, r in again.items()} == {
        k: ("link_error" if r["error_code"] == "truncated" else r["outcome"])
        for k, r in by_slot.items()
    }
    assert again[("not-found", 1)]["error_code"] == "404"
    single = import_results(log, fmt="inspect", out=tmp_path / "imported")
    assert single.attempts == 12


async def test_inspect_failing_to_start_is_a_clear_error(
    endpoint: ChatEndpoint, tmp_path: Path
) -> None:
    broken = tmp_path / "broken_task.py"
    broken.write_text("raise RuntimeError('this task file does not load')\n")
    with pytest.raises(InspectRunError, match="could not start the eval") as caught:
        await execute_run(_spec(endpoint, broken, tmp_path))
    assert "No inspect tasks were found" in str(caught.value)  # inspect's own words


async def test_the_suite_must_be_an_inspect_task_file(
    endpoint: ChatEndpoint, tmp_path: Path
) -> None:
    with pytest.raises(SuiteError, match=r"task\.py"):
        await execute_run(_spec(endpoint, tmp_path / "tasks.jsonl", tmp_path))


def test_an_eval_file_is_not_mistaken_for_json_lines(tmp_path: Path) -> None:
    not_a_log = tmp_path / "x.eval"
    not_a_log.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ResultsImportError) as caught:
        import_results(not_a_log, out=tmp_path / "runs")
    assert "jsonl" not in str(caught.value)
    assert "inspect" in str(caught.value)


async def _inspect_cli(*args: str, cwd: Path, endpoint: ChatEndpoint, display: bool = True) -> None:
    env = dict(os.environ, LOCAL_API_KEY="sk-local-0123456789", LOCAL_BASE_URL=endpoint.url)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "inspect_ai",
        *args,
        *(["--display", "plain"] if display else []),
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()[-2000:]


async def test_import_keeps_the_latest_of_eval_retry_logs(
    endpoint: ChatEndpoint, tmp_path: Path
) -> None:
    """inspect's own eval, stopped by a provider error, then its own eval-retry: the import
    has one row per sample × epoch, the retried samples' verdicts winning."""
    task = write_task(tmp_path, ["answer-42", "flaky", "wrong"])
    logs = tmp_path / "logs"
    endpoint.flaky_status = 500
    await _inspect_cli(
        "eval",
        task.name,
        "--model",
        "openai-api/local/test-model",
        "--epochs",
        "2",
        "--max-retries",
        "0",
        "--max-samples",
        "1",
        "--log-dir",
        str(logs),
        cwd=tmp_path,
        endpoint=endpoint,
    )
    (first,) = logs.glob("*.eval")
    before = import_results(first, out=tmp_path / "runs")
    assert before.notes and "status 'error'" in before.notes[0]  # inspect exited 0
    endpoint.flaky_status = None
    await _inspect_cli(
        "eval-retry", str(first), "--log-dir", str(logs), cwd=tmp_path, endpoint=endpoint
    )
    assert len(list(logs.glob("*.eval"))) == 2
    result = import_results(logs, out=tmp_path / "runs")
    rows = read_rows(result.run_dir / "attempts.jsonl")
    slots = [(r["task_id"], r["attempt"]) for r in rows]
    assert sorted(slots) == sorted((t, a) for t in ("answer-42", "flaky", "wrong") for a in (0, 1))
    outcomes = {slot: r["outcome"] for slot, r in zip(slots, rows, strict=True)}
    assert outcomes[("flaky", 0)] == outcomes[("flaky", 1)] == "pass"
    assert outcomes[("wrong", 0)] == "fail"
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["agent"] == "import:inspect" and manifest["repeat"] == 2
    # The same logs as inspect's .json format, found by --format auto.
    as_json = tmp_path / "json-logs"
    await _inspect_cli(
        "log", "convert", str(logs), "--to", "json", "--output-dir", str(as_json),
        cwd=tmp_path, endpoint=endpoint, display=False,
    )  # fmt: skip
    assert len(list(as_json.rglob("*.json"))) == 2
    from_json = import_results(as_json, out=tmp_path / "runs")
    assert from_json.format == "inspect"
    json_rows = read_rows(from_json.run_dir / "attempts.jsonl")
    assert {(r["task_id"], r["attempt"]): r["outcome"] for r in json_rows} == outcomes


def test_without_inspect_the_message_names_the_extra(tmp_path: Path) -> None:
    log = tmp_path / "x.eval"
    log.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    code = (
        "import sys; sys.modules['inspect_ai'] = None\n"  # as if inspect-ai were not installed
        "from pathlib import Path\n"
        "from driftdesk.cli.main import main\n"
        f"sys.exit(main(['import', {str(log)!r}, '--out', {str(tmp_path / 'runs')!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    assert "driftdesk[inspect]" in done.stderr, done.stderr
    assert "jsonl" not in done.stderr


async def test_inspect_retries_are_counted_and_limits_recorded(
    endpoint: ChatEndpoint, tmp_path: Path
) -> None:
    """inspect retries a 429 itself (bounded by --max-retries): the row counts it and keeps
    both calls; a sample stopped by a limit is still judged, with the limit in its row."""
    task = write_task(tmp_path, ["rate-limited-once"], options="\n            token_limit=5,")
    outcome = await execute_run(
        _spec(endpoint, task, tmp_path, repeat=1, retry_policy=RetryPolicy(max_retries=2))
    )
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["retries"] >= 1 and row["calls"] == 2, row
    assert row["limit"] == "token", row
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert [c["status"] for c in calls] == [429, 200]
    assert outcome.stats.retries >= 1


class MessagesEndpoint(LoopbackServer):
    """Anthropic Messages, streamed or not as asked: "42" to every prompt but ``behave:wrong``;
    it keeps the key headers it received."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[tuple[str, str]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.messages)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.keys.append(
            (request.headers.get("x-api-key", ""), request.headers.get("Authorization", ""))
        )
        answer = "41" if "behave:wrong" in json.dumps(body.get("messages")) else "42"
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": answer}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 11, "output_tokens": 3},
        }
        if not body.get("stream"):
            return web.json_response(message)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        start = {**message, "content": [], "stop_reason": None}
        start["usage"] = {"input_tokens": 11, "output_tokens": 0}
        events = [
            ("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": answer}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 3}}),
            ("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        for name, data in events:
            await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        await response.write_eof()
        return response


async def test_inspect_with_an_anthropic_profile_is_metered_and_keeps_the_key(
    tmp_path: Path,
) -> None:
    """inspect's own Anthropic provider (the real anthropic SDK) through the metering proxy: the
    real key reaches the provider as x-api-key and nothing else sees it."""
    server = MessagesEndpoint()
    await server.start()
    try:
        task = write_task(tmp_path, ["answer-42", "wrong"])
        spec = RunSpec(
            profile=Profile(
                name="claude", protocol="anthropic", base_url=server.url, model="claude-test-1"
            ),
            suite=str(task),
            agent="inspect",
            out_dir=tmp_path / "runs",
            api_key=REAL_KEY,
            timeout_s=60,
            repeat=2,
            retry_policy=RetryPolicy(max_retries=0),
        )
        outcome = await execute_run(spec)
    finally:
        await server.stop()
    assert outcome.status == "completed", outcome.notices
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    verdicts = {(r["task_id"], r["attempt"]): r["outcome"] for r in rows}
    assert verdicts == {
        ("answer-42", 0): "pass",
        ("answer-42", 1): "pass",
        ("wrong", 0): "fail",
        ("wrong", 1): "fail",
    }
    assert all((r["prompt_tokens"], r["completion_tokens"]) == (11, 3) for r in rows)
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert sorted((c["task_id"], c["attempt"]) for c in calls) == sorted(verdicts)
    assert all(c["path"].endswith("/messages") and c["status"] == 200 for c in calls)
    assert server.keys and all(key == (REAL_KEY, "") for key in server.keys)
    env = json.loads((tmp_path / "env-seen.json").read_text())
    assert all(REAL_KEY not in value for value in env.values())
    assert env["ANTHROPIC_API_KEY"].startswith("dd-run-")
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            assert REAL_KEY.encode() not in path.read_bytes(), path
