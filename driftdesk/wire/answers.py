"""Answers in each protocol's shape, as a provider sends them: a whole JSON body, or the SSE
events of a stream (text in small deltas, tool calls, usage, the protocol's end). The simulated
endpoint (``reruns/simulated_endpoint.py``) answers with these; ``wire.content`` reads them back."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from driftdesk.wire import sse_event
from driftdesk.wire.conversation import ToolCall


@dataclass(frozen=True)
class Answer:
    """What a model answers, protocol aside: a text or tool calls, its token counts and the
    model (and fingerprint) it answers as."""

    text: str
    calls: list[ToolCall]
    prompt_tokens: int
    completion_tokens: int
    model: str
    fingerprint: str


def text_pieces(text: str) -> list[str]:
    """A text as a stream sends it: deltas of 12 characters (one empty delta for no text)."""
    return [text[i : i + 12] for i in range(0, len(text), 12)] or [""]


def models_list(model_id: str, owner: str) -> dict[str, Any]:
    """An OpenAI ``/v1/models`` answer listing one model."""
    return {
        "object": "list",
        "data": [{"id": model_id, "object": "model", "created": 0, "owned_by": owner}],
    }


def count_tokens_answer(input_tokens: int) -> dict[str, Any]:
    """An Anthropic ``/v1/messages/count_tokens`` answer."""
    return {"input_tokens": input_tokens}


# --- Chat Completions -------------------------------------------------------------------------


def chat_answer(
    answer: Answer, *, streamed: bool, include_usage: bool
) -> dict[str, Any] | list[bytes]:
    """The completion (a dict), or its stream's events (a list of bytes) when ``streamed``;
    a stream carries a usage chunk when the request asked for it (``include_usage``)."""
    prompt, completion = answer.prompt_tokens, answer.completion_tokens
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.calls:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in answer.calls
            ],
        }
    finish = "tool_calls" if answer.calls else "stop"
    base = {
        "id": f"chatcmpl-sim-{time.time_ns():x}",
        "created": int(time.time()),
        "model": answer.model,
        "system_fingerprint": answer.fingerprint,
    }
    if not streamed:
        return {
            **base,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return sse_event(None, {**base, "object": "chat.completion.chunk", "choices": [choice]})

    events = [chunk({"role": "assistant", "content": ""})]
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": index, **call}]}))
    if not answer.calls:
        events.extend(chunk({"content": piece}) for piece in text_pieces(answer.text))
    events.append(chunk({}, finish))
    if include_usage:
        events.append(
            sse_event(
                None, {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
            )
        )
    events.append(b"data: [DONE]\n\n")
    return events


# --- Anthropic Messages -----------------------------------------------------------------------


def messages_answer(answer: Answer, *, streamed: bool) -> dict[str, Any] | list[bytes]:
    """The message (a dict), or its stream's events (a list of bytes) when ``streamed``."""
    prompt, completion = answer.prompt_tokens, answer.completion_tokens
    blocks: list[dict[str, Any]] = []
    if answer.text or not answer.calls:
        blocks.append({"type": "text", "text": answer.text})
    blocks.extend(
        {"type": "tool_use", "id": f"toolu_{c.id}", "name": c.name, "input": c.arguments}
        for c in answer.calls
    )
    stop = "tool_use" if answer.calls else "end_turn"
    message = {
        "id": f"msg_sim_{time.time_ns():x}",
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }
    if not streamed:
        return message
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    events = [sse_event("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in text_pieces(block["text"])]
        else:
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            sse_event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        events.extend(
            sse_event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            for delta in deltas
        )
        events.append(
            sse_event("content_block_stop", {"type": "content_block_stop", "index": index})
        )
    events.append(
        sse_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": completion},
            },
        )
    )
    events.append(sse_event("message_stop", {"type": "message_stop"}))
    return events


# --- OpenAI Responses -------------------------------------------------------------------------


def responses_answer(answer: Answer, *, streamed: bool) -> dict[str, Any] | list[bytes]:
    """The response (a dict), or its stream's events (a list of bytes) when ``streamed``."""
    prompt, completion = answer.prompt_tokens, answer.completion_tokens
    stamp = f"{time.time_ns():x}"
    output: list[dict[str, Any]] = [
        {
            "type": "function_call",
            "id": f"fc_{c.id}",
            "call_id": f"call_{c.id}",
            "name": c.name,
            "arguments": json.dumps(c.arguments),
            "status": "completed",
        }
        for c in answer.calls
    ]
    if not answer.calls:
        output.append(
            {
                "type": "message",
                "id": f"msg_sim_{stamp}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer.text, "annotations": []}],
            }
        )
    response = {
        "id": f"resp_sim_{stamp}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": answer.model,
        "output": output,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }
    if not streamed:
        return response
    return list(_responses_events(response, output))


def _responses_events(response: dict[str, Any], output: list[dict[str, Any]]) -> Iterator[bytes]:
    sequence = iter(range(1_000_000))

    def event(kind: str, **data: Any) -> bytes:
        return sse_event(kind, {"type": kind, "sequence_number": next(sequence), **data})

    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(output):
        if item["type"] == "function_call":
            yield event(
                "response.output_item.added", output_index=index, item={**item, "arguments": ""}
            )
            yield event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        else:
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            yield event("response.content_part.added", **where, part=part)
            for piece in text_pieces(text):
                yield event("response.output_text.delta", **where, delta=piece)
            yield event("response.output_text.done", **where, text=text)
            yield event("response.content_part.done", **where, part={**part, "text": text})
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)
