"""The command agent: any harness, run as a subprocess per try. This module owns the command
template and its placeholders, the harness's environment (allow-listed, with the run's
throwaway key and its ``DRIFTDESK_*`` variables), the guard process and the killing of a try's
process group, the pumping of its output into the attempt's bounded, redacted log, and the
reading of its result file into an ``AgentResult``. The builtin agent is ``reruns.agents``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shlex
import signal
import stat
import string
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.providers.harness_env import harness_base_environment
from driftdesk.reruns.agents import AgentResult, AttemptContext
from driftdesk.reruns.proxy import AttemptCalls
from driftdesk.rundir import open_private
from driftdesk.secrets import redact, secret_spans

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
