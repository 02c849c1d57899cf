"""Run dirs with call recordings written byte for byte as the recording spec says.

``write_slot`` plays one attempt of a scripted agent over one wire protocol (chat, responses,
messages): each provider call appends one gzip member holding one JSON record (``base`` =
the items shared with the previous call's full list, ``items`` the rest) to
``attempts/<task folder>/<attempt>.calls.jsonl.gz``, and one row to the run's calls.jsonl
with the same ``call_index``; the slot's row goes to attempts.jsonl.

A script is a list of turns: ``("call", name, arguments, result)`` (a tool call and the
tool's answer), ``("say", text, user_reply)`` (model text, then the user's reply) and
``("answer", text)``. ``failures`` maps a model turn's position to the failed calls made
before it (status, error_kind); ``mismatch`` names the turns answered by another model.
``earlier`` plays abandoned tries first (each a script cut by a 429, as a try the proxy
answered 429 and driftdesk ran again), every call then saying its ``try`` (records v2); without
it the slot is recorded as before tries were kept (v1, no ``try``). ``cache_marker`` sends each
messages call as Claude Code does: a ``cache_control`` marker on the newest item only, so every
earlier item is re-sent once with its marker moved.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from driftdesk.rundir import RECORDING_SUFFIX, attempt_file

MODEL = "model-x"
SYSTEM = "You are a retail support agent."


def append_record(path: Path, record: dict[str, Any]) -> None:
    """One record as the writer appends it: one gzip member per record, opened "ab"."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
    with open(path, "ab") as fh:
        fh.write(gzip.compress(line))


def append_jsonl(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_manifest(run_dir: Path, run_id: str = "run-1") -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "manifest.json").write_text(
        json.dumps({"run_id": run_id, "status": "completed", "tasks": []})
    )


def attempt_row(task_id: str, attempt: int, outcome: str, **fields: Any) -> dict[str, Any]:
    return {
        "run_id": "run-1",
        "task_id": task_id,
        "attempt": attempt,
        "outcome": outcome,
        "success": outcome == "pass" if outcome in ("pass", "fail") else None,
        "error_code": fields.pop("error_code", None),
        "retries": 0,
        **fields,
    }


def _first_items(protocol: str, prompt: str) -> list[dict[str, Any]]:
    if protocol == "chat":
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    return [{"role": "user", "content": prompt}]


def _after_call(
    protocol: str, call_id: str, name: str, arguments: dict[str, Any], result: str
) -> list[dict[str, Any]]:
    """What the agent appends to its conversation after a model turn calling one tool."""
    args = json.dumps(arguments)
    if protocol == "chat":
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]
    if protocol == "responses":
        return [
            {"type": "function_call", "call_id": call_id, "name": name, "arguments": args},
            {"type": "function_call_output", "call_id": call_id, "output": result},
        ]
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}],
        },
    ]


def _after_say(protocol: str, text: str, reply: str) -> list[dict[str, Any]]:
    if protocol == "messages":
        return [
            {"role": "assistant", "content": [{"type": "text", "text": text}]},
            {"role": "user", "content": [{"type": "text", "text": reply}]},
        ]
    if protocol == "responses":
        return [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": reply}]},
        ]
    return [{"role": "assistant", "content": text}, {"role": "user", "content": reply}]


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


class SlotRecorder:
    """Appends one slot's records and calls.jsonl rows, counting call_index as the proxy."""

    def __init__(self, run_dir: Path, task_id: str, attempt: int, protocol: str) -> None:
        self.run_dir, self.task_id, self.attempt, self.protocol = (
            run_dir,
            task_id,
            attempt,
            protocol,
        )
        self.path = attempt_file(run_dir, task_id, attempt, RECORDING_SUFFIX)
        self.previous: list[Any] = []
        self.call_index = 0
        self.tokens = 0
        self.try_number: int | None = None  # None: recorded before tries were kept

    def new_try(self, number: int) -> None:
        """The proxy's next token for the slot: a conversation of its own (base 0)."""
        self.try_number = number
        self.previous = []

    def call(
        self,
        full: list[Any],
        response: dict[str, Any] | None,
        *,
        status: int = 200,
        error_kind: str | None = None,
        served_model: str = MODEL,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
        latency_ms: float = 250.0,
    ) -> None:
        base = _common_prefix(self.previous, full)
        request: dict[str, Any] = {
            "base": base,
            "items": full[base:],
            "tools": [{"name": "get_user_details"}] if self.call_index == 0 else None,
            "params": {"model": MODEL, "temperature": 0},
        }
        if self.protocol != "chat":
            request["system"] = SYSTEM
        if self.call_index > 0:
            request.pop("tools")
            request["tools_same"] = True
            if self.protocol != "chat":
                request.pop("system")
                request["system_same"] = True
        failed = response is None
        record = {
            "v": 1 if self.try_number is None else 2,
            **({} if self.try_number is None else {"try": self.try_number}),
            "call_index": self.call_index,
            "request_id": f"dd-{self.task_id}-{self.attempt}-{self.call_index}",
            "protocol": self.protocol,
            "request": request,
            "response": response,
            "truncated": False,
            "error": '{"error": {"message": "slow down"}}' if failed else None,
        }
        append_record(self.path, record)
        answered = not failed
        append_jsonl(
            self.run_dir / "calls.jsonl",
            {
                "run_id": "run-1",
                "task_id": self.task_id,
                "attempt": self.attempt,
                "call_index": self.call_index,
                **({} if self.try_number is None else {"try": self.try_number}),
                "method": "POST",
                "path": {"chat": "/v1/chat/completions", "responses": "/v1/responses"}.get(
                    self.protocol, "/v1/messages"
                ),
                "status": status,
                "latency_ms": latency_ms,
                "prompt_tokens": prompt_tokens if answered else None,
                "completion_tokens": completion_tokens if answered else None,
                "total_tokens": prompt_tokens + completion_tokens if answered else None,
                "error_kind": error_kind,
                "requested_model": MODEL,
                "served_model": served_model if answered else None,
                "model_mismatch": answered and served_model != MODEL,
                "request_id": record["request_id"],
            },
        )
        if answered:
            self.tokens += prompt_tokens + completion_tokens
        self.previous = full
        self.call_index += 1


