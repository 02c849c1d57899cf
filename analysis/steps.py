"""One step model for every source of an attempt's conversation.

A live run's recording (``analysis.recording``), the builtin agent's transcript, and the
trajectories kept from imported files (tau-bench ``traj``, tau2 ``messages``, inspect_ai
samples' ``messages``) all become a ``Trajectory``: an ordered list of ``Step`` s.

- ``model``: one model turn: its free text and its tool calls (name, arguments as canonical
  JSON), with the tokens, latency and served model of the call that produced it;
- ``tool_result`` / ``user``: what came back into the conversation after a model turn;
- ``link_event``: a call that failed (an HTTP error, a timeout, a cut stream) or was answered
  by another model than the one asked for, placed before the model turn it held up.

``steps_from_messages`` reads any list of chat messages in the shapes those sources use:
OpenAI chat (``tool_calls[].function.{name,arguments}``), Anthropic Messages content blocks
(``tool_use`` / ``tool_result``), tau2 (``tool_calls[].{name,arguments}``) and inspect_ai
(``tool_calls[].{function,arguments}``, content as a string or a list of typed parts).

A live run's attempt may have had several tries (a try that ended on a retryable link error is
run again from scratch, in a fresh workspace): its ``steps`` are its final try's, and the
earlier tries are kept apart in ``earlier_tries`` (``Try``), never mixed into the steps that
attempts are compared by.

An import keeps each attempt's trajectory as ``<attempt>.trajectory.json`` in its run dir
(``write_trajectory``: this model as JSON, every string redacted).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from driftdesk.rundir import TRAJECTORY_SUFFIX, attempt_file
from driftdesk.secrets import redact

StepKind = Literal["model", "tool_result", "user", "link_event"]
STEP_KINDS = ("model", "tool_result", "user", "link_event")
TRAJECTORY_VERSION = 1
# Where a generic JSON-lines row may carry its conversation, in the order looked at.
MESSAGE_FIELDS = ("messages", "traj", "trajectory")
TEXT_PART_TYPES = (None, "text", "input_text", "output_text")
SUMMARY_WIDTH = 120  # a step's one-line summary
_CACHED_ARGUMENTS_CHARS = 4096  # longer tool-call arguments are made canonical uncached


@dataclass
class Step:
    kind: StepKind
    index: int  # the step's place in its trajectory, 0-based
    text: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, canonical args)
    tokens: int | None = None
    latency_ms: float | None = None
    served_model: str | None = None
    call_index: int | None = None  # the proxy's call_index of the call behind the step
    # Anything else worth showing: reasoning, stop_reason, tool_call_id, the error kind and
    # status of a link event, whether a recording record was truncated by the cap.
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "text": self.text,
            "tool_calls": [[name, arguments] for name, arguments in self.tool_calls],
            "tokens": self.tokens,
            "latency_ms": self.latency_ms,
            "served_model": self.served_model,
            "call_index": self.call_index,
            "detail": self.detail,
        }

    def summary(self, width: int = SUMMARY_WIDTH) -> str:
        """The step in one line: a model turn's tool calls (``call NAME(ARGS)``) or its text, a
        tool result's or user turn's text, a link event's words; cut at ``width``."""
        if self.kind == "model" and self.tool_calls:
            said = "; ".join(f"call {name}({arguments})" for name, arguments in self.tool_calls)
        else:
            said = self.text
        said = " ".join(said.split()) or "(no text)"
        return said if len(said) <= width else said[: width - 1] + "…"

    def summary_json(self) -> dict[str, Any]:
        """What ``explain --json`` says of the step."""
        return {
            "index": self.index,
            "kind": self.kind,
            "summary": self.summary(),
            "call_index": self.call_index,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        kind = data.get("kind")
        if kind not in STEP_KINDS:
            raise ValueError(f"step kind {kind!r} is not one of {', '.join(STEP_KINDS)}")
        calls = data.get("tool_calls") or []
        return cls(
            kind=kind,
            index=int(data.get("index") or 0),
            text=str(data.get("text") or ""),
            tool_calls=[(str(c[0]), str(c[1])) for c in calls],
            tokens=_int_or_none(data.get("tokens")),
            latency_ms=_float_or_none(data.get("latency_ms")),
            served_model=_str_or_none(data.get("served_model")),
            call_index=_int_or_none(data.get("call_index")),
            detail=data["detail"] if isinstance(data.get("detail"), dict) else {},
        )


@dataclass
class Try:
    """One abandoned try of an attempt: its own steps, apart from the final try's."""

    number: int  # 1-based, as the proxy numbered the slot's tries
    steps: list[Step]
    ended_by: str | None = None  # what ended it: "429 at call 3"; None: not known
    calls: int = 0  # the calls it made

    @property
    def summary(self) -> str:
        """One line for a folded try: "try 1 — 429 at call 3, discarded (4 steps)"."""
        ended = self.ended_by or "ended"
        return f"try {self.number} — {ended}, discarded ({len(self.steps)} steps)"

    def to_json(self, *, full: bool = False) -> dict[str, Any]:
        """``full``: every step as ``Step.to_json``; else each as its one-line summary."""
        return {
            "try": self.number,
            "ended_by": self.ended_by,
            "calls": self.calls,
            "steps": [s.to_json() if full else s.summary_json() for s in self.steps],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Try:
        return cls(
            number=int(data.get("try") or 1),
            steps=numbered(Step.from_json(s) for s in data.get("steps") or []),
            ended_by=_str_or_none(data.get("ended_by")),
            calls=int(data.get("calls") or 0),
        )


@dataclass
class Trajectory:
    task_id: str
    attempt: int
    outcome: str | None  # pass | fail | link_error | harness_error; None: no row for it
    steps: list[Step]
    source: str  # recording | transcript | tau-bench | tau2 | inspect | jsonl
    tokens: int | None = None  # the attempt's total, from its row
    latency_ms: float | None = None  # the attempt's wall time, from its row
    problems: list[str] = field(default_factory=list)  # what could not be read, one line each
    # The try ``steps`` are from (1-based; None: a source without tries, e.g. an import),
    # the abandoned tries before it (oldest first), and whether the calls said their try
    # (False: recorded before tries were kept, every call read as one try).
    try_number: int | None = None
    earlier_tries: list[Try] = field(default_factory=list)
    tries_known: bool = True

    @property
    def model_turns(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "model"]

    def to_json(self) -> dict[str, Any]:
        return {
            "v": TRAJECTORY_VERSION,
            "task_id": self.task_id,
            "attempt": self.attempt,
            "outcome": self.outcome,
            "source": self.source,
            "tokens": self.tokens,
            "latency_ms": self.latency_ms,
            "steps": [s.to_json() for s in self.steps],
            **({"try": self.try_number} if self.try_number is not None else {}),
            **(
                {"earlier_tries": [t.to_json(full=True) for t in self.earlier_tries]}
                if self.earlier_tries
                else {}
            ),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trajectory:
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise ValueError("not a trajectory (no steps)")
        earlier = data.get("earlier_tries")
        return cls(
            task_id=str(data.get("task_id")),
            attempt=int(data.get("attempt") or 0),
            outcome=_str_or_none(data.get("outcome")),
            steps=numbered(Step.from_json(s) for s in data["steps"]),
            source=str(data.get("source") or "import"),
            tokens=_int_or_none(data.get("tokens")),
            latency_ms=_float_or_none(data.get("latency_ms")),
            try_number=_int_or_none(data.get("try")),
            earlier_tries=[Try.from_json(t) for t in earlier if isinstance(t, dict)]
            if isinstance(earlier, list)
            else [],
        )


def numbered(steps: Iterable[Step]) -> list[Step]:
    """``steps`` as a list, each ``index`` its place in it."""
    out = list(steps)
    for index, step in enumerate(out):
        step.index = index
    return out


def canonical_arguments(arguments: Any) -> str:
    """Tool-call arguments as canonical JSON (sorted keys, no spaces), so the same call made
    twice compares equal; a string that is not JSON is kept as it is."""
    if isinstance(arguments, str):
        if len(arguments) > _CACHED_ARGUMENTS_CHARS:  # a file's contents: not kept in memory
            return _canonical_text.__wrapped__(arguments)
        return _canonical_text(arguments)
    try:
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


@functools.lru_cache(maxsize=8192)
def _canonical_text(arguments: str) -> str:
    # Attempts of one task call the same tools with the same arguments again and again: each
    # string is parsed and dumped once.
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, ValueError):
        return arguments
    try:
        return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(parsed)


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts
    (``text``, ``input_text``, ``output_text``; inspect's ``ContentText``), joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES:
            text = part.get("text")
            texts.append(text if isinstance(text, str) else "")
    return "\n".join(t for t in texts if t)


def _reasoning(content: Any) -> str | None:
    """Reasoning / thinking parts of a content list (Anthropic ``thinking``, inspect's
    ``ContentReasoning``), joined; None when there are none."""
    if not isinstance(content, list):
        return None
    texts = [
        str(part.get("thinking") or part.get("reasoning") or "")
        for part in content
        if isinstance(part, dict) and part.get("type") in ("thinking", "reasoning")
    ]
    joined = "\n".join(t for t in texts if t)
    return joined or None


def tool_call_of(call: Any) -> tuple[str, str] | None:
    """(name, canonical arguments) of one tool call in any of the known shapes."""
    if not isinstance(call, dict):
        return None
    function = call.get("function")
    if isinstance(function, dict):  # OpenAI chat: {"function": {"name", "arguments"}}
        name, arguments = function.get("name"), function.get("arguments")
    elif isinstance(function, str):  # inspect_ai: {"function": "name", "arguments": {...}}
        name, arguments = function, call.get("arguments")
    else:  # tau2 / a recording: {"name", "arguments"}; Anthropic tool_use: {"name", "input"}
        name = call.get("name")
        arguments = call.get("arguments", call.get("input"))
    if not isinstance(name, str):
        return None
    # No arguments at all: not recorded (a record cut by the recording's cap), not "{}".
    return name, "" if arguments is None else canonical_arguments(arguments)


def model_step(message: dict[str, Any], **figures: Any) -> Step:
    """The model turn of one assistant message."""
    content = message.get("content")
    calls = [c for c in (tool_call_of(c) for c in message.get("tool_calls") or []) if c]
    if isinstance(content, list):  # Anthropic content blocks carry the tool uses
        calls += [
            c
            for c in (
                tool_call_of(b)
                for b in content
                if isinstance(b, dict) and b.get("type") in ("tool_use", "server_tool_use")
            )
            if c
        ]
    detail: dict[str, Any] = {}
    reasoning = _reasoning(content) or message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        detail["reasoning"] = reasoning
    return Step("model", 0, content_text(content), calls, detail=detail, **figures)


def steps_from_messages(messages: Any) -> list[Step]:
    """The steps of a conversation given as chat messages (see the module doc for shapes).
    System and developer messages are context, not steps; anything unreadable is skipped."""
    if not isinstance(messages, list):
        return []
    return numbered(_message_steps(messages))


def _message_steps(messages: list[Any]) -> Iterator[Step]:
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            usage = message.get("usage")
            tokens = None
            if isinstance(usage, dict):  # tau2 keeps each turn's usage
                counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens")]
                if any(isinstance(c, int) for c in counts):
                    tokens = sum(c for c in counts if isinstance(c, int))
            yield model_step(message, tokens=tokens)
        elif role == "tool":
            detail = {
                k: message[k]
                for k in ("tool_call_id", "name", "function", "error")
                if message.get(k) is not None
            }
            yield Step("tool_result", 0, content_text(message.get("content")), detail=detail)
        elif role == "user":
            yield from user_steps(message.get("content"))


def user_steps(content: Any) -> Iterator[Step]:
    """A user message: Anthropic ``tool_result`` blocks are tool results, the rest is the
    user's own text (one step)."""
    if isinstance(content, list):
        text_parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                detail = {"tool_call_id": block["tool_use_id"]} if block.get("tool_use_id") else {}
                if block.get("is_error"):
                    detail["error"] = True
                yield Step("tool_result", 0, content_text(block.get("content")), detail=detail)
            else:
                text_parts.append(block)
        if text_parts:
            yield Step("user", 0, content_text(text_parts))
        return
    yield Step("user", 0, content_text(content))


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


# --- keeping an import's trajectories ------------------------------------------------------


def trajectory_from_messages(
    task_id: str, attempt: int, outcome: str | None, messages: Any, source: str
) -> Trajectory | None:
    """An imported attempt's trajectory from its chat messages (tau-bench ``traj``, tau2 and
    inspect_ai ``messages``); None when there are none."""
    if not isinstance(messages, list) or not messages:
        return None
    return Trajectory(task_id, attempt, outcome, steps_from_messages(messages), source)


def redacted(value: Any) -> Any:
    """``value`` with every string in it scrubbed by ``driftdesk.secrets.redact``."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    return value


def write_trajectory(run_dir: Path, traj: Trajectory) -> Path:
    """Keep an imported attempt's trajectory in the run dir (redacted, owner-only): the
    import builds its run dir in a staging folder renamed into place, which is the atomic
    step; these files need none of their own."""
    path = attempt_file(run_dir, traj.task_id, traj.attempt, TRAJECTORY_SUFFIX)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(redacted(traj.to_json()), ensure_ascii=False)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return path
