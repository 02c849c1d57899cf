"""The two agents an attempt can run: the builtin one (talks to the model itself) and the
command one (any harness, run as a subprocess). Both reach the provider only through the
metering proxy, with the run's throwaway key; the real key never reaches them.

This module owns what both share (``AttemptContext``, ``AgentResult``, ``LinkError`` and its
retries) and the builtin agent's conversation loop (OpenAI and Anthropic protocols); the
command agent is ``reruns.command_agent``.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp

from driftdesk.reruns.call_verdicts import error_kind_for
from driftdesk.reruns.proxy_http import PROXY_ERROR_HEADER
from driftdesk.reruns.retry import (
    RetryPolicy,
    is_retryable,
    parse_retry_after,
    too_long_message,
)
from driftdesk.reruns.suites import Task, judge

if TYPE_CHECKING:  # openai is imported lazily: it takes long to import, `run --help` must not
    import openai

T = TypeVar("T")
ANTHROPIC_VERSION = "2023-06-01"
INVALID_RESPONSE = "invalid_response"  # error_code: a body or stream the API does not speak


class LinkError(Exception):
    """The link to the model failed (not the model's answer). ``code`` is the error_code."""

    def __init__(self, code: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s

    @property
    def retryable(self) -> bool:
        return is_retryable(self.code)


@dataclass
class AgentResult:
    outcome: str  # pass | fail | link_error | harness_error
    success: bool | None = None
    score: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    answer: str | None = None


@dataclass
class AttemptContext:
    """Everything one attempt needs; built by the engine."""

    run_id: str
    task: Task
    attempt: int
    model: str
    protocol: str
    api_key: str  # the run's throwaway key, never the real one
    timeout_s: float
    policy: RetryPolicy
    rng: random.Random
    emit_output: Callable[[str, str], None]  # (stream, line)
    on_retry: Callable[[int, str, float], None]  # (retry number, error code, delay)
    secrets: tuple[str, ...] = ()  # scrubbed from any message we keep
    # Variables (names or globs) of ours the harness gets beyond the allow-list: the run's
    # --pass-env, the profile's and the task's pass_env (``providers.harness_env``).
    pass_env: tuple[str, ...] = ()
    retries: int = 0
    log_lines: list[str] = field(default_factory=list)
    result_path: str | None = None  # the command agent's last try's, relative to the run dir

    def log(self, stream: str, text: str) -> None:
        self.log_lines.append(f"[{stream}] {text}")
        self.emit_output(stream, text)

    async def with_retries(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call``, retrying link errors worth retrying (bounded, counted)."""
        while True:
            try:
                return await call()
            except LinkError as exc:
                if not exc.retryable or self.retries >= self.policy.max_retries:
                    raise
                if self.policy.waits_too_long(exc.retry_after_s):
                    self.log("retry", too_long_message(exc.code, exc.retry_after_s, self.policy))
                    raise
                self.retries += 1
                delay = self.policy.delay(self.retries, exc.retry_after_s, self.rng)
                self.log("retry", f"{exc.code}: retry {self.retries} in {delay:.2f}s")
                self.on_retry(self.retries, exc.code, delay)
                await asyncio.sleep(delay)


def link_error_from_openai(exc: Exception) -> LinkError:
    """Map the openai client's exceptions to our error codes."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return LinkError("timeout", f"request timed out: {exc}")
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        proxy_kind = headers.get(PROXY_ERROR_HEADER)
        if proxy_kind == "connection":
            return LinkError("connection", str(exc))
        code = error_kind_for(exc.status_code, exc.response.content or b"")
        return LinkError(code, str(exc), parse_retry_after(dict(headers)))
    if isinstance(exc, openai.APIConnectionError):
        # The proxy breaks the connection of a body the upstream cut short (httpx or the SDK's
        # own httpx2 raise RemoteProtocolError then): that is a truncated answer.
        if type(exc.__cause__).__name__ == "RemoteProtocolError":
            return LinkError("truncated", f"response cut short: {exc.__cause__}")
        return LinkError("connection", f"connection error: {exc}")
    return LinkError("connection", f"{type(exc).__name__}: {exc}")


def _is_transport_error(exc: BaseException) -> bool:
    """An error of the SDK's HTTP transport, raised as is while a stream is read. The SDK
    changed transports (openai 1.x: httpx, 3.x: httpx2), neither of them ours to declare, so the
    error is known by the package that defines it, not by importing it."""
    return any(cls.__module__.split(".")[0] in _TRANSPORT_PACKAGES for cls in type(exc).__mro__)


_TRANSPORT_PACKAGES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2"})


# --- builtin agent ------------------------------------------------------------------------


def _openai_tools(task: Task) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in task.tools
    ]


def _tool_result(task: Task, name: str, raw_arguments: str) -> str:
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError:
        return f"error: arguments are not valid JSON: {raw_arguments!r}"
    for tool in task.tools:
        if tool.name == name:
            return tool.result_for(arguments)
    return f"error: no tool named {name!r}"


def _judged(task: Task, answer: str) -> AgentResult:
    success = judge(task.expected, answer)
    return AgentResult(
        outcome="pass" if success else "fail",
        success=success,
        score=1.0 if success else 0.0,
        answer=answer,
    )


def _final_answer(ctx: AttemptContext, turn: int, answer: str) -> AgentResult:
    """Judge the model's final text; an empty one is the link's fault, not the model's."""
    ctx.log("turn", f"{turn}: answer {answer!r}")
    if not answer.strip():
        raise LinkError("empty_response", "the model returned an empty answer")
    return _judged(ctx.task, answer)


def _out_of_turns(ctx: AttemptContext) -> AgentResult:
    return AgentResult(
        outcome="fail",
        success=False,
        score=0.0,
        error_message=f"no final answer within {ctx.task.max_turns} turns",
    )


async def _openai_turn(
    client: openai.AsyncOpenAI, ctx: AttemptContext, messages: list[dict[str, Any]]
) -> dict[str, Any]:
    """One streamed chat completion; returns the assistant message. Raises ``LinkError``."""
    import openai

    tools = _openai_tools(ctx.task)
    extra: dict[str, Any] = {"tools": tools} if tools else {}
    content: list[str] = []
    tool_calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    try:
        async with asyncio.timeout(ctx.timeout_s):
            # Typed loosely: the SDK's overloads cannot see ``stream=True`` through **kwargs.
            completions: Any = client.chat.completions
            stream = await completions.create(
                model=ctx.model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
            async for chunk in stream:
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta.content:
                        content.append(delta.content)
                    for call in delta.tool_calls or []:
                        slot = tool_calls.setdefault(
                            call.index, {"id": "", "name": "", "arguments": ""}
                        )
                        if call.id:
                            slot["id"] = call.id
                        if call.function and call.function.name:
                            slot["name"] += call.function.name
                        if call.function and call.function.arguments:
                            slot["arguments"] += call.function.arguments
                    if choice.finish_reason:
                        finish = choice.finish_reason
    except TimeoutError:
        raise LinkError("timeout", f"no complete answer within {ctx.timeout_s:g}s") from None
    except openai.OpenAIError as exc:
        raise link_error_from_openai(exc) from None
    except Exception as exc:
        if _is_transport_error(exc):  # the stream broke after the response began
            raise LinkError("truncated", f"the response stream broke: {exc}") from None
        if isinstance(exc, ValueError | TypeError | AttributeError):
            # Not a stream the API speaks (an event that is not JSON, or not a chunk): the
            # provider's answer is broken, whatever the model said. JSONDecodeError is a
            # ValueError.
            raise LinkError(
                INVALID_RESPONSE, f"the response stream is not valid: {type(exc).__name__}: {exc}"
            ) from None
        raise
    if finish is None:
        raise LinkError("truncated", "the response stream ended without a finish_reason")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": c["id"] or f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for i, c in sorted(tool_calls.items())
        ]
    return message


async def run_builtin_openai(
    client: openai.AsyncOpenAI, base_url: str, ctx: AttemptContext
) -> tuple[AgentResult, list[dict[str, Any]]]:
    """Up to ``max_turns`` turns; tools answered from canned results; final answer judged."""
    client = client.with_options(base_url=base_url, api_key=ctx.api_key, max_retries=0)
    messages: list[dict[str, Any]] = [dict(m) for m in ctx.task.messages]
    for turn in range(ctx.task.max_turns):
        message = await ctx.with_retries(lambda: _openai_turn(client, ctx, messages))
        messages.append(message)
        calls = message.get("tool_calls") or []
        if calls:
            for call in calls:
                result = _tool_result(
                    ctx.task, call["function"]["name"], call["function"]["arguments"]
                )
                ctx.log(
                    "turn",
                    f"{turn}: tool {call['function']['name']}({call['function']['arguments']}) -> {result}",
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            continue
        answer = str(message.get("content") or "")
        return _final_answer(ctx, turn, answer), messages
    return _out_of_turns(ctx), messages


async def _anthropic_turn(
    session: aiohttp.ClientSession,
    base_url: str,
    ctx: AttemptContext,
    system: str | None,
    messages: list[dict[str, Any]],
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": ctx.model, "max_tokens": 1024, "messages": messages}
    if system:
        body["system"] = system
    if ctx.task.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in ctx.task.tools
        ]
    headers = {"x-api-key": ctx.api_key, "anthropic-version": ANTHROPIC_VERSION}
    try:
        async with (
            asyncio.timeout(ctx.timeout_s),
            session.post(
                f"{base_url}/v1/messages", json=body, headers=headers, allow_redirects=False
            ) as response,
        ):
            raw = await response.read()
            if response.status >= 300:  # a redirect would lead past the meter: a link error
                if response.headers.get(PROXY_ERROR_HEADER) == "connection":
                    raise LinkError("connection", raw.decode("utf-8", "replace")[:500])
                raise LinkError(
                    error_kind_for(response.status, raw),
                    f"HTTP {response.status}: {raw.decode('utf-8', 'replace')[:500]}",
                    parse_retry_after(dict(response.headers)),
                )
    except TimeoutError:
        raise LinkError("timeout", f"no complete answer within {ctx.timeout_s:g}s") from None
    except aiohttp.ClientPayloadError as exc:
        raise LinkError("truncated", f"response body cut short: {exc}") from None
    except aiohttp.ClientError as exc:
        raise LinkError("connection", f"{type(exc).__name__}: {exc}") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise LinkError("truncated", "the response body is not complete JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise LinkError("truncated", "the response has no content blocks")
    return data


async def run_builtin_anthropic(
    session: aiohttp.ClientSession, base_url: str, ctx: AttemptContext
) -> tuple[AgentResult, list[dict[str, Any]]]:
    """The same loop over the Anthropic Messages API (no SDK needed)."""
    system = "\n".join(str(m["content"]) for m in ctx.task.messages if m.get("role") == "system")
    messages: list[dict[str, Any]] = [
        dict(m) for m in ctx.task.messages if m.get("role") != "system"
    ]
    for turn in range(ctx.task.max_turns):
        data = await ctx.with_retries(
            lambda: _anthropic_turn(session, base_url, ctx, system or None, messages)
        )
        blocks = data["content"]
        messages.append({"role": "assistant", "content": blocks})
        uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if uses:
            results = []
            for use in uses:
                result = _tool_result(
                    ctx.task, str(use.get("name")), json.dumps(use.get("input") or {})
                )
                ctx.log("turn", f"{turn}: tool {use.get('name')}({use.get('input')}) -> {result}")
                results.append(
                    {"type": "tool_result", "tool_use_id": use.get("id"), "content": result}
                )
            messages.append({"role": "user", "content": results})
            continue
        answer = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        return _final_answer(ctx, turn, answer), messages
    return _out_of_turns(ctx), messages


async def run_builtin(
    protocol: str,
    base_url: str,
    ctx: AttemptContext,
    *,
    openai_client: openai.AsyncOpenAI | None,
    http: aiohttp.ClientSession | None,
    on_crash: Callable[[Exception], None],
) -> tuple[AgentResult, list[dict[str, Any]] | None]:
    """The builtin agent's attempt as a result: a link error it gave up on is a link_error, a
    bug in the agent a harness_error (``on_crash`` gets the exception, to log it)."""
    try:
        if protocol == "anthropic":
            assert http is not None
            return await run_builtin_anthropic(http, base_url, ctx)
        assert openai_client is not None
        return await run_builtin_openai(openai_client, base_url, ctx)
    except LinkError as exc:
        return AgentResult("link_error", error_code=exc.code, error_message=exc.message), None
    except Exception as exc:  # a bug in the agent is a harness error, not the model's
        on_crash(exc)
        return AgentResult(
            "harness_error",
            error_code="harness_crash",
            error_message=f"{type(exc).__name__}: {exc}",
        ), None


# --- command agent ------------------------------------------------------------------------