def write_slot(
    run_dir: Path,
    task_id: str,
    attempt: int,
    script: list[tuple[Any, ...]],
    *,
    outcome: str,
    protocol: str = "chat",
    prompt: str = "Where is my order #W1?",
    failures: dict[int, list[tuple[int, str]]] | None = None,
    mismatch: set[int] | None = None,
    trailing_failures: list[tuple[int, str]] | None = None,
    row: bool = True,
    earlier: list[list[tuple[Any, ...]]] | None = None,
    tries: bool = False,
    cache_marker: bool = False,
) -> SlotRecorder:
    """Play ``script`` (see the module doc) and record it; the attempts row unless ``row``.
    ``tries``: every call says its try even without ``earlier`` ones."""
    recorder = SlotRecorder(run_dir, task_id, attempt, protocol)
    for number, abandoned in enumerate(earlier or [], start=1):
        recorder.new_try(number)
        _play(recorder, abandoned, protocol, prompt, {}, None, [(429, "429")], cache_marker)
    if earlier or tries:
        recorder.new_try(len(earlier or []) + 1)
    _play(
        recorder,
        script,
        protocol,
        prompt,
        failures or {},
        mismatch,
        trailing_failures or [],
        cache_marker,
    )
    if row:
        append_jsonl(
            run_dir / "attempts.jsonl",
            attempt_row(
                task_id,
                attempt,
                outcome,
                total_tokens=recorder.tokens,
                latency_ms=1000.0 + 100 * len(script),
            ),
        )
    return recorder


def _play(
    recorder: SlotRecorder,
    script: list[tuple[Any, ...]],
    protocol: str,
    prompt: str,
    failures: dict[int, list[tuple[int, str]]],
    mismatch: set[int] | None,
    trailing_failures: list[tuple[int, str]],
    cache_marker: bool,
) -> None:
    full = _first_items(protocol, prompt)

    def sent(items: list[Any]) -> list[Any]:
        return _with_moving_cache_marker(items) if cache_marker else items

    for turn, step in enumerate(script):
        for status, kind in failures.get(turn, []):
            recorder.call(sent(full), None, status=status, error_kind=kind)
        served = "model-y" if mismatch and turn in mismatch else MODEL
        # An earlier try's ids differ from the final try's, as a client's fresh ones do.
        number = recorder.try_number
        call_id = f"call_{turn}" if number is None else f"call_{number}_{turn}"
        if step[0] == "call":
            _, name, arguments, result = step
            response = {
                "text": "",
                "tool_calls": [{"id": call_id, "name": name, "arguments": json.dumps(arguments)}],
                "reasoning": None,
                "stop_reason": "tool_calls",
                "usage": {"prompt_tokens": 100, "completion_tokens": 20},
            }
            recorder.call(sent(full), response, served_model=served)
            full = full + _after_call(protocol, call_id, name, arguments, result)
        elif step[0] == "say":
            _, text, reply = step
            response = {"text": text, "tool_calls": [], "reasoning": None, "stop_reason": "stop"}
            recorder.call(sent(full), response, served_model=served)
            full = full + _after_say(protocol, text, reply)
        else:
            _, text = step
            response = {"text": text, "tool_calls": [], "reasoning": None, "stop_reason": "stop"}
            recorder.call(sent(full), response, served_model=served)
    for status, kind in trailing_failures:
        recorder.call(sent(full), None, status=status, error_kind=kind)


def _with_moving_cache_marker(items: list[Any]) -> list[Any]:
    """Claude Code's way: the newest item's last content block carries ``cache_control``, and
    its text as a list of blocks; the earlier ones are sent without it."""
    out = json.loads(json.dumps(items))
    last = out[-1] if out else None
    if isinstance(last, dict):
        if isinstance(last.get("content"), str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        if isinstance(last.get("content"), list) and last["content"]:
            last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


LOOKUP = ("call", "get_user_details", {"user_id": "u1"}, '{"name": "Ada", "orders": ["#W1"]}')
ORDER = ("call", "get_order_details", {"order_id": "#W1"}, '{"status": "delivered"}')
GOOD_ANSWER = ("answer", "Your order #W1 was delivered yesterday.")
RASH_ANSWER = ("answer", "Your order is on its way.")


def write_wobbly_task(run_dir: Path, task_id: str = "retail-7") -> None:
    """5 judged attempts: 0 and 1 pass (a lookup first), 2-4 fail (an answer at once), 4
    after a 429 before its first turn; 5 is a link error (a 500 never retried)."""
    write_manifest(run_dir)
    for attempt in (0, 1):
        write_slot(run_dir, task_id, attempt, [LOOKUP, ORDER, GOOD_ANSWER], outcome="pass")
    for attempt in (2, 3, 4):
        failures = {0: [(429, "429")]} if attempt == 4 else None
        write_slot(run_dir, task_id, attempt, [RASH_ANSWER], outcome="fail", failures=failures)
    write_slot(
        run_dir, task_id, 5, [LOOKUP], outcome="link_error", trailing_failures=[(500, "500")]
    )
