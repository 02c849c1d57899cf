"""The wire protocols driftdesk speaks and reads: OpenAI Chat Completions, the OpenAI Responses
API and Anthropic Messages (``count_tokens`` included). This package is the one place that
knows what their requests, answers, errors and streams look like; a fourth protocol is added
here and nowhere else that parses bodies.

- here: which protocol a request path is (``wire_protocol``), when a stream is complete
  (``END_MARKERS``), SSE events read (``sse_events``) and written (``sse_event``);
- ``wire.usage``: the usage, served model and fingerprint of an answer, the model requested;
- ``wire.errors``: error bodies in each protocol's shape (the proxy's own, injected faults',
  the simulated endpoint's);
- ``wire.content``: a request's conversation items, system prompt and tools, and an answer
  reassembled (text, tool calls, reasoning, stop reason), streamed or whole;
- ``wire.conversation``: what the simulated model reads of a request (user texts, tool calls
  and results, declared tools);
- ``wire.answers``: answers written in each protocol's shape, whole or as a stream's events
  (the simulated endpoint's), and the models list.

Nothing here does I/O or imports the rest of driftdesk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

# The protocols of model calls (``wire_protocol`` names): what injection touches and what a
# recording keeps the content of.
MODEL_PROTOCOLS = frozenset({"chat", "responses", "messages"})
# The Responses stream events that end a response.
RESPONSES_ENDS = ("response.completed", "response.incomplete", "response.failed")
# Per protocol, what marks the end of a complete stream.
END_MARKERS = {
    "chat": re.compile(rb'"finish_reason"\s*:\s*"|^data:\s*\[DONE\]'),
    "responses": re.compile(rb'"type"\s*:\s*"response\.(?:completed|incomplete|failed)"'),
    "messages": re.compile(rb'"type"\s*:\s*"message_stop"'),
}
ANY_END = re.compile(b"|".join(m.pattern for m in END_MARKERS.values()))


def wire_protocol(path: str) -> str | None:
    """``chat`` | ``responses`` | ``messages`` | ``count_tokens`` from a request path."""
    path = "/" + path.strip("/")  # a base URL may end in /v1 or not: the tail decides
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages/count_tokens"):
        return "count_tokens"
    if path.endswith("/messages"):
        return "messages"
    return None


def is_event_payload(payload: bytes) -> bool:
    """Whether a ``data:`` line's payload can be an event of the protocols (a JSON object, or
    Chat's ``[DONE]``), not a gateway's page or garbage."""
    return payload == b"[DONE]" or (payload.startswith(b"{") and payload.endswith(b"}"))


def sse_event(event: str | None, data: dict[str, Any]) -> bytes:
    """One SSE event as a server sends it (``event:`` line when named, then ``data:``)."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(data).encode() + b"\n\n"


def sse_events(data: bytes) -> list[dict[str, Any]]:
    """The JSON objects of an SSE stream's ``data:`` lines (``[DONE]`` and junk skipped)."""
    payloads = [line[5:].strip() for line in data.split(b"\n") if line.startswith(b"data:")]
    payloads = [p for p in payloads if p.startswith(b"{")]
    try:  # one parse for the whole stream: a stream has many small events
        events = json.loads(b"[" + b",".join(payloads) + b"]")
    except (ValueError, UnicodeDecodeError):  # a line cut short: each on its own
        events = list(_each_parsed(payloads))
    return [e for e in events if isinstance(e, dict)]


def _each_parsed(payloads: list[bytes]) -> Iterator[Any]:
    for payload in payloads:
        try:
            yield json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            continue
