"""The two agents an attempt can run: the builtin one (talks to the model itself) and the
command one (any harness, run as a subprocess). Both reach the provider only through the
metering proxy, with the run's throwaway key; the real key never reaches them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import shlex
import signal
import stat
import string
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp

from driftdesk.providers.harness_env import harness_base_environment
from driftdesk.reruns.call_verdicts import error_kind_for
from driftdesk.reruns.proxy import PROXY_ERROR_HEADER, AttemptCalls
from driftdesk.reruns.retry import (
    RetryPolicy,
    is_retryable,
    parse_retry_after,
    too_long_message,
)
from driftdesk.reruns.suites import Task, judge
from driftdesk.rundir import open_private
from driftdesk.secrets import redact, secret_spans

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


COMMAND_PLACEHOLDERS = ("task_id", "attempt", "run_id", "model", "result_path", "prompt_file")


def template_fields(template: str) -> set[str]:
    """The placeholders a command template uses (``{{``/``}}`` are literal braces)."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name}
    except ValueError:
        return set()


def render_command(template: str, values: dict[str, str]) -> str:
    """Fill ``{task_id}`` ``{attempt}`` ``{run_id}`` ``{model}`` ``{result_path}``
    ``{prompt_file}``, shell-quoted. A literal brace is written ``{{`` or ``}}``."""
    quoted = {k: shlex.quote(v) for k, v in values.items()}
    try:
        return template.format(**quoted)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        what = (
            f"unknown placeholder {{{exc.args[0]}}}"
            if isinstance(exc, KeyError)
            else f"{type(exc).__name__}: {exc}"
        )
        raise ValueError(
            f"bad command template ({what}); placeholders are "
            + " ".join("{" + k + "}" for k in values)
            + "; write a literal brace as {{ or }} (e.g. echo '{{\"success\": true}}')"
        ) from None


MAX_PROMPT_IN_ENV = 32 * 1024  # bytes; a longer prompt reaches a harness only by its file


def command_for_try(
    template: str,
    ctx: AttemptContext,
    *,
    run_dir: Path,
    result_path: Path,
    prompt_path: Path,
    workspace: Path | None,
) -> tuple[str, dict[str, str]]:
    """One try's shell command (run in the attempt's workspace copy, if any) and the
    ``DRIFTDESK_*`` variables the harness gets; the same on this machine and on a Ray node."""
    command = render_command(
        template,
        {
            "task_id": ctx.task.task_id,
            "attempt": str(ctx.attempt),
            "run_id": ctx.run_id,
            "model": ctx.model,
            "result_path": str(result_path),
            "prompt_file": str(prompt_path),
        },
    )
    if workspace is not None:  # the harness works in the attempt's own copy
        command = f"cd {shlex.quote(str(workspace))} && {command}"
    extra = {
        "DRIFTDESK_RUN_ID": ctx.run_id,
        RUN_DIR_ENV: str(Path(run_dir).absolute()),
        "DRIFTDESK_TASK_ID": ctx.task.task_id,
        "DRIFTDESK_ATTEMPT": str(ctx.attempt),
        "DRIFTDESK_MODEL": ctx.model,
        "DRIFTDESK_RESULT_PATH": str(result_path),
        "DRIFTDESK_PROMPT_FILE": str(prompt_path),
    }
    # One environment string is limited to 128 KiB by the kernel (E2BIG for the whole exec):
    # a long prompt is only in the file.
    if len(ctx.task.prompt_text.encode("utf-8")) <= MAX_PROMPT_IN_ENV:
        extra["DRIFTDESK_PROMPT"] = ctx.task.prompt_text
    return command, extra


# Set in every harness's environment; ``driftdesk key`` refuses to print a key when it is set.
RUN_CHILD_ENV = "DRIFTDESK_RUN_CHILD"
RUN_DIR_ENV = "DRIFTDESK_RUN_DIR"  # the run dir (absolute), in every harness's environment


def child_environment(
    protocol: str,
    proxy_base_url: str,
    throwaway_key: str,
    real_key: str,
    extra: dict[str, str],
    *,
    run_id: str,
    pass_env: Iterable[str] = (),
) -> dict[str, str]:
    """The harness's environment, built from an allow-list (``providers.harness_env``: what a
    shell and the client need) plus what ``pass_env`` names (the run's ``--pass-env``, the
    profile's and the task's ``pass_env``), never a way to the keyring nor a value holding the
    real key; then the proxy's URL, the try's throwaway key, ``extra`` and
    ``DRIFTDESK_RUN_CHILD=<run_id>``."""
    env = harness_base_environment(pass_env, real_key)
    if protocol == "anthropic":
        env["ANTHROPIC_BASE_URL"] = proxy_base_url
        env["ANTHROPIC_API_KEY"] = throwaway_key
    else:
        env["OPENAI_BASE_URL"] = proxy_base_url
        env["OPENAI_API_KEY"] = throwaway_key
    env.update(extra)
    env[RUN_CHILD_ENV] = run_id
    return env


