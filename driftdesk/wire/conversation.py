"""What the simulated model reads of a request, whatever its protocol: the user's texts, the
tools the request declares (name and JSON schema), the assistant's earlier tool calls and the
tools' results. Chat Completions nests a tool in ``function`` and its results in ``tool``
messages; Messages carries ``tool_use`` / ``tool_result`` blocks; Responses has
``function_call`` / ``function_call_output`` items."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]

    @classmethod
    def read(cls, call_id: Any, name: Any, arguments: Any) -> ToolCall:
        """A call as a request carries it (arguments as JSON text or an object)."""
        return cls(str(call_id), str(name), parse_arguments(arguments))


@dataclass
class Conversation:
    """What the simulated model reads from a request, protocol aside."""

    user_texts: list[str] = field(default_factory=list)  # every user text block, in order
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, JSON schema)
    calls: list[ToolCall] = field(default_factory=list)  # the assistant's earlier tool calls
    results: dict[str, str] = field(default_factory=dict)  # call id -> tool result text

    @property
    def size(self) -> int:
        return sum(len(t) for t in self.user_texts) + sum(len(r) for r in self.results.values())


def parse_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _declared_tools(
    body: dict[str, Any], schema_key: str, nested: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(name, JSON schema)`` of the tools a request declares (Chat nests them in
    ``function``; Messages calls the schema ``input_schema``)."""
    found = []
    for tool in body.get("tools") or []:
        if nested and isinstance(tool, dict):
            tool = tool.get(nested)
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            found.append((tool["name"], dict(tool.get(schema_key) or {})))
    return found


def chat_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation(tools=_declared_tools(body, "parameters", nested="function"))
    for message in body.get("messages") or []:
        role = message.get("role")
        if role == "user":
            conv.user_texts.append(text_of(message.get("content")))
        elif role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                conv.calls.append(
                    ToolCall.read(call.get("id"), function.get("name"), function.get("arguments"))
                )
        elif role == "tool":
            conv.results[str(message.get("tool_call_id"))] = text_of(message.get("content"))
    return conv


def messages_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation(tools=_declared_tools(body, "input_schema"))
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and message.get("role") == "user":
                conv.user_texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                conv.calls.append(
                    ToolCall.read(block.get("id"), block.get("name"), block.get("input"))
                )
            elif kind == "tool_result":
                conv.results[str(block.get("tool_use_id"))] = text_of(block.get("content"))
    return conv


def responses_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation(tools=_declared_tools(body, "parameters"))
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                conv.user_texts.append(content)
            else:
                conv.user_texts.extend(
                    str(p.get("text", "")) for p in content or [] if isinstance(p, dict)
                )
        elif kind == "function_call":
            conv.calls.append(
                ToolCall.read(item.get("call_id"), item.get("name"), item.get("arguments"))
            )
        elif kind == "function_call_output":
            output = item.get("output")
            conv.results[str(item.get("call_id"))] = (
                output if isinstance(output, str) else json.dumps(output)
            )
    return conv
