"""The real key, streamed by an upstream three characters per SSE event, never reaches the
agent whole: not in answer text, tool-call arguments or reasoning, in any of the three
protocols (Chat Completions deltas, Responses events, Messages content_block deltas).

The upstream is a real aiohttp server on loopback that echoes the key it received (the real
one, put in by the proxy) in pieces; the agent side reads the proxy's bytes, decodes every
event and joins each field's pieces as a client does, and the real ``openai`` and
``anthropic`` SDKs read the same streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer, read_rows

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.secrets import mask_key

REAL = "sk-strm-7Qx2Lp9Vd4Rk8Wn3Jc6Hb1Tz5"
BEFORE = "Here is what I was sent: "
AFTER = " and that is all."
ARGS_BEFORE = '{"command": "echo '
ARGS_AFTER = '"}'
PIECE = 3


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)]


def _sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# (protocol, field): what the upstream streams the key in, and how an agent joins it.
CASES = [
    ("chat", "content"),
    ("chat", "reasoning_content"),
    ("chat", "reasoning"),
    ("chat", "refusal"),
    ("chat", "tool_arguments"),
    ("responses", "response.output_text"),
    ("responses", "response.function_call_arguments"),
    ("responses", "response.reasoning_summary_text"),
    ("responses", "response.reasoning_text"),
    ("responses", "response.custom_tool_call_input"),
    ("messages", "text"),
    ("messages", "partial_json"),
    ("messages", "thinking"),
]
_IS_ARGS = {"tool_arguments", "response.function_call_arguments", "partial_json"}


def _text_for(field: str, key: str) -> str:
    if field in _IS_ARGS:
        return ARGS_BEFORE + key + ARGS_AFTER
    return BEFORE + key + AFTER


def chat_events(field: str, text: str) -> list[bytes]:
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
            None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        )

    events = [chunk({"role": "assistant", "content": ""})]
    if field == "tool_arguments":
        call = {"index": 0, "id": "call_1", "type": "function"}
        events.append(
            chunk({"tool_calls": [{**call, "function": {"name": "sh", "arguments": ""}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
            for p in _pieces(text)
        ]
        events.append(chunk({}, "tool_calls"))
    else:
        events += [chunk({field: p}) for p in _pieces(text)]
        events.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    events.append(_sse(None, {**head, "choices": [], "usage": usage}))
    events.append(b"data: [DONE]\n\n")
    return events


def responses_events(field: str, text: str) -> list[bytes]:
    numbers = iter(range(10_000))

    def event(kind: str, **data: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(numbers), **data})

    response = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m",
                "status": "in_progress", "output": []}  # fmt: skip
    where: dict[str, Any] = {"item_id": "it_1", "output_index": 0}
    if field in ("response.output_text", "response.reasoning_text"):
        where["content_index"] = 0
    elif field == "response.reasoning_summary_text":
        where["summary_index"] = 0
    item_types = {
        "response.output_text": {"type": "message", "role": "assistant", "content": []},
        "response.function_call_arguments": {"type": "function_call", "call_id": "call_1",
                                              "name": "sh", "arguments": ""},
        "response.reasoning_summary_text": {"type": "reasoning", "summary": []},
        "response.reasoning_text": {"type": "reasoning", "summary": []},
        "response.custom_tool_call_input": {"type": "custom_tool_call", "call_id": "call_1",
                                             "name": "apply_patch", "input": ""},
    }  # fmt: skip
    item = {"id": "it_1", "status": "in_progress", **item_types[field]}
    events = [
        event("response.created", response=response),
        event("response.output_item.added", output_index=0, item=item),
    ]
    events += [event(field + ".delta", **where, delta=p) for p in _pieces(text)]
    done_field = {"response.function_call_arguments": "arguments",
                  "response.custom_tool_call_input": "input"}.get(field, "text")  # fmt: skip
    events.append(event(field + ".done", **where, **{done_field: text}))
    done = {**item, "status": "completed"}
    if field == "response.output_text":  # the whole text again, in one event
        done["content"] = [{"type": "output_text", "text": text, "annotations": []}]
    events.append(event("response.output_item.done", output_index=0, item=done))
    usage = {"input_tokens": 3, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 8}  # fmt: skip
    completed = {**response, "status": "completed", "output": [done], "usage": usage}
    events.append(event("response.completed", response=completed))
    return events


def messages_events(field: str, text: str) -> list[bytes]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
               "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 3, "output_tokens": 1}}  # fmt: skip
    blocks = {
        "text": ({"type": "text", "text": ""}, "text_delta"),
        "partial_json": ({"type": "tool_use", "id": "toolu_1", "name": "sh", "input": {}},
                         "input_json_delta"),
        "thinking": ({"type": "thinking", "thinking": "", "signature": ""}, "thinking_delta"),
    }  # fmt: skip
    block, delta_type = blocks[field]
    events = [
        _sse("message_start", {"type": "message_start", "message": message}),
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
    ]
    events += [
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": delta_type, field: p}},
        )
        for p in _pieces(text)
    ]
    if field == "thinking":
        signature = {"type": "signature_delta", "signature": "c2ln"}
        events.append(
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": signature},
            )
        )
    events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    stop = "tool_use" if field == "partial_json" else "end_turn"
    events.append(_sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop,
                       "stop_sequence": None}, "usage": {"output_tokens": 5}}))  # fmt: skip
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


BUILDERS = {"chat": chat_events, "responses": responses_events, "messages": messages_events}


class KeyStreamer(LoopbackServer):
    """Streams back the key it received (``Authorization: Bearer`` or ``x-api-key``) inside the
    field the request's ``echo`` names, three characters per event."""

    url_suffix = "/v1"

    def __init__(self) -> None:
        super().__init__()
        self.received: list[str] = []
        self.text_of = _text_for

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.handle("chat"))
        app.router.add_post("/v1/responses", self.handle("responses"))
        app.router.add_post("/v1/messages", self.handle("messages"))

    def handle(self, protocol: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            key = request.headers.get("x-api-key") or request.headers.get(
                "Authorization", ""
            ).removeprefix("Bearer ")
            self.received.append(key)
            field = (
                body.get("metadata", {}).get("echo")
                or {
                    "chat": "content",
                    "responses": "response.output_text",
                    "messages": "text",
                }[protocol]
            )
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for event in BUILDERS[protocol](field, self.text_of(field, key)):
                await response.write(event)
            await response.write_eof()
            return response

        return handler


@pytest.fixture
async def upstream() -> AsyncIterator[KeyStreamer]:
    server = KeyStreamer()
    await server.start()
    yield server
    await server.stop()


async def _proxy(
    upstream: KeyStreamer, tmp_path: Path, protocol: str, base: str = "/v1"
) -> MeteringProxy:
    proxy = MeteringProxy(
        run_id="r",
        upstream_base_url=upstream.url.removesuffix("/v1") + base,
        protocol=protocol,
        real_key=REAL,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
    )
    await proxy.start()
    return proxy


@pytest.fixture
async def openai_proxy(upstream: KeyStreamer, tmp_path: Path) -> AsyncIterator[MeteringProxy]:
    proxy = await _proxy(upstream, tmp_path, "openai")
    yield proxy
    await proxy.stop()


@pytest.fixture
async def anthropic_proxy(upstream: KeyStreamer, tmp_path: Path) -> AsyncIterator[MeteringProxy]:
    proxy = await _proxy(upstream, tmp_path, "anthropic", base="")  # the SDK adds /v1
    yield proxy
    await proxy.stop()


PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


async def _raw_stream(proxy: MeteringProxy, protocol: str, field: str) -> bytes:
    token = proxy.open_attempt("t", 0)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url_for(token) + PATHS[protocol],
            json={"model": "m", "stream": True, "metadata": {"echo": field}},
            headers={"Authorization": f"Bearer {proxy.run_key}"},
        ) as response,
    ):
        assert response.status == 200
        body = await response.read()
    await proxy.settle(token)
    return body