GUARD_SCRIPT = Path(__file__).with_name("guard.py")
EXIT_CANNOT_START = 127  # as a shell reports a command it cannot run
_GUARD_GRACE_S = 2.0  # the guard's time to kill the harness's tree before we kill the group


def guarded_argv(argv: list[str]) -> list[str]:
    """``argv`` run under the guard (reruns/guard.py): it dies with driftdesk, reaps whatever
    the harness left (a subreaper), and ends the attempt when the harness exits."""
    return [sys.executable, "-I", "-S", str(GUARD_SCRIPT), str(os.getpid()), "--", *argv]


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _stop_guarded(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the guard (it kills the harness's whole tree, daemons included), then SIGKILL
    the process group if it has not gone within the grace."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_GUARD_GRACE_S):
                await process.wait()
    _kill_group(process)


def kill_leftover_harnesses(run_id: str, run_dir: Path) -> int:
    """Kill every process of ours still carrying ``DRIFTDESK_RUN_CHILD=<run_id>`` and
    ``DRIFTDESK_RUN_DIR=<run_dir>`` (two run dirs may share a run id): what a run that died
    with no chance to clean up (its guard killed too) left behind. Returns how many. A process
    that scrubbed its environment and re-executed is beyond this (see the threat model in
    docs/ARCHITECTURE.md)."""
    # As the child's environment holds them: a path's bytes that are no UTF-8 included.
    needle = os.fsencode(f"{RUN_CHILD_ENV}={run_id}")
    where = os.fsencode(f"{RUN_DIR_ENV}={Path(run_dir).absolute()}")
    me, uid, killed = os.getpid(), os.getuid(), 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/environ", "rb") as fh:
                variables = fh.read().split(b"\0")
        except OSError:
            continue
        if needle in variables and where in variables:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(name), signal.SIGKILL)
                killed += 1
    return killed


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Stop the guarded harness (its whole tree) and wait until its pipes are closed."""
    await _stop_guarded(process)
    with contextlib.suppress(ProcessLookupError):
        await process.wait()


MAX_LOGGED_LINE = 8 * 1024  # bytes of one output line kept in the log and the live views
MAX_LOG_BYTES = 4 * 1024 * 1024  # output of one try kept in the attempt's log (then counted)
_READ_SIZE = 64 * 1024


def _drop_secret_start(text: str, secrets: tuple[str, ...]) -> str:
    """A line cut short may end with the first characters of a secret: drop them too."""
    for secret in secrets:
        if not secret or len(secret) < 4:
            continue
        for size in range(min(len(secret), len(text)), 3, -1):
            if text.endswith(secret[:size]):
                return text[:-size]
    return text


@dataclass
class _LogBudget:
    """What one try may still write to the attempt's log; past it, output is only counted."""

    left: int = MAX_LOG_BYTES
    dropped_lines: int = 0
    dropped_bytes: int = 0

    @property
    def spent(self) -> bool:
        return self.left <= 0


async def _pump(
    stream: asyncio.StreamReader | None,
    name: str,
    ctx: AttemptContext,
    log: Any,
    budget: _LogBudget | None = None,
) -> None:
    """Log and emit the stream line by line. Read in chunks, not ``readline`` (whose 64 KiB
    limit raises on a longer line): a line over ``MAX_LOGGED_LINE`` bytes keeps its start
    and a note of its length, and once ``budget`` is spent further output is only counted,
    so any output a harness prints costs bounded memory and disk."""
    if stream is None:
        return
    budget = budget if budget is not None else _LogBudget()

    def emit(line: bytes, size: int) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r")
        if size > len(line):
            text = _drop_secret_start(text, ctx.secrets) + f" [line truncated: {size} bytes]"
        text = redact(text, ctx.secrets)
        entry = f"[{name}] {text}\n"
        budget.left -= len(entry)
        log.write(entry)
        if budget.spent:
            log.write(
                f"[driftdesk] log capped at {MAX_LOG_BYTES} bytes for this try: "
                "further output is counted, not kept\n"
            )
        log.flush()
        ctx.emit_output(name, text)

    line = bytearray()  # the current line's kept start
    size = 0  # the current line's full length so far
    while True:
        chunk = await stream.read(_READ_SIZE)
        if not chunk:
            break
        if budget.spent:
            budget.dropped_lines += chunk.count(b"\n")
            budget.dropped_bytes += len(chunk)
            continue
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            size += len(piece)
            room = MAX_LOGGED_LINE - len(line)
            if room > 0:
                line += piece[:room]
            if end < 0:
                break
            emit(bytes(line), size)
            line.clear()
            size = 0
            start = end + 1
            if budget.spent:
                rest = chunk[start:]
                budget.dropped_lines += rest.count(b"\n")
                budget.dropped_bytes += len(rest)
                break
    if size and not budget.spent:
        emit(bytes(line), size)


@dataclass
class CommandTry:
    returncode: int | None
    timed_out: bool
    call_in_flight_at_timeout: bool


async def run_command_once(
    command: str,
    env: dict[str, str],
    log_path: Path,
    ctx: AttemptContext,
    calls: AttemptCalls,
    *,
    argv: list[str] | None = None,
) -> CommandTry:
    """Run the harness once (``argv``, or ``command`` through ``/bin/sh -c``) under the guard,
    in its own process group. The harness's exit ends the try (the guard kills what it left
    behind); at the timeout or on cancel the whole tree is killed."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open_private(log_path, "a") as log:
        log.write(f"$ {command}\n")
        log.flush()
        log_start = log.tell()
        try:
            process = await asyncio.create_subprocess_exec(
                *guarded_argv(argv if argv is not None else ["/bin/sh", "-c", command]),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                stdin=asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:  # e.g. E2BIG: this attempt's error, not the run's
            log.write(f"[driftdesk] cannot start the harness: {exc}\n")
            return CommandTry(EXIT_CANNOT_START, False, False)
        budget = _LogBudget()
        pumps = asyncio.gather(
            _pump(process.stdout, "stdout", ctx, log, budget),
            _pump(process.stderr, "stderr", ctx, log, budget),
        )
        timed_out = False
        in_flight = False
        try:
            async with asyncio.timeout(ctx.timeout_s):
                await process.wait()
        except TimeoutError:
            timed_out = True
            in_flight = calls.in_flight > 0
            await _stop_guarded(process)
        except BaseException:
            pumps.cancel()
            # Finish the clean-up even if cancelled again meanwhile (a run cancels its
            # workers twice): a subprocess transport left open is closed by the garbage
            # collector after the loop, printing "Event loop is closed" tracebacks.
            cleanup = asyncio.ensure_future(_reap(process))
            while not cleanup.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(cleanup)
            with contextlib.suppress(BaseException):
                await pumps  # retrieved: no "exception was never retrieved" at exit
            raise
        # The guard is gone, and with it every process of the harness: the pipes close at
        # once. A process that escaped the guard's tree cannot hold the attempt for long.
        try:
            async with asyncio.timeout(2.0):
                await pumps
        except TimeoutError:
            _kill_group(process)
            pumps.cancel()
            with contextlib.suppress(BaseException):
                await pumps
        if budget.dropped_bytes:
            log.write(
                f"[driftdesk] not logged: {budget.dropped_lines} more lines "
                f"({budget.dropped_bytes} bytes) past the {MAX_LOG_BYTES}-byte cap\n"
            )
        if timed_out:
            log.write(f"[driftdesk] killed after {ctx.timeout_s:g}s (process tree)\n")
        else:
            log.write(f"[driftdesk] exit code {process.returncode}\n")
    await asyncio.to_thread(redact_log_streams, log_path, log_start, ctx.secrets)
    return CommandTry(process.returncode, timed_out, in_flight)


def redact_log_streams(
    log_path: Path,
    start: int,
    secrets: tuple[str, ...],
    labels: tuple[str, ...] = ("[stdout] ", "[stderr] "),
) -> None:
    """Each output line was redacted alone (and logged at once): a secret a harness printed
    over several lines (``base64``'s 76 columns, ``xxd -p``'s 60) is found in each stream's
    lines since ``start`` joined, and masked where it lies in the log. A stream is the lines
    starting with one of ``labels`` (``("",)``: every line, one stream)."""
    if not secrets:
        return
    with open(log_path, "rb") as fh:
        fh.seek(start)
        text = fh.read().decode("utf-8", "surrogateescape")
    edits: list[tuple[int, int, str]] = []
    for label in labels:
        pieces: list[str] = []
        places: list[tuple[int, int]] = []  # each piece: where it starts, joined and in text
        joined_at = line_at = 0
        for line in text.split("\n"):
            if line.startswith(label):
                pieces.append(line[len(label) :])
                places.append((joined_at, line_at + len(label)))
                joined_at += len(line) - len(label) + 1
            line_at += len(line) + 1
        for first, end, mask in secret_spans("\n".join(pieces), secrets):
            for (joined, at), piece in zip(places, pieces, strict=True):
                low, high = max(first, joined), min(end, joined + len(piece))
                if low < high:  # the mask where the secret starts, the rest of it dropped
                    edits.append((at + low - joined, at + high - joined, mask))
                    mask = ""
    if not edits:
        return
    out, done = [], 0
    for first, end, mask in sorted(edits):
        if first < done:  # overlaps a span already masked: that one grows
            done = max(done, end)
            continue
        out += [text[done:first], mask]
        done = end
    out.append(text[done:])
    with open(log_path, "r+b") as fh:
        fh.seek(start)
        fh.write("".join(out).encode("utf-8", "surrogateescape"))
        fh.truncate()


MAX_RESULT_BYTES = 1024 * 1024
_ERROR_CODE_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _no_result(message: str) -> AgentResult:
    return AgentResult("harness_error", error_code="no_result", error_message=message)


def read_result_file(result_path: Path) -> AgentResult | None:
    """The harness's own verdict from its result file, or None when there is no file.

    ``{"success": bool, "score": float?}`` → pass/fail; ``{"error_code": "429"}`` (or
    ``"empty_response"``, …; ``"error_message"`` optional) → link_error with that code;
    anything else (not JSON, a directory, too big…) → harness_error ``no_result``."""
    try:
        # Never through a symlink (to a file of the user's) nor blocked on a FIFO: the harness
        # owns the folder the result file is in.
        fd = os.open(result_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _no_result(f"the result path {result_path} is a symlink, not a file")
        return _no_result(f"the result file cannot be read: {exc.strerror or exc}")
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(kind) else "no regular file"
        return _no_result(f"the result path {result_path} is {what}, not a file")
    with os.fdopen(fd, "rb") as fh:
        try:
            raw = fh.read(MAX_RESULT_BYTES + 1)
        except OSError as exc:
            return _no_result(f"the result file cannot be read: {exc.strerror or exc}")
    if len(raw) > MAX_RESULT_BYTES:
        return _no_result(f"the result file is over {MAX_RESULT_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return _no_result(f"result file is not JSON: {exc}")
    if not isinstance(data, dict):
        return _no_result('result file is not a JSON object with "success" or "error_code"')
    code = data.get("error_code")
    if code is not None:
        code = str(code) if isinstance(code, int | str) and not isinstance(code, bool) else ""
        if not code or len(code) > 64 or not set(code) <= _ERROR_CODE_CHARS:
            return _no_result('"error_code" must be a short code such as "429" or "timeout"')
        said = data.get("error_message")
        return AgentResult(
            "link_error",
            error_code=code,
            error_message=str(said) if said else "the harness reported a link error",
        )
    if isinstance(data.get("success"), bool):
        score = data.get("score")
        return AgentResult(
            "pass" if data["success"] else "fail",
            success=data["success"],
            score=float(score) if isinstance(score, int | float) else None,
        )
    return _no_result('result file lacks a boolean "success" (or an "error_code")')


def command_outcome(
    result_path: Path, attempt_try: CommandTry, calls: AttemptCalls, *, uses_result_path: bool
) -> AgentResult:
    """Outcome of one try of a command.

    1. The result file (``read_result_file``): the harness's verdict, or its link error.
    2. Else, if the proxy saw the harness's last call fail (or a call was in flight when the
       timeout hit) → link_error with that call's error kind.
    3. Else killed at the timeout → harness_error ``timeout``.
    4. Else, when the template uses ``{result_path}``, exit 0 or 1 without a result file →
       harness_error ``no_result`` (never a pass); other codes → ``harness_crash``.
       A template without ``{result_path}`` is judged by its exit code: 0 → pass, 1 → fail,
       anything else → harness_error ``harness_crash``.
    """
    verdict = read_result_file(result_path)
    if verdict is not None:
        return verdict
    if attempt_try.timed_out and attempt_try.call_in_flight_at_timeout:
        return AgentResult(
            "link_error",
            error_code="timeout",
            error_message="a provider call was still pending at the timeout",
        )
    last = calls.calls[-1] if calls.calls else None
    if last is not None and last.get("error_kind") and last["error_kind"] != "client_closed":
        return AgentResult(
            "link_error",
            error_code=str(last["error_kind"]),
            error_message=f"last provider call {last['path']} failed: {last['error_kind']}",
        )
    if attempt_try.timed_out:
        return AgentResult(
            "harness_error",
            error_code="timeout",
            error_message="the command ran past the timeout and was killed",
        )
    if uses_result_path and attempt_try.returncode in (0, 1):
        return _no_result(
            f"the command exited {attempt_try.returncode} without writing its result file "
            f"{result_path}"
        )
    if attempt_try.returncode == 0:
        return AgentResult("pass", success=True)
    if attempt_try.returncode == 1:
        return AgentResult("fail", success=False)
    return AgentResult(
        "harness_error",
        error_code="harness_crash",
        error_message=f"the command exited with {attempt_try.returncode}",
    )
