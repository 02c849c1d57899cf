"""Call recordings (``<attempt>.calls.jsonl.gz``): what each provider call said, written by the
metering proxy's recorder.

Real HTTP over loopback throughout: the real ``MeteringProxy`` in front of the real sandbox
endpoint (all three protocols, streamed and not, with tool calls) driven by the real openai and
anthropic SDKs, or in front of a small aiohttp upstream written here when exact bytes matter.
Whole runs and the CLI: test_call_recording_runs.py.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import stat
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web
from recording_helpers import full_item_lists, joined_to_calls, read_records, recording_of
from reruns_helpers import LoopbackServer

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns import rundir
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.recording import CallRecorder
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.reruns.suites import load_suite
from driftdesk.rundir import RECORDING_SUFFIX
from driftdesk.secrets import mask_key

# A key with a "/" and "-"s: the shapes an upstream may echo it in differ from the plain one.
KEY = "sk-live/REAL-rec-0123456789abcdefXYZ"
TASK = "invoice-7_2"  # the sandbox answers it with two get_price tool calls, then a number
PROMPT = load_suite("basic").task(TASK).prompt_text
PRICE_SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(seed=3) as server:
        yield server


def member_sizes(data: bytes) -> list[int]:
    """The compressed size of each gzip member (one per record)."""
    sizes = []
    while data:
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        inflate.decompress(data)
        sizes.append(len(data) - len(inflate.unused_data))
        data = inflate.unused_data
    return sizes


async def _proxy(upstream: str, protocol: str, run_dir: Path, **recorder: Any) -> MeteringProxy:
    run_dir.mkdir(parents=True, exist_ok=True)
    proxy = MeteringProxy(
        run_id="rec",
        upstream_base_url=upstream,
        protocol=protocol,
        real_key=KEY,
        calls_file=JsonlAppender(run_dir / rundir.CALLS),
        call_counts=rundir.count_calls(run_dir),  # a later proxy on the run dir counts on
        recorder=CallRecorder(run_dir, KEY, **recorder),
    )
    await proxy.start()
    return proxy


# --- the three protocols through the sandbox ------------------------------------------------


def _answer(text: str, calls: list[tuple[Any, Any, Any]]) -> tuple[str, list[Any]]:
    return text, [(i, n, json.loads(a) if isinstance(a, str) else a) for i, n, a in calls]


def _recorded(record: dict[str, Any]) -> tuple[str, list[Any]]:
    response = record["response"]
    calls = [(c["id"], c["name"], c["arguments"]) for c in response["tool_calls"]]
    return _answer(response["text"], calls)


async def _chat(base_url: str, key: str, stream: bool) -> tuple[list[Any], list[Any], list[Any]]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_price",
                "description": "Unit price",
                "parameters": PRICE_SCHEMA,
            },
        }
    ]
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    sent, seen = [], []
    for _ in range(2):
        sent.append(list(messages))
        args: dict[str, Any] = {"model": SIM_MODEL, "messages": messages, "tools": tools}
        if stream:
            args["stream_options"] = {"include_usage": True}
            async with client.chat.completions.stream(**args) as events:
                completion = await events.get_final_completion()
        else:
            completion = await client.chat.completions.create(**args)
        message = completion.choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        seen.append(_answer(message.content or "", calls))
        messages = [
            *messages,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ],
            },
            *({"role": "tool", "tool_call_id": i, "content": "3.75"} for i, _, _ in calls),
        ]
    await client.close()
    return sent, seen, tools


async def _responses(
    base_url: str, key: str, stream: bool
) -> tuple[list[Any], list[Any], list[Any]]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
    tools = [{"type": "function", "name": "get_price", "parameters": PRICE_SCHEMA, "strict": False}]
    items: list[Any] = []
    sent, seen = [], []
    for turn in range(2):
        # The first call's input is a plain string: it is recorded as one user item.
        given: Any = PROMPT if turn == 0 else items
        sent.append([{"role": "user", "content": PROMPT}] if turn == 0 else list(items))
        args = {"model": SIM_MODEL, "input": given, "instructions": "Be terse.", "tools": tools}
        if stream:
            async with client.responses.stream(**args) as events:
                response = await events.get_final_response()
        else:
            response = await client.responses.create(**args)
        calls = [
            (o.call_id, o.name, o.arguments) for o in response.output if o.type == "function_call"
        ]
        seen.append(_answer(response.output_text, calls))
        items = [
            {"role": "user", "content": PROMPT},
            *(
                {"type": "function_call", "call_id": i, "name": n, "arguments": a}
                for i, n, a in calls
            ),
            *(
                {"type": "function_call_output", "call_id": i, "output": "3.75"}
                for i, _, _ in calls
            ),
        ]
    await client.close()
    return sent, seen, tools


async def _messages(
    base_url: str, key: str, stream: bool
) -> tuple[list[Any], list[Any], list[Any]]:
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key=key, max_retries=0)
    tools = [{"name": "get_price", "description": "Unit price", "input_schema": PRICE_SCHEMA}]
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    sent, seen = [], []
    for _ in range(2):
        sent.append(list(messages))
        args = {
            "model": SIM_MODEL,
            "max_tokens": 256,
            "system": "Be terse.",
            "tools": tools,
            "messages": messages,
        }
        if stream:
            async with client.messages.stream(**args) as events:
                message = await events.get_final_message()
        else:
            message = await client.messages.create(**args)
        blocks = [b.model_dump() for b in message.content]
        calls = [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        seen.append(_answer(text, calls))
        uses = [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        results = [
            {"type": "tool_result", "tool_use_id": i, "content": "3.75"} for i, _, _ in calls
        ]
        messages = [
            *messages,
            {"role": "assistant", "content": uses},
            {"role": "user", "content": results},
        ]
    await client.close()
    return sent, seen, tools


CLIENTS = {"chat": _chat, "responses": _responses, "messages": _messages}
STOPS = {
    "chat": ("tool_calls", "stop"),
    "responses": ("completed", "completed"),
    "messages": ("tool_use", "end_turn"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
async def test_each_protocol_is_recorded_with_its_tool_calls_and_text(
    sandbox: SandboxServer, tmp_path: Path, protocol: str, stream: bool
) -> None:
    anthropic_side = protocol == "messages"
    upstream = sandbox.root_url if anthropic_side else sandbox.base_url
    proxy = await _proxy(upstream, "anthropic" if anthropic_side else "openai", tmp_path)
    token = proxy.open_attempt(TASK, 0)
    try:
        sent, seen, tools = await CLIENTS[protocol](
            proxy.base_url_for(token), proxy.run_key, stream
        )
        await proxy.settle(token)
    finally:
        proxy.close_attempt(token)
        await proxy.stop()
    records, torn = read_records(recording_of(tmp_path, TASK, 0))
    assert not torn and len(records) == 2
    joined_to_calls(tmp_path, records, TASK, 0)
    assert {r["protocol"] for r in records} == {protocol}
    # What the SDKs made of the answers is what was recorded: two tool calls, then a text.
    assert [_recorded(r) for r in records] == seen
    assert len(seen[0][1]) == 2 and seen[0][1][0][1] == "get_price" and seen[1][0]
    assert [r["response"]["stop_reason"] for r in records] == list(STOPS[protocol])
    assert all(r["response"]["usage"] for r in records)
    # The conversations as sent, rebuilt from the second record's base plus its new items.
    assert full_item_lists(records) == sent
    assert [r["request"]["base"] for r in records] == [0, 1]
    first, second = records[0]["request"], records[1]["request"]
    assert first["tools"] == tools and second["tools_same"] is True and "tools" not in second
    assert first["system"] == (None if protocol == "chat" else "Be terse.")
    assert second["system_same"] is True and "system" not in second
    assert first["params"]["model"] == SIM_MODEL and "messages" not in first["params"]
    assert (first["params"].get("stream") is True) is stream
    assert not any(r["truncated"] or r["error"] for r in records)


# --- prefix sharing ---------------------------------------------------------------------------


async def test_a_long_conversation_stores_each_earlier_item_once(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    proxy = await _proxy(sandbox.base_url, "openai", tmp_path)
    token = proxy.open_attempt("chatty", 0)
    path = recording_of(tmp_path, "chatty", 0)
    url = proxy.base_url_for(token) + "/chat/completions"
    headers = {"Authorization": f"Bearer {proxy.run_key}"}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a test."}]
    sent, sizes = [], []
    async with aiohttp.ClientSession() as session:
        for turn in range(10):
            # Incompressible user turns of one length: each record's new bytes are alike.
            noise = hashlib.sha256(str(turn).encode()).hexdigest() * 8
            messages.append({"role": "user", "content": f"turn {turn}: {noise}"})
            sent.append(list(messages))
            body = {"model": SIM_MODEL, "messages": messages}
            async with session.post(url, json=body, headers=headers) as response:
                answer = await response.json()
            messages.append(answer["choices"][0]["message"])
            sizes.append(path.stat().st_size)
    proxy.close_attempt(token)
    await proxy.stop()
    records, torn = read_records(path)
    assert not torn and len(records) == 10
    assert full_item_lists(records) == sent
    # The first call sends the system prompt and a user turn; each later one adds the answer
    # it got and one more user turn, and shares everything before them.
    assert [len(r["request"]["items"]) for r in records] == [2] + [2] * 9
    assert [r["request"]["base"] for r in records] == [0] + [len(s) - 2 for s in sent[1:]]
    growth = [after - before for before, after in itertools.pairwise(sizes)]
    assert max(growth) < 1.3 * min(growth), growth  # linear: no record repeats its past
    assert sizes[-1] < 2 * len(json.dumps({"messages": sent[-1]}))


# --- the key, in any escaping the upstream picks -----------------------------------------------


def _unicode_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


# The key as an upstream may put it in a JSON string: plain, with "\/", and fully \\u-escaped.
SHAPES = [KEY, KEY.replace("/", "\\/"), _unicode_escaped(KEY)]


class EchoingUpstream(LoopbackServer):
    """Answers with the key in every JSON escaping, written one byte per write; its 401 body
    echoes the key fully \\u-escaped (which the proxy's byte scrub of the body cannot see)."""

    url_suffix = "/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.chat)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body.get("model") == "refused":
            raw = '{"error": {"message": "bad key ' + SHAPES[2] + '", "code": "invalid_api_key"}}'
            return web.Response(status=401, body=raw.encode(), content_type="application/json")
        text = " | ".join(SHAPES)
        arguments = '{\\"token\\": \\"' + SHAPES[2].replace("\\", "\\\\") + '\\"}'
        call = '{"id": "call_1", "type": "function", "function": {"name": "leak", '
        call += '"arguments": "' + arguments + '"}}'
        if not body.get("stream"):
            raw = (
                '{"id": "c1", "object": "chat.completion", "model": "m", "choices": [{"index": 0, '
                '"message": {"role": "assistant", "content": "'
                + text
                + '", "tool_calls": ['
                + call
                + ']}, "finish_reason": "stop"}]}'
            )
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
        else:
            chunk = '{"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": '
            raw = (
                f'data: {chunk}[{{"index": 0, "delta": {{"content": "{text}"}}}}]}}\n\n'
                f'data: {chunk}[{{"index": 0, "delta": {{"tool_calls": [{{"index": 0, '
                + call[1:]
                + ']}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
            )
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for byte in raw.encode():
            await response.write(bytes([byte]))
        await response.write_eof()
        return response


@pytest.fixture
async def echoing() -> AsyncIterator[EchoingUpstream]:
    server = EchoingUpstream()
    await server.start()
    yield server
    await server.stop()


def _assert_no_key(data: bytes) -> None:
    lowered = data.lower()
    for shape in (*SHAPES, KEY.replace("/", "%2F"), _unicode_escaped(KEY).upper()):
        assert shape.lower().encode() not in lowered, shape
    assert b"\\\\u0073\\\\u006b" not in lowered  # nor doubly escaped, inside the arguments


async def test_the_key_never_reaches_a_recording_in_any_escaping(
    echoing: EchoingUpstream, tmp_path: Path
) -> None:
    proxy = await _proxy(echoing.url, "openai", tmp_path)
    token = proxy.open_attempt("leaky", 0)
    url = proxy.base_url_for(token) + "/chat/completions"
    headers = {"Authorization": f"Bearer {proxy.run_key}", "Content-Type": "application/json"}
    statuses = []
    async with aiohttp.ClientSession() as session:
        for model, stream in (("m", False), ("m", True), ("refused", False)):
            # The agent, too, sends the key escaped (a tool result that printed it).
            raw = (
                '{"model": "' + model + '", "stream": ' + json.dumps(stream) + ', "messages": '
                '[{"role": "user", "content": "env: ' + SHAPES[2] + '"}]}'
            )
            async with session.post(url, data=raw.encode(), headers=headers) as response:
                await response.read()
                statuses.append(response.status)
    proxy.close_attempt(token)
    await proxy.stop()
    assert statuses == [200, 200, 401]
    path = recording_of(tmp_path, "leaky", 0)
    _assert_no_key(gzip.decompress(path.read_bytes()))
    records, _ = read_records(path)
    masked = mask_key(KEY)  # where the key was is still visible as such
    for record in records[:2]:
        assert record["response"]["text"].count(masked) == 3
        assert masked in record["response"]["tool_calls"][0]["arguments"]
    # The three calls sent the same message: stored once, masked.
    assert full_item_lists(records) == [[{"role": "user", "content": f"env: {masked}"}]] * 3
    assert records[2]["response"] is None and masked in records[2]["error"]


# --- error bodies -----------------------------------------------------------------------------


class FailingUpstream(LoopbackServer):
    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/messages/count_tokens", self.count_tokens)

    async def count_tokens(self, request: web.Request) -> web.Response:
        return web.json_response({"input_tokens": 3})

    async def messages(self, request: web.Request) -> web.Response:
        model = (await request.json()).get("model")
        if model == "m":
            content = [{"type": "text", "text": "ok"}]
            answer = {
                "type": "message",
                "model": "m",
                "content": content,
                "stop_reason": "end_turn",
            }
            return web.json_response(answer)
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "x" * 5000}}
        if model == "busy":
            body["error"]["message"] = "Overloaded"
            return web.json_response(body, status=529)
        return web.json_response(body, status=500)


