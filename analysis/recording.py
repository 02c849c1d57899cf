"""Reading the metering proxy's per-attempt recording of provider calls (``<attempt>.calls.jsonl.gz``).

The file is a sequence of gzip members, one JSON record (and its newline) per member,
appended as calls finish. Each record holds only the conversation items after the ``base``
leading ones it shares with the previous call's full list, so the full item list of call n is
``full(n-1)[:base] + items``. A run killed mid-write leaves a torn last member: it is
reported, never raised, and every whole record before it is read. A line that is not a
record is named by its record number and skipped.

Each record names its try (``try``, 1-based; a record from before tries were kept has none
and reads as try 1): a try starts its conversation afresh, so the chain of ``base`` restarts
with it.

``recorded_steps`` turns the records into steps: the model turn of each call's response, and
before it the tool results and user turns that were new in that call's request. New means not
re-sent: clients send the conversation again with every call, and not always byte for byte
(Claude Code moves its ``cache_control`` marker to the newest message and sends a message's
text as a string one time and as a list of text blocks the next), so an item is re-sent when
it equals one of the previous call's once its cache markers are dropped and its text content
is written one way (``same_item``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.analysis.steps import Step, content_text, model_step, user_steps
from driftdesk.rundir import record_lines
from driftdesk.wire.content import request_turns

_RECENT_CALLS = 8  # earlier calls of a try a call may continue the conversation of


@dataclass
class RecordedCall:
    number: int  # the record's place in the file, 1-based (how problems name it)
    record: dict[str, Any]
    items: list[Any]  # the call's full conversation items, as reconstructed
    new_items: list[Any]  # the items this call added to the previous call's list
    items_known: bool = True  # False once a truncated record (or a gap) hides some items

    @property
    def call_index(self) -> int | None:
        value = self.record.get("call_index")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def try_number(self) -> int | None:
        """The record's try (1-based); None: recorded before tries were kept."""
        value = self.record.get("try")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def protocol(self) -> str | None:
        protocol = self.record.get("protocol")
        return protocol if isinstance(protocol, str) else None

    @property
    def response(self) -> dict[str, Any] | None:
        response = self.record.get("response")
        return response if isinstance(response, dict) else None


@dataclass
class _Chain:
    """The previous call's full items, carried from record to record."""

    items: list[Any] = field(default_factory=list)
    known: bool = True
    try_number: int | None = None
    # The try's last calls' full lists: a call that does not extend the previous one (it
    # followed a side request: a title, a summary) may extend an earlier one.
    recent: list[list[Any]] = field(default_factory=list)


def read_recording(path: Path | str) -> tuple[list[RecordedCall], list[str]]:
    """Every whole record of a recording, with its reconstructed items, and the problems
    (one line each: a torn last member, a malformed record, a broken ``base`` chain)."""
    problems: list[str] = []
    calls: list[RecordedCall] = []
    chain = _Chain()
    for number, line in record_lines(Path(path), problems):
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"record {number}: not JSON ({exc}); skipped")
            chain.known = False  # the next record's base counts items this one held
            continue
        if not isinstance(record, dict):
            problems.append(f"record {number}: expected an object, got {type(record).__name__}")
            chain.known = False
            continue
        number_of_try = record.get("try")
        if number_of_try != chain.try_number:  # a new try: a conversation of its own
            chain.items, chain.known, chain.try_number = [], True, number_of_try
            chain.recent = []
        calls.append(_reconstruct(number, record, chain, problems))
    return calls, problems


