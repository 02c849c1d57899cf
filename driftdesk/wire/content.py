"""What one provider call said, read from the bytes the metering proxy saw: the request's
conversation items, system, tools and other parameters, and the answer (text, tool calls,
reasoning, stop reason, usage), for the three wire protocols the proxy understands: Chat
Completions, the OpenAI Responses API and Anthropic Messages. A streamed answer is
reassembled from its SSE events into the same shape as a whole JSON body. Which items of a
request brought tool results and user turns back to the model is read here too
(``request_turns``, for the step model).

Nothing here raises on odd input: a body that is not the protocol's JSON gives ``None`` (no
request read, no answer), a stream cut short gives what its events held.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from driftdesk.wire import MODEL_PROTOCOLS, RESPONSES_ENDS, sse_events

# Per protocol: the request key holding the conversation items, and the one holding the
# system prompt (chat has none: its system prompt is an item).
_ITEMS_KEY = {"chat": "messages", "responses": "input", "messages": "messages"}
_SYSTEM_KEY = {"responses": "instructions", "messages": "system"}


@dataclass
class RequestContent:
    """A request body split the way a recording stores it."""

    items: list[Any]
    system: Any  # None when the protocol or the request has none
    tools: Any
    params: dict[str, Any]  # every other top-level key, as sent


def request_content(protocol: str, obj: dict[str, Any] | None) -> RequestContent | None:
    """The request of a ``chat`` / ``responses`` / ``messages`` call, from its body parsed
    (None: the body is not a JSON object). ``obj`` is left as it is."""
    if not isinstance(obj, dict) or protocol not in _ITEMS_KEY:
        return None
    params = dict(obj)
    items = params.pop(_ITEMS_KEY[protocol], None)
    system = params.pop(_SYSTEM_KEY[protocol], None) if protocol in _SYSTEM_KEY else None
    tools = params.pop("tools", None)
    if isinstance(items, str):  # Responses: a plain string input is one user message
        items = [{"role": "user", "content": items}]
    elif items is None:
        items = []
    elif not isinstance(items, list):
        items = [items]
    return RequestContent(items=items, system=system, tools=tools, params=params)


def answer_content(protocol: str, data: bytes, streamed: bool) -> dict[str, Any] | None:
    """The answer of a 2xx call: ``{"text", "tool_calls", "reasoning", "stop_reason",
    "usage"}``; None when a whole body is not a JSON object (or the protocol is unknown)."""
    if protocol not in MODEL_PROTOCOLS:
        return None
    if streamed:
        return _STREAMED[protocol](sse_events(data))
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    return _WHOLE[protocol](obj) if isinstance(obj, dict) else None


def _answer(
    texts: list[str],
    tool_calls: list[dict[str, Any]],
    reasoning: list[str],
    stop_reason: Any,
    usage: Any,
) -> dict[str, Any]:
    return {
        "text": "".join(texts),
        "tool_calls": tool_calls,
        "reasoning": "".join(reasoning) if reasoning else None,
        "stop_reason": stop_reason if isinstance(stop_reason, str) else None,
        "usage": usage if isinstance(usage, dict) else None,
    }


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _strings(*values: Any) -> list[str]:
    return [v for v in values if isinstance(v, str) and v]


# --- Chat Completions -------------------------------------------------------------------------


def _first_choice(obj: dict[str, Any]) -> dict[str, Any]:
    choices = _dicts(obj.get("choices"))
    return next((c for c in choices if c.get("index", 0) == 0), choices[0] if choices else {})


def _chat_text(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [str(p["text"]) for p in _dicts(content) if isinstance(p.get("text"), str)]


def _chat_whole(obj: dict[str, Any]) -> dict[str, Any]:
    choice = _first_choice(obj)
    message = _object(choice.get("message"))
    calls = []
    for call in _dicts(message.get("tool_calls")):
        function = _object(call.get("function"))
        calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    reasoning = _strings(message.get("reasoning_content"), message.get("reasoning"))[:1]
    return _answer(
        _chat_text(message.get("content")),
        calls,
        reasoning,
        choice.get("finish_reason"),
        obj.get("usage"),
    )


def _chat_streamed(events: list[dict[str, Any]]) -> dict[str, Any]:
    # The one loop that runs per streamed event: kept plain.
    texts: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    stop: Any = None
    usage: Any = None
    for event in events:
        found = event.get("usage")
        if isinstance(found, dict):
            usage = found
        choices = event.get("choices")
        if not isinstance(choices, list):
            continue
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1: the first choice is the answer recorded
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str) and content:
                    texts.append(content)
                thought = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(thought, str):
                    reasoning.append(thought)
                pieces = delta.get("tool_calls")
                if pieces:
                    _chat_tool_pieces(calls, _dicts(pieces))
            reason = choice.get("finish_reason")
            if reason:
                stop = reason
    return _answer(texts, [calls[i] for i in sorted(calls)], reasoning, stop, usage)


def _chat_tool_pieces(calls: dict[int, dict[str, Any]], pieces: list[dict[str, Any]]) -> None:
    for piece in pieces:
        index = piece.get("index")
        call = calls.setdefault(
            index if isinstance(index, int) else len(calls),
            {"id": None, "name": "", "arguments": ""},
        )
        if isinstance(piece.get("id"), str) and piece["id"]:
            call["id"] = piece["id"]
        function = _object(piece.get("function"))
        name = function.get("name")
        if isinstance(name, str) and name != call["name"]:
            call["name"] += name  # sent once, or in pieces; never twice the same
        if isinstance(function.get("arguments"), str):
            call["arguments"] += function["arguments"]


# --- OpenAI Responses -------------------------------------------------------------------------


def _responses_output(output: list[dict[str, Any]]) -> tuple[list[str], list[Any], list[str]]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            for part in _dicts(item.get("content")):
                texts += _strings(part.get("text"), part.get("refusal"))
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments" if kind == "function_call" else "input")
            calls.append(
                {
                    "id": item.get("call_id") or item.get("id"),
                    "name": item.get("name"),
                    "arguments": arguments,
                }
            )
        elif kind == "reasoning":
            for part in _dicts(item.get("summary")) + _dicts(item.get("content")):
                reasoning += _strings(part.get("text"))
    return texts, calls, reasoning


def _responses_whole(obj: dict[str, Any]) -> dict[str, Any]:
    texts, calls, reasoning = _responses_output(_dicts(obj.get("output")))
    return _answer(texts, calls, reasoning, obj.get("status"), obj.get("usage"))


def _responses_streamed(events: list[dict[str, Any]]) -> dict[str, Any]:
    final: dict[str, Any] | None = None  # the completed / incomplete / failed response
    latest: dict[str, Any] = {}  # the last response object seen (created, in_progress...)
    done: dict[int, dict[str, Any]] = {}
    text_deltas: list[str] = []
    reasoning_deltas: list[str] = []
    for event in events:
        kind = event.get("type")
        response = event.get("response")
        if isinstance(response, dict):
            latest = response
            if kind in RESPONSES_ENDS:
                final = response
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            index = event.get("output_index")
            done[index if isinstance(index, int) else len(done)] = event["item"]
        elif kind == "response.output_text.delta":
            text_deltas += _strings(event.get("delta"))
        elif kind == "response.reasoning_summary_text.delta":
            reasoning_deltas += _strings(event.get("delta"))
    output = _dicts(final.get("output")) if final is not None else []
    if not output:  # some gateways complete with an empty output: the items streamed count
        output = [done[i] for i in sorted(done)]
    texts, calls, reasoning = _responses_output(output)
    if not output:  # cut short before any item was done: the deltas are all there is
        texts, reasoning = text_deltas, reasoning_deltas
    source = final if final is not None else latest
    return _answer(texts, calls, reasoning, source.get("status"), source.get("usage"))


# --- Anthropic Messages -----------------------------------------------------------------------

_TOOL_BLOCKS = ("tool_use", "server_tool_use")


def _messages_whole(obj: dict[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for block in _dicts(obj.get("content")):
        kind = block.get("type")
        if kind == "text":
            texts += _strings(block.get("text"))
        elif kind in _TOOL_BLOCKS:
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            calls.append({"id": block.get("id"), "name": block.get("name"), "arguments": arguments})
        elif kind == "thinking":
            reasoning += _strings(block.get("thinking"))
    return _answer(texts, calls, reasoning, obj.get("stop_reason"), obj.get("usage"))


def _messages_streamed(events: list[dict[str, Any]]) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    blocks: dict[int, dict[str, Any]] = {}  # tool_use blocks by index: their JSON arrives in pieces
    stop: Any = None
    usage: dict[str, Any] | None = None
    for event in events:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            start = event["message"]
            usage = dict(start["usage"]) if isinstance(start.get("usage"), dict) else usage
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            block = event["content_block"]
            if block.get("type") in _TOOL_BLOCKS:
                blocks[_index(event, blocks)] = {
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "start": block.get("input", {}),
                    "pieces": [],
                }
            elif block.get("type") == "text":
                texts += _strings(block.get("text"))
            elif block.get("type") == "thinking":
                reasoning += _strings(block.get("thinking"))
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                texts += _strings(delta.get("text"))
            elif delta.get("type") == "thinking_delta":
                reasoning += _strings(delta.get("thinking"))
            elif delta.get("type") == "input_json_delta":
                block = blocks.get(_index(event, {}))
                if block is not None:
                    block["pieces"] += _strings(delta.get("partial_json"))
        elif kind == "message_delta":
            delta = _object(event.get("delta"))
            stop = delta.get("stop_reason", stop)
            if isinstance(event.get("usage"), dict):
                usage = {**(usage or {}), **event["usage"]}  # output tokens arrive last
    calls = [
        {
            "id": b["id"],
            "name": b["name"],
            # The JSON as the model sent it; a tool called without input streams none.
            "arguments": "".join(b["pieces"])
            if b["pieces"]
            else json.dumps(b["start"], ensure_ascii=False),
        }
        for _, b in sorted(blocks.items())
    ]
    return _answer(texts, calls, reasoning, stop, usage)


def _index(event: dict[str, Any], blocks: dict[int, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else len(blocks)


_WHOLE: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "chat": _chat_whole,
    "responses": _responses_whole,
    "messages": _messages_whole,
}
_STREAMED: dict[str, Callable[[list[dict[str, Any]]], dict[str, Any]]] = {
    "chat": _chat_streamed,
    "responses": _responses_streamed,
    "messages": _messages_streamed,
}


# --- what a request's items bring into the conversation ---------------------------------------


class RequestTurn(NamedTuple):
    """A conversation item that came back to the model: a tool's result (``tool_result``), a
    user turn read as one text (``user``) or a user turn whose blocks may hold tool results
    (``user_blocks``: Messages carries ``tool_result`` blocks in user turns). ``content`` is the
    item's content as sent."""

    kind: str
    content: Any
    detail: dict[str, Any]


def request_turns(protocol: str | None, items: list[Any]) -> Iterator[RequestTurn]:
    """Tool results and user turns among a request's conversation items (assistant items
    repeat earlier model turns; system and developer items are context)."""
    for item in items:
        if not isinstance(item, dict):
            continue
        if protocol == "responses":
            kind = item.get("type")
            if kind in ("function_call_output", "custom_tool_call_output"):
                detail = {"tool_call_id": item["call_id"]} if item.get("call_id") else {}
                yield RequestTurn("tool_result", item.get("output"), detail)
            elif kind in (None, "message") and item.get("role") == "user":
                yield RequestTurn("user", item.get("content"), {})
            continue
        role = item.get("role")
        if role in ("tool", "function"):  # chat: a tool's answer (``function``: the old name)
            detail = {k: item[k] for k in ("tool_call_id", "name") if item.get(k) is not None}
            yield RequestTurn("tool_result", item.get("content"), detail)
        elif role == "user":  # messages: tool_result blocks ride in user turns
            yield RequestTurn("user_blocks", item.get("content"), {})