async def test_error_bodies_are_recorded_without_an_answer_and_unread_paths_by_size(
    tmp_path: Path,
) -> None:
    upstream = FailingUpstream()
    await upstream.start()
    proxy = await _proxy(upstream.url, "anthropic", tmp_path)
    token = proxy.open_attempt("failing", 1)
    base = proxy.base_url_for(token) + "/v1/messages"
    sent = []
    try:
        async with aiohttp.ClientSession(headers={"x-api-key": proxy.run_key}) as session:
            for model, path in (("busy", ""), ("long", ""), ("m", "/count_tokens"), ("m", "")):
                body = {
                    "model": model,
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "hi"}],
                }
                sent.append(len(json.dumps(body)))
                async with session.post(base + path, json=body) as response:
                    assert response.status == {"busy": 529, "long": 500}.get(model, 200)
    finally:
        proxy.close_attempt(token)
        await proxy.stop()
        await upstream.stop()
    records, torn = read_records(recording_of(tmp_path, "failing", 1))
    assert not torn and [r["response"] for r in records[:3]] == [None, None, None]
    assert json.loads(records[0]["error"])["error"]["message"] == "Overloaded"
    assert records[1]["error"].startswith('{"type": "error"') and len(records[1]["error"]) == 2048
    assert [r["request"]["base"] for r in records[:2]] == [0, 1]
    # count_tokens is a path no conversation is read from: only its size is kept, and the
    # next call shares nothing with what came before it.
    assert records[2]["protocol"] is None and records[2]["request"] == {
        "raw_request_bytes": sent[2]
    }
    assert records[3]["request"]["base"] == 0 and records[3]["request"]["system"] is None
    assert records[3]["response"]["text"] == "ok" and records[3]["error"] is None
    joined_to_calls(tmp_path, records, "failing", 1)