def _events(body: bytes) -> list[dict[str, Any]]:
    """Every event's data, decoded as a client would: SSE lines, then JSON (strictly)."""
    events = []
    for block in body.decode("utf-8").split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if data and data != ["[DONE]"]:
            events.append(json.loads("\n".join(data)))
    return events


def _joined(protocol: str, field: str, events: list[dict[str, Any]]) -> str:
    """The field's pieces joined, as the harness joins them."""
    out = []
    for event in events:
        if protocol == "chat":
            for choice in event.get("choices", []):
                delta = choice.get("delta", {})
                if field == "tool_arguments":
                    for call in delta.get("tool_calls") or []:
                        out.append(call.get("function", {}).get("arguments") or "")
                else:
                    out.append(delta.get(field) or "")
        elif protocol == "responses":
            if event["type"] == field + ".delta":
                out.append(event["delta"])
        elif event["type"] == "content_block_delta":
            out.append(event["delta"].get(field, ""))
    return "".join(out)


def _no_trace(text: str) -> None:
    assert REAL not in text
    # Nor any run of it past what the mask itself shows (its first three characters).
    for start in range(3, len(REAL) - 5):
        assert REAL[start : start + 6] not in text, (REAL[start : start + 6], text)


@pytest.mark.parametrize(("protocol", "field"), CASES)
async def test_a_key_streamed_three_characters_per_event_reaches_the_agent_masked(
    upstream: KeyStreamer, tmp_path: Path, protocol: str, field: str
) -> None:
    proxy = await _proxy(upstream, tmp_path, "anthropic" if protocol == "messages" else "openai")
    try:
        body = await _raw_stream(proxy, protocol, field)
    finally:
        await proxy.stop()
    assert upstream.received == [REAL]  # the upstream really had the key to echo
    events = _events(body)  # every event still parses
    joined = _joined(protocol, field, events)
    _no_trace(joined)
    _no_trace(json.dumps(events, ensure_ascii=False))
    assert joined == _text_for(field, mask_key(REAL))  # the rest intact, the key masked
    if field in _IS_ARGS:
        json.loads(joined)  # the arguments are still JSON
    row = read_rows(tmp_path / "calls.jsonl")[0]
    assert (row["status"], row["error_kind"], row["completion_tokens"]) == (200, None, 5)