def _reconstruct(
    number: int, record: dict[str, Any], chain: _Chain, problems: list[str]
) -> RecordedCall:
    request = record.get("request") if isinstance(record.get("request"), dict) else {}
    assert isinstance(request, dict)
    items = request.get("items")
    base = request.get("base")
    previous = chain.items
    known = chain.known
    if not isinstance(base, int) or isinstance(base, bool) or base < 0:
        base = 0
    if base > len(previous):
        problems.append(
            f"record {number}: base {base} is past the previous call's "
            f"{len(previous)} items; the items before it are unknown"
        )
        known = False
    if not isinstance(items, list):  # cut by the cap, or an unknown protocol's body
        items, known = [], False
    full = previous[:base] + items
    # The writer's base counts items equal byte for byte; a client re-sends some with another
    # cache marker or text shape, which are the same items all the same.
    shared = min(base, len(previous))
    while (
        shared < len(previous) and shared < len(full) and same_item(previous[shared], full[shared])
    ):
        shared += 1
    if shared >= len(previous):
        new = full[len(previous) :]
    else:
        extended = _longest_extended(chain.recent[:-1], full)
        if extended is not None:  # the conversation of an earlier call goes on
            new = full[extended:]
        else:  # the conversation was rewritten from ``shared`` on: only what it did not hold
            earlier = {_item_key(item) for item in previous[shared:]}
            new = [item for item in full[shared:] if _item_key(item) not in earlier]
    chain.items, chain.known = full, known
    chain.recent = [*chain.recent[-(_RECENT_CALLS - 1) :], full]
    return RecordedCall(number, record, full, new, known)


def _longest_extended(candidates: list[list[Any]], full: list[Any]) -> int | None:
    """The length of the longest non-empty candidate list that ``full`` starts with (items
    compared by ``same_item``); None when it extends none of them."""
    best: int | None = None
    for candidate in candidates:
        size = len(candidate)
        if not size or size > len(full) or (best is not None and size <= best):
            continue
        if all(same_item(a, b) for a, b in zip(candidate, full, strict=False)):
            best = size
    return best


def same_item(a: Any, b: Any) -> bool:
    """Whether two conversation items are one item sent twice: equal, or equal once their
    ``cache_control`` markers are dropped and their text content is written one way."""
    return a == b or canonical_item(a) == canonical_item(b)


def canonical_item(value: Any) -> Any:
    """``value`` without ``cache_control`` keys (at any depth), a string ``content`` written as
    the one text block it stands for (``[{"type": "text", "text": ...}]``)."""
    if isinstance(value, dict):
        out = {k: canonical_item(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(out.get("content"), str):
            out["content"] = [{"type": "text", "text": out["content"]}]
        return out
    if isinstance(value, list):
        return [canonical_item(v) for v in value]
    return value


def _item_key(item: Any) -> str:
    return json.dumps(canonical_item(item), sort_keys=True, ensure_ascii=False, default=str)


def recorded_steps(call: RecordedCall, *, first: bool) -> list[Step]:
    """The steps one recorded call stands for: the tool results and user turns new in its
    request (all of the first call's), then the model turn of its response, if it had one."""
    steps = list(request_steps(call.protocol, call.items if first else call.new_items))
    response = call.response
    if response is not None:
        detail: dict[str, Any] = {}
        for key in ("stop_reason",):
            if response.get(key) is not None:
                detail[key] = response[key]
        if call.record.get("request_id"):
            detail["request_id"] = call.record["request_id"]
        if call.record.get("truncated"):
            detail["truncated"] = True
        turn = model_step(
            {
                "content": response.get("text") or "",
                "tool_calls": response.get("tool_calls") or [],
                "reasoning": response.get("reasoning"),
            },
            call_index=call.call_index,
        )
        turn.detail.update(detail)
        steps.append(turn)
    return steps


def request_steps(protocol: str | None, items: list[Any]) -> Iterator[Step]:
    """Tool results and user turns among a request's conversation items (which items those
    are is the wire protocol's: ``request_turns``)."""
    for turn in request_turns(protocol, items):
        if turn.kind == "tool_result":
            yield Step("tool_result", 0, content_text(turn.content), detail=turn.detail)
        elif turn.kind == "user":
            yield Step("user", 0, content_text(turn.content))
        else:
            yield from user_steps(turn.content)
