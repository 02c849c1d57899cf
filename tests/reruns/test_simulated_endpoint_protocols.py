"""The sandbox speaks Chat Completions, Responses and Messages (streamed and not, with tool
calls), plays coding tasks through whatever shell tool the request offers, and injects faults
on all three protocols."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from coding_helpers import write_coding_suite

from driftdesk.reruns.simulated_endpoint import (
    SIM_HEADER,
    SIM_MODEL,
    UNKNOWN_TASK_ANSWER,
    FaultRates,
    SandboxServer,
)

FIX_ADD = "In calc.py, add() subtracts. Make it add."
# The shell tools as the real clients declare them (names and argument shapes seen in their
# requests): Claude Code's Bash takes a command string, Codex's exec_command a ``cmd`` string,
# older shells an argv array.
BASH = {
    "name": "Bash",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
    },
}
EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
ARGV_SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "array", "items": {"type": "string"}}},
        },
    },
}


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[SandboxServer]:
    with SandboxServer(seed=3, suites=[write_coding_suite(tmp_path)]) as server:
        yield server


def _sse_events(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            events.append(json.loads(line[6:]))
    return events


async def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        return response.status, dict(response.headers), await response.read()


async def test_messages_plays_a_coding_task_through_claude_codes_bash(
    sandbox: SandboxServer,
) -> None:
    url = f"{sandbox.root_url}/v1/messages"
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "<context>"}, {"type": "text", "text": FIX_ADD}],
        }
    ]
    commands = []
    for turn in range(5):
        body = {"model": SIM_MODEL, "messages": messages, "tools": [BASH], "stream": turn % 2 == 0}
        status, headers, raw = await _post(url, body)
        assert status == 200 and headers[SIM_HEADER] == "true"
        if body["stream"]:
            events = _sse_events(raw)
            assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
            blocks = [e["content_block"] for e in events if e["type"] == "content_block_start"]
            for block in blocks:
                if block["type"] == "tool_use":
                    block["input"] = json.loads(
                        "".join(
                            e["delta"]["partial_json"]
                            for e in events
                            if e["type"] == "content_block_delta"
                            and e["delta"]["type"] == "input_json_delta"
                        )
                    )
                else:
                    block["text"] = "".join(
                        e["delta"].get("text", "")
                        for e in events
                        if e["type"] == "content_block_delta"
                    )
            stop = next(e for e in events if e["type"] == "message_delta")["delta"]["stop_reason"]
        else:
            message = json.loads(raw)
            assert message["model"] == SIM_MODEL and message["usage"]["input_tokens"] > 0
            blocks, stop = message["content"], message["stop_reason"]
        uses = [b for b in blocks if b["type"] == "tool_use"]
        if not uses:
            assert stop == "end_turn"
            assert blocks[0]["text"] == "add() now adds."
            break
        assert stop == "tool_use" and uses[0]["name"] == "Bash"
        commands.append(uses[0]["input"]["command"])
        messages.append({"role": "assistant", "content": blocks})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "ok"}],
            }
        )
    assert commands == [
        "sed -i 's/a - b/a + b/' calc.py",
        "env > client-env.txt",
        "python3 -c 'import calc; print(calc.add(2, 3))'",
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_responses_plays_a_coding_task_through_codexs_exec_command(
    sandbox: SandboxServer, stream: bool
) -> None:
    client = openai.AsyncOpenAI(base_url=sandbox.base_url, api_key="x", max_retries=0)
    items: list[Any] = [{"role": "user", "content": [{"type": "input_text", "text": FIX_ADD}]}]
    commands = []
    async with client:
        for _ in range(5):
            if stream:
                async with client.responses.stream(
                    model=SIM_MODEL,
                    input=items,
                    tools=[EXEC_COMMAND],  # type: ignore[list-item]
                ) as events:
                    response = await events.get_final_response()
            else:
                response = await client.responses.create(
                    model=SIM_MODEL,
                    input=items,
                    tools=[EXEC_COMMAND],  # type: ignore[list-item]
                )
            assert response.model == SIM_MODEL and response.usage and response.usage.input_tokens
            calls = [o for o in response.output if o.type == "function_call"]
            if not calls:
                assert response.output_text == "add() now adds."
                break
            call = calls[0]
            assert call.name == "exec_command"
            commands.append(json.loads(call.arguments)["cmd"])
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": "ok"})
    assert len(commands) == 3 and commands[0].startswith("sed -i")


async def test_chat_plays_through_an_argv_shell_and_unknown_prompts_get_a_labelled_answer(
    sandbox: SandboxServer,
) -> None:
    async with openai.AsyncOpenAI(base_url=sandbox.base_url, api_key="x", max_retries=0) as client:
        completion = await client.chat.completions.create(
            model=SIM_MODEL,
            messages=[{"role": "user", "content": "Rename old.txt to new.txt."}],
            tools=[ARGV_SHELL],  # type: ignore[list-item]
        )
        [call] = completion.choices[0].message.tool_calls or []
        argv = json.loads(call.function.arguments)["command"]  # type: ignore[union-attr]
        assert argv[:2] == ["bash", "-lc"] and argv[2] in (
            "mv old.txt new.txt",
            "cp old.txt copy.txt",
        )
        unknown = await client.chat.completions.create(
            model=SIM_MODEL, messages=[{"role": "user", "content": "Who are you?"}]
        )
    assert unknown.choices[0].message.content == UNKNOWN_TASK_ANSWER
    assert "simulated" in UNKNOWN_TASK_ANSWER


async def test_skill_splits_conversations_and_each_stays_on_its_path(tmp_path: Path) -> None:
    """50 conversations of the coin-flip task: both paths occur, and a conversation that began
    on one path ends on it (the choice rides in the tool-call ids)."""
    suite = write_coding_suite(tmp_path)
    firsts = []
    with SandboxServer(seed=5, suites=[suite]) as server:
        url = f"{server.root_url}/v1/messages"
        for _ in range(50):
            messages: list[dict[str, Any]] = [
                {"role": "user", "content": "Rename old.txt to new.txt."}
            ]
            script = []
            for _turn in range(4):
                _, _, raw = await _post(
                    url, {"model": SIM_MODEL, "messages": messages, "tools": [BASH]}
                )
                blocks = json.loads(raw)["content"]
                uses = [b for b in blocks if b["type"] == "tool_use"]
                if not uses:
                    break
                script.append(uses[0]["input"]["command"])
                messages += [
                    {"role": "assistant", "content": blocks},
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": uses[0]["id"], "content": ""}
                        ],
                    },
                ]
            assert script in (["mv old.txt new.txt", "ls"], ["cp old.txt copy.txt"])
            firsts.append(script[0])
    assert 10 < firsts.count("mv old.txt new.txt") < 40


@pytest.mark.parametrize(
    ("faults", "status"),
    [
        (FaultRates(rate_limit=1.0), 429),
        (FaultRates(server_error=1.0), 500),
        (FaultRates(auth_error=1.0), 401),
    ],
    ids=["429", "500", "401"],
)
async def test_faults_on_responses_and_messages(
    tmp_path: Path, faults: FaultRates, status: int
) -> None:
    with SandboxServer(faults=faults, retry_after_s=2.0) as server:
        got_messages = await _post(
            f"{server.root_url}/v1/messages",
            {"model": SIM_MODEL, "messages": [{"role": "user", "content": "hi"}]},
        )
        got_responses = await _post(
            f"{server.base_url}/responses", {"model": SIM_MODEL, "input": "hi"}
        )
    for got_status, headers, _raw in (got_messages, got_responses):
        assert got_status == status and headers[SIM_HEADER] == "true"
        if status == 429:
            assert headers["Retry-After"] == "2"
    anthropic_error = json.loads(got_messages[2])
    assert anthropic_error["type"] == "error" and "simulated" in anthropic_error["error"]["message"]
    assert "simulated" in json.loads(got_responses[2])["error"]["message"]


async def test_truncated_streams_end_without_their_end_event(tmp_path: Path) -> None:
    with SandboxServer(faults=FaultRates(truncate=1.0)) as server:
        async with aiohttp.ClientSession() as session:
            for url, body, start, end in (
                (
                    f"{server.root_url}/v1/messages",
                    {"messages": [{"role": "user", "content": "hi"}]},
                    b"message_start",
                    b"message_stop",
                ),
                (
                    f"{server.base_url}/responses",
                    {"input": "hi"},
                    b"response.created",
                    b"response.completed",
                ),
            ):
                received = b""
                async with session.post(
                    url, json={**body, "model": SIM_MODEL, "stream": True}
                ) as response:
                    with pytest.raises(aiohttp.ClientPayloadError):
                        # Chunk by chunk: what came before the cut is kept for the checks.
                        async for chunk in response.content.iter_any():
                            received += chunk
                assert start in received  # the stream began...
                assert end not in received  # ...and was cut before its end event


def test_sandbox_cli_plays_a_given_suite_on_all_three_protocols(tmp_path: Path, cli) -> None:
    import signal
    import subprocess
    import sys
    import urllib.request

    suite = write_coding_suite(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "sandbox", "--suite", str(suite)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        root = base_url.removesuffix("/v1")
        body = {
            "model": SIM_MODEL,
            "messages": [{"role": "user", "content": FIX_ADD}],
            "tools": [BASH],
        }
        request = urllib.request.Request(
            f"{root}/v1/messages",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            [use] = [b for b in json.load(response)["content"] if b["type"] == "tool_use"]
        assert use["input"]["command"] == "sed -i 's/a - b/a + b/' calc.py"
        for path in ("/chat/completions", "/responses"):
            plain = {
                "model": SIM_MODEL,
                "messages": [{"role": "user", "content": "hi"}],
                "input": "hi",
            }
            request = urllib.request.Request(
                base_url + path,
                data=json.dumps(plain).encode(),
                headers={"content-type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert UNKNOWN_TASK_ANSWER in response.read().decode()
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=10)
    assert "SIMULATED" in err and str(suite) in err and "/v1/messages" in err
    bad = cli("sandbox", "--suite", str(tmp_path / "missing.jsonl"))
    assert bad.returncode == 2 and "no suite" in bad.stderr