async def test_the_openai_client_reads_a_chat_stream_with_the_key_masked(
    openai_proxy: MeteringProxy,
) -> None:
    token = openai_proxy.open_attempt("t", 0)
    client = openai.AsyncOpenAI(
        base_url=openai_proxy.base_url_for(token), api_key=openai_proxy.run_key, max_retries=0
    )
    text = ""
    async with client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
    _no_trace(text)
    assert text == BEFORE + mask_key(REAL) + AFTER


async def test_the_openai_client_reads_a_responses_stream_with_the_key_masked(
    openai_proxy: MeteringProxy,
) -> None:
    token = openai_proxy.open_attempt("t", 0)
    client = openai.AsyncOpenAI(
        base_url=openai_proxy.base_url_for(token), api_key=openai_proxy.run_key, max_retries=0
    )
    deltas, arguments = "", ""
    async with client:
        for field in ("response.output_text", "response.function_call_arguments"):
            stream = await client.responses.create(
                model="m", input="hi", stream=True, metadata={"echo": field}
            )
            async for event in stream:
                if event.type == "response.output_text.delta":
                    deltas += event.delta
                elif event.type == "response.function_call_arguments.delta":
                    arguments += event.delta
    _no_trace(deltas + arguments)
    assert deltas == BEFORE + mask_key(REAL) + AFTER
    assert json.loads(arguments) == {"command": "echo " + mask_key(REAL)}


async def test_the_anthropic_client_reads_a_messages_stream_with_the_key_masked(
    anthropic_proxy: MeteringProxy,
) -> None:
    token = anthropic_proxy.open_attempt("t", 0)
    client = anthropic.AsyncAnthropic(
        base_url=anthropic_proxy.base_url_for(token),
        api_key=anthropic_proxy.run_key,
        max_retries=0,
    )
    async with client:
        async with client.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            text = "".join([piece async for piece in stream.text_stream])
        async with client.messages.stream(
            model="m",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            metadata={"echo": "partial_json"},  # type: ignore[typeddict-unknown-key]
        ) as stream:
            message = await stream.get_final_message()
    _no_trace(text)
    assert text == BEFORE + mask_key(REAL) + AFTER
    tool_use = message.content[0]
    assert tool_use.type == "tool_use"
    assert tool_use.input == {"command": "echo " + mask_key(REAL)}