# --- the cap ----------------------------------------------------------------------------------


async def test_past_the_cap_records_keep_their_figures_without_the_text(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    cap = 6 * 1024
    proxy = await _proxy(sandbox.base_url, "openai", tmp_path, max_bytes=cap)
    token = proxy.open_attempt("big", 0)
    url = proxy.base_url_for(token) + "/chat/completions"
    headers = {"Authorization": f"Bearer {proxy.run_key}"}
    async with aiohttp.ClientSession() as session:
        for turn in range(8):
            noise = os.urandom(1500).hex()  # 3000 characters, at least 1500 bytes compressed
            body = {
                "model": SIM_MODEL,
                "messages": [{"role": "user", "content": noise}],
                "seed": turn,
            }
            async with session.post(url, json=body, headers=headers) as response:
                assert response.status == 200
    proxy.close_attempt(token)
    await proxy.stop()
    path = recording_of(tmp_path, "big", 0)
    records, torn = read_records(path)
    assert not torn and len(records) == 8
    flags = [r["truncated"] for r in records]
    assert flags[0] is False and flags[-1] is True
    assert flags == sorted(flags)  # once capped, every later record is too
    sizes = member_sizes(path.read_bytes())
    kept = sum(size for size, capped in zip(sizes, flags, strict=True) if not capped)
    # Whole records up to the cap; the next one (of their size) would not have fit.
    assert kept <= cap < kept + min(sizes[: flags.index(True)])
    for record in records:
        if record["truncated"]:
            assert "items" not in record["request"] and "text" not in record["response"]
            assert record["request"]["params"]["seed"] == record["call_index"]
            assert record["response"]["usage"]["total_tokens"] > 0
            assert record["response"]["stop_reason"] == "stop"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    joined_to_calls(tmp_path, records, "big", 0)


# --- a torn tail ------------------------------------------------------------------------------


async def test_a_torn_last_record_leaves_the_others_readable_and_is_cut_before_appending(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    async def calls(count: int) -> None:
        proxy = await _proxy(sandbox.base_url, "openai", tmp_path)
        token = proxy.open_attempt(TASK, 0)
        url = proxy.base_url_for(token) + "/chat/completions"
        body = {"model": SIM_MODEL, "messages": [{"role": "user", "content": PROMPT}]}
        async with aiohttp.ClientSession() as session:
            for _ in range(count):
                async with session.post(
                    url, json=body, headers={"Authorization": f"Bearer {proxy.run_key}"}
                ) as response:
                    assert response.status == 200
        proxy.close_attempt(token)
        await proxy.stop()

    await calls(3)
    path = recording_of(tmp_path, TASK, 0)
    whole = path.read_bytes()
    with open(path, "r+b") as fh:  # a writer killed in the middle of its third record
        fh.truncate(len(whole) - 25)
    records, torn = read_records(path)
    assert torn and [r["call_index"] for r in records] == [0, 1]
    await calls(1)  # a later process (a resume) appends to the same file
    records, torn = read_records(path)
    assert not torn and [r["call_index"] for r in records] == [0, 1, 3]


# --- deferred calls (inspect: one token, calls attributed later) --------------------------------


async def test_deferred_calls_are_recorded_in_the_slot_they_are_attributed_to(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    proxy = await _proxy(sandbox.base_url, "openai", tmp_path)
    token = proxy.open_attempt("", -1, deferred=True)
    url = proxy.base_url_for(token) + "/chat/completions"
    async with aiohttp.ClientSession() as session:
        for word in ("first", "second", "third"):
            body = {"model": SIM_MODEL, "messages": [{"role": "user", "content": word}]}
            async with session.post(
                url, json=body, headers={"Authorization": f"Bearer {proxy.run_key}"}
            ) as response:
                assert response.status == 200
    await proxy.settle(token)
    assert not list(tmp_path.glob("attempts/*/*" + RECORDING_SUFFIX))  # nothing before
    first, second, third = proxy.attempt_calls(token).calls
    proxy.attribute(second, "t", 1)
    proxy.attribute(first, "t", 1)
    proxy.attribute(third, None, None)  # never named by a sample: no slot, no recording
    proxy.close_attempt(token)
    await proxy.stop()
    records, torn = read_records(recording_of(tmp_path, "t", 1))
    assert not torn
    assert [r["request"]["items"][0]["content"] for r in records] == ["second", "first"]
    assert [r["request"]["base"] for r in records] == [0, 0]
    assert not any(r["truncated"] for r in records)
    joined_to_calls(tmp_path, records, "t", 1)
    assert len(list(tmp_path.glob("attempts/*/*" + RECORDING_SUFFIX))) == 1


async def test_deferred_calls_wait_in_bounded_memory(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    # A 4 KiB cap lets 16 KiB of held calls wait with their content: a 30 KB request waits
    # without it (and is recorded truncated), though it would compress to far less than 4 KiB.
    proxy = await _proxy(sandbox.base_url, "openai", tmp_path, max_bytes=4096)
    token = proxy.open_attempt("", -1, deferred=True)
    url = proxy.base_url_for(token) + "/chat/completions"
    async with aiohttp.ClientSession() as session:
        for text in ("small", "large " * 5000):
            body = {"model": SIM_MODEL, "messages": [{"role": "user", "content": text}]}
            async with session.post(
                url, json=body, headers={"Authorization": f"Bearer {proxy.run_key}"}
            ) as response:
                assert response.status == 200
    await proxy.settle(token)
    for call in list(proxy.attempt_calls(token).calls):
        proxy.attribute(call, "t", 0)
    proxy.close_attempt(token)
    await proxy.stop()
    path = recording_of(tmp_path, "t", 0)
    records, torn = read_records(path)
    assert not torn and [r["truncated"] for r in records] == [False, True]
    assert records[0]["request"]["items"] == [{"role": "user", "content": "small"}]
    assert "items" not in records[1]["request"]
    assert records[1]["request"]["params"] == {"model": SIM_MODEL}
    assert path.stat().st_size < 4096


# --- tries -------------------------------------------------------------------------------------


async def test_every_call_says_its_try_and_a_resume_numbers_after_the_tries_begun(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    """Each token the proxy opens for a slot is its next try: rows and records say it, the
    second try's conversation starts afresh (base 0), and a later proxy on the run dir (a
    resume) numbers the slot's next try after the ones in calls.jsonl."""
    from driftdesk.reruns.recording import RECORD_VERSION, tries_begun

    async def one_try(proxy: MeteringProxy, turns: int) -> None:
        token = proxy.open_attempt("chatty", 0)
        url = proxy.base_url_for(token) + "/chat/completions"
        headers = {"Authorization": f"Bearer {proxy.run_key}"}
        messages: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
        async with aiohttp.ClientSession() as session:
            for _ in range(turns):
                body = {"model": SIM_MODEL, "messages": messages}
                async with session.post(url, json=body, headers=headers) as response:
                    messages.append((await response.json())["choices"][0]["message"])
                messages.append({"role": "user", "content": "again"})
        proxy.close_attempt(token)

    proxy = await _proxy(sandbox.base_url, "openai", tmp_path)
    await one_try(proxy, 2)
    await one_try(proxy, 3)
    await proxy.stop()
    assert tries_begun(tmp_path) == {("chatty", 0): 2}
    resumed = MeteringProxy(
        run_id="rec",
        upstream_base_url=sandbox.base_url,
        protocol="openai",
        real_key=KEY,
        calls_file=JsonlAppender(tmp_path / rundir.CALLS),
        call_counts=rundir.count_calls(tmp_path),
        tries=tries_begun(tmp_path),
        recorder=CallRecorder(tmp_path, KEY),
    )
    await resumed.start()
    await one_try(resumed, 1)
    await resumed.stop()
    rows = [json.loads(line) for line in (tmp_path / rundir.CALLS).read_text().splitlines()]
    assert [(r["call_index"], r["try"]) for r in rows] == [
        (0, 1), (1, 1), (2, 2), (3, 2), (4, 2), (5, 3)
    ]  # fmt: skip
    records, torn = read_records(recording_of(tmp_path, "chatty", 0))
    assert not torn
    assert RECORD_VERSION == 2 and {r["v"] for r in records} == {2}
    assert [(r["call_index"], r["try"]) for r in records] == [
        (r["call_index"], r["try"]) for r in rows
    ]
    # A new try shares nothing with the last one's conversation.
    assert [r["request"]["base"] for r in records] == [0, 1, 0, 1, 3, 0]
