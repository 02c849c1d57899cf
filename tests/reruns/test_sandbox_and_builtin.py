"""The builtin agent against the sandbox (OpenAI protocol) and an Anthropic-shaped endpoint."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web
from reruns_helpers import read_rows

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import (
    SIM_HEADER,
    SIM_MODEL,
    FaultRates,
    SandboxServer,
    task_skill,
)
from driftdesk.reruns.suites import load_suite
from driftdesk.rundir import attempt_folder

KEY = "sk-test-REALKEY-sandbox-0123456789"


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    server = SandboxServer(seed=11)
    server.start()
    yield server
    server.stop()


def sim_profile(url: str) -> Profile:
    return Profile(name="sim", protocol="openai", base_url=url, model=SIM_MODEL)


async def test_basic_suite_on_the_sandbox_drifts_per_task(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    suite = load_suite("basic")
    assert len(suite.tasks) >= 30
    outcome = await execute_run(
        RunSpec(
            profile=sim_profile(sandbox.base_url),
            suite="basic",
            repeat=4,
            concurrency=8,
            timeout_s=5,
            out_dir=tmp_path,
            api_key=KEY,
        )
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert len(rows) == len(suite.tasks) * 4
    assert {r["outcome"] for r in rows} == {"pass", "fail"}  # no faults asked for
    by_task: dict[str, list[bool]] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(row["success"])
    always_right = [t for t in by_task if task_skill(t) == 1.0]
    assert always_right
    for task_id in always_right:
        assert all(by_task[task_id]), task_id  # judged right every time
    assert any(len(set(r)) == 2 for r in by_task.values())  # some tasks are volatile
    # Tool tasks take two calls (tool call, then the answer) and keep their scenario id.
    invoice = [r for r in rows if r["task_id"] == "invoice-7_2"]
    assert all(r["calls"] == 2 and r["scenario_id"] == "invoice-7" for r in invoice)
    transcript = json.loads(
        (attempt_folder(outcome.run_dir, "invoice-7_2") / "0.transcript.json").read_text()
    )
    assert [m["role"] for m in transcript] == ["user", "assistant", "tool", "tool", "assistant"]
    assert all(r["total_tokens"] and r["total_tokens"] > 0 for r in rows)


@pytest.mark.parametrize(
    ("faults", "code", "retries"),
    [
        (FaultRates(rate_limit=1.0), "429", 1),
        (FaultRates(server_error=1.0), "500", 1),
        (FaultRates(auth_error=1.0), "401", 0),
        (FaultRates(timeout=1.0), "timeout", 1),
        (FaultRates(truncate=1.0), "truncated", 0),
        (FaultRates(empty=1.0), "empty_response", 0),
    ],
    ids=["429", "500", "401", "hang", "truncated", "empty"],
)
async def test_sandbox_faults_become_the_right_link_errors(
    tmp_path: Path, faults: FaultRates, code: str, retries: int
) -> None:
    with SandboxServer(seed=1, faults=faults, retry_after_s=0.01) as server:
        outcome = await execute_run(
            RunSpec(
                profile=sim_profile(server.base_url),
                suite="basic",
                tasks=["arith-01", "format-02"],
                repeat=1,
                # Only the hang needs a short timeout; elsewhere a slow, loaded machine must not
                # turn a fast fault into a timeout (and an extra retry).
                timeout_s=0.3 if code == "timeout" else 10.0,
                out_dir=tmp_path,
                api_key=KEY,
                retry_policy=RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02),
            )
        )
        requests = server.stats.requests
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [(r["outcome"], r["error_code"], r["retries"]) for r in rows] == [
        ("link_error", code, retries)
    ] * 2
    assert requests == 2 * (1 + retries)


async def test_sandbox_non_streaming_tool_calls_and_models(sandbox: SandboxServer) -> None:
    task = load_suite("basic").task("lookup-02")
    async with openai.AsyncOpenAI(base_url=sandbox.base_url, api_key="x", max_retries=0) as client:
        models = await client.models.list()
        assert [m.id for m in models.data] == [SIM_MODEL]
        raw = await client.chat.completions.with_raw_response.create(
            model=SIM_MODEL, messages=[{"role": "user", "content": task.prompt_text}]
        )
        assert raw.headers[SIM_HEADER] == "true"
        completion = raw.parse()
    calls = completion.choices[0].message.tool_calls or []
    assert completion.choices[0].finish_reason == "tool_calls"
    assert {json.loads(c.function.arguments)["city"] for c in calls} == {"lisbon", "porto"}  # type: ignore[union-attr]


class AnthropicEndpoint:
    """Messages API, non-streamed: a tool_use turn, then the answer built from the tool result."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.keys.append(request.headers.get("x-api-key", ""))
        body = await request.json()
        self.bodies.append(body)
        usage = {"input_tokens": 20, "output_tokens": 4}
        last = body["messages"][-1]
        if body.get("tools") and isinstance(last["content"], str):
            content: list[dict[str, Any]] = [
                {"type": "tool_use", "id": "tu_1", "name": "get_stock", "input": {"sku": "A-100"}},
                {"type": "tool_use", "id": "tu_2", "name": "get_stock", "input": {"sku": "B-200"}},
            ]
        elif isinstance(last["content"], list):
            total = sum(int(block["content"]) for block in last["content"])
            content = [{"type": "text", "text": str(total)}]
        else:
            content = [{"type": "text", "text": "42"}]
        return web.json_response({"type": "message", "content": content, "usage": usage})


@pytest.fixture
async def anthropic_endpoint() -> AsyncIterator[AnthropicEndpoint]:
    endpoint = AnthropicEndpoint()
    app = web.Application()
    app.router.add_post("/v1/messages", endpoint.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    endpoint.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield endpoint
    await runner.cleanup()


async def test_builtin_agent_speaks_the_anthropic_messages_protocol(
    anthropic_endpoint: AnthropicEndpoint, tmp_path: Path
) -> None:
    outcome = await execute_run(
        RunSpec(
            profile=Profile(
                name="claude", protocol="anthropic", base_url=anthropic_endpoint.url, model="c-1"
            ),
            suite="basic",
            tasks=["lookup-05"],
            repeat=2,
            out_dir=tmp_path,
            api_key=KEY,
        )
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [(r["outcome"], r["calls"], r["total_tokens"]) for r in rows] == [("pass", 2, 48)] * 2
    assert set(anthropic_endpoint.keys) == {KEY}
    assert anthropic_endpoint.bodies[0]["tools"][0]["input_schema"]["required"] == ["sku"]