def _through_passthrough(events: list[bytes], key: str = REAL) -> list[dict[str, Any]]:
    """The events as the proxy's passthrough sends them on, one upstream chunk per event."""
    from driftdesk.reruns.key_scrub import KeyScrubber, Passthrough

    passthrough = Passthrough(KeyScrubber(key), sse=True, encoding="", limit=1 << 30)
    out = b"".join(passthrough.feed(event) for event in events) + passthrough.flush()
    return _events(out)


def _chat_text(text: str, size: int) -> str:
    """``text`` streamed ``size`` characters per event, as the agent joins it."""
    global PIECE
    saved, PIECE = PIECE, size
    try:
        events = chat_events("content", text)
    finally:
        PIECE = saved
    return _joined("chat", "content", _through_passthrough(events))


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 11, 40])
@pytest.mark.parametrize("lead", ["", "a", "ab", "Here: "])
def test_the_key_is_masked_however_the_stream_cuts_it(size: int, lead: str) -> None:
    assert _chat_text(lead + REAL + AFTER, size) == lead + mask_key(REAL) + AFTER


def test_a_start_of_the_key_that_goes_on_otherwise_is_released_whole() -> None:
    text = "keys look like sk-strm-7Qx2 but this one stops there."
    assert _chat_text(text, 3) == text
    assert _chat_text("sk-strm sk-strm-7Qx " + REAL, 2) == "sk-strm sk-strm-7Qx " + mask_key(REAL)


def test_the_key_in_another_letter_case_or_json_escaped_in_the_text_is_masked() -> None:
    for shape in (REAL.upper(), REAL.replace("-", "\\u002d"), REAL.replace("s", "\\u0073")):
        joined = _chat_text(BEFORE + shape + AFTER, 3)
        assert joined.startswith(BEFORE) and joined.endswith(AFTER), joined
        assert REAL.lower() not in joined.lower() and "Wn3Jc6" not in joined, joined


def test_a_start_of_the_key_left_incomplete_at_the_end_is_withheld() -> None:
    # All of the key but its last character, then the answer ends: released, it would hand the
    # agent all but one character of the key.
    joined = _chat_text(BEFORE + REAL[:-1], 3)
    shown = joined.removeprefix(BEFORE)
    assert joined.startswith(BEFORE) and len(shown) <= 3 and REAL.startswith(shown), joined
    # What the mask shows anyway ("sk-") is never held.
    assert _chat_text(BEFORE + "sk-", 3) == BEFORE + "sk-"


def test_held_text_is_never_more_than_the_key_less_one_character() -> None:
    from driftdesk.reruns.key_scrub import KeyScrubber, TextField

    scrubber, field = KeyScrubber(REAL), TextField()
    sent = ""
    for char in REAL[:-1]:
        sent += scrubber.scrub_piece(field, char)
        assert len(field.held) <= len(REAL) - 1
    assert (sent, field.held) == ("sk-", REAL[3:-1].encode())
    assert scrubber.scrub_piece(field, REAL[-1] + "!") == mask_key(REAL)[3:] + "!"


def test_two_tool_calls_and_two_choices_are_scrubbed_apart() -> None:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(choices: list[dict[str, Any]]) -> bytes:
        return _sse(None, {**head, "choices": choices})

    half = len(REAL) // 2
    events = [
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": REAL[:half]}}]}},
               {"index": 1, "delta": {"content": REAL[:half]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "x"}}]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": REAL[half:]}}]}},
               {"index": 1, "delta": {"content": REAL[half:]}}]),
        b"data: [DONE]\n\n",
    ]  # fmt: skip
    out = json.dumps(_through_passthrough(events), ensure_ascii=False)
    _no_trace(out)
    assert out.count(mask_key(REAL)[3:]) == 2


def test_an_event_written_over_two_reads_and_crlf_lines_still_parse() -> None:
    event = chat_events("content", BEFORE + REAL)[3].replace(b"\n", b"\r\n")
    from driftdesk.reruns.key_scrub import KeyScrubber, Passthrough

    passthrough = Passthrough(KeyScrubber(REAL), sse=True, encoding="", limit=1 << 30)
    out = passthrough.feed(event[:10]) + passthrough.feed(event[10:]) + passthrough.flush()
    assert out.endswith(b"\r\n\r\n") and out.startswith(b"data: {")
    assert json.loads(out.split(b"\r\n")[0][5:])["object"] == "chat.completion.chunk"
