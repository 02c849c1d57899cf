"""Tasks that change files: a fresh copy of the task's workspace per attempt, an optional
``setup`` before the agent, a ``check`` after it, and the final workspace diff.

A suite line may carry ``workspace`` (a folder relative to the suite file), ``setup`` and
``check`` (shell commands run in the attempt's copy). The copy lives in the attempt's own
folder (``<attempt>.workspace``, see ``driftdesk.rundir.layout``); two attempts never share one, and a
retried try starts from a fresh copy. The check decides the outcome (``check_outcome``): exit
0 → pass, 1–124 → fail, 125 ("could not judge"), 126 and above (it could not run, or a signal
killed it) and the task's ``check_error_codes`` → harness_error ``check_error``, a timeout →
``check_timeout``; its output goes to the attempt's log and ``<attempt>.check.txt``. The diff against the starting state (after setup) goes to
``<attempt>.diff``, ``git diff --no-index`` style, capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from driftdesk.reruns.agents import AgentResult, AttemptContext
from driftdesk.reruns.command_agent import child_environment
from driftdesk.reruns.isolation import isolate_argv
from driftdesk.reruns.suites import Task
from driftdesk.rundir import (
    CHECK_OUTPUT_SUFFIX,
    WORKSPACE_DIFF_SUFFIX,
    WORKSPACE_SUFFIX,
    attempt_file,
    open_private,
)
from driftdesk.secrets import redact

MAX_DIFF_BYTES = 256 * 1024
MAX_CHECK_OUTPUT_BYTES = 64 * 1024
ANSWER_ENV = "DRIFTDESK_ANSWER"  # the agent's final answer, for checks that judge it


@dataclass
class StepRun:
    """One ``setup`` or ``check`` run: its exit code (None when killed at the timeout)."""

    returncode: int | None
    output: str
    timed_out: bool


@dataclass
class AttemptWorkspace:
    """The files of one attempt's workspace: the copy, the check's output and the diff."""

    path: Path
    check_output: Path
    diff: Path
    source: Path | None  # the suite's folder (None: the task starts from an empty folder)
    baseline: Path | None = None  # a copy taken after setup, when there is one
    # --isolate: the check and the diff run under bubblewrap too (they read what the isolated
    # harness wrote, and the check runs code it may have rewritten); setup, before it, not.
    isolate: bool = False

    def sandboxed(self, argv: list[str], readable: list[Path]) -> list[str] | None:
        """``argv`` under bubblewrap, writing the workspace copy only; None: not isolated."""
        if not self.isolate:
            return None
        return isolate_argv(
            argv, writable=[self.path], cwd=self.path, conceal=self.path.parent, readable=readable
        )


def step_environment(real_key: str, run_id: str, pass_env: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of ``setup`` and ``check``: the harness's (no key, no keyring, marked as
    a run's child) without the provider URL and key: they judge files, they call no model."""
    env = child_environment("openai", "", "", real_key, {}, run_id=run_id, pass_env=pass_env)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.pop(name, None)
    return env


def uses_workspace(task: Task) -> bool:
    return task.workspace is not None or task.check is not None or task.setup is not None


def prepare(run_dir: Path, task: Task, attempt: int) -> AttemptWorkspace:
    """A fresh copy of the task's workspace in the attempt's folder (an empty folder when the
    task has none); anything left there by an earlier try is removed first."""
    # Absolute: the agent is started with ``cd <path>``, and --out may be relative.
    run_dir = Path(run_dir).resolve()
    path = attempt_file(run_dir, task.task_id, attempt, WORKSPACE_SUFFIX)
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if task.workspace is not None:
        shutil.copytree(task.workspace, path, symlinks=True)
    else:
        path.mkdir()
    return AttemptWorkspace(
        path=path,
        check_output=attempt_file(run_dir, task.task_id, attempt, CHECK_OUTPUT_SUFFIX),
        diff=attempt_file(run_dir, task.task_id, attempt, WORKSPACE_DIFF_SUFFIX),
        source=task.workspace,
    )


async def run_step(
    command: str,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    argv: list[str] | None = None,
) -> StepRun:
    """Run a shell command in ``cwd`` in its own process group; kill the group at the timeout.
    ``argv``: the command as run instead (under bubblewrap)."""
    process = await asyncio.create_subprocess_exec(
        *(argv or ["/bin/sh", "-c", command]),
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    try:
        async with asyncio.timeout(timeout_s):
            raw, _ = await process.communicate()
    except TimeoutError:
        timed_out = True
        raw = b""
    finally:
        if process.returncode is None or timed_out:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await process.wait()
    text = raw[:MAX_CHECK_OUTPUT_BYTES].decode("utf-8", "replace")
    if len(raw) > MAX_CHECK_OUTPUT_BYTES:
        text += f"\n[driftdesk] output cut at {MAX_CHECK_OUTPUT_BYTES} bytes of {len(raw)}\n"
    return StepRun(None if timed_out else process.returncode, text, timed_out)


async def setup(
    ws: AttemptWorkspace, task: Task, env: dict[str, str], timeout_s: float
) -> AgentResult | None:
    """Run the task's ``setup`` in the copy; a harness_error result if it failed. A baseline
    copy is taken after it, so the diff shows the agent's changes only."""
    if task.setup is None:
        return None
    step = await run_step(task.setup, ws.path, env, timeout_s)
    if step.timed_out or step.returncode != 0:
        status = "timed out" if step.timed_out else f"exited with {step.returncode}"
        return AgentResult(
            "harness_error",
            error_code="setup_failed",
            error_message=f"setup {status}: {step.output[-500:]}",
        )
    baseline = Path(tempfile.mkdtemp(prefix="driftdesk-baseline-"))
    shutil.rmtree(baseline)
    shutil.copytree(ws.path, baseline, symlinks=True)
    ws.baseline = baseline
    return None


# The rule that turns a check's exit into an outcome, as the manifest's ``check_rule`` names
# it. "exit-v1" (runs without ``check_rule``): 0 pass, 1 fail, anything else check_error;
# a model failure the check reported as 2 (grep on a missing file) left the denominator.
CHECK_RULE = "exit-v2"
OLD_CHECK_RULE = "exit-v1"
CANNOT_JUDGE = 125  # as ``git bisect run``: the check could not tell


def check_outcome(step: StepRun, error_codes: tuple[int, ...] = ()) -> AgentResult:
    """``CHECK_RULE``: exit 0 → pass; 1–124 → fail; 125, 126 and above (it could not start,
    or a signal killed it: ``sh`` says 128+N, Python a negative code) and the task's own
    ``error_codes`` → harness_error check_error; the timeout → harness_error check_timeout."""
    if step.timed_out or step.returncode is None:
        return AgentResult(
            "harness_error", error_code="check_timeout", error_message="the check timed out"
        )
    code = step.returncode
    if code == 0:
        return AgentResult("pass", success=True, score=1.0)
    if 0 < code < CANNOT_JUDGE and code not in error_codes:
        return AgentResult("fail", success=False, score=0.0, error_message=_tail(step.output))
    return AgentResult(
        "harness_error",
        error_code="check_error",
        error_message=f"the check {_why_unjudged(code)}: {_tail(step.output)}",
    )


def _why_unjudged(code: int) -> str:
    if code < 0:
        return f"was killed by signal {-code}"
    if code > 128:
        return f"exited with {code} (killed by signal {code - 128})"
    if code in (126, 127):
        return f"exited with {code} (it could not run)"
    return f"exited with {code} (it could not judge)"


def _tail(text: str, size: int = 500) -> str:
    return text[-size:].strip()


async def check(
    ws: AttemptWorkspace,
    task: Task,
    env: dict[str, str],
    timeout_s: float,
    secrets: tuple[str, ...],
    answer: str | None = None,
) -> tuple[AgentResult, StepRun]:
    """Run the task's check in the copy; write its output beside the attempt's log."""
    assert task.check is not None
    step_env = dict(env)
    if answer is not None:
        step_env[ANSWER_ENV] = answer
    readable = [ws.source] if ws.source is not None else []
    argv = ws.sandboxed(["/bin/sh", "-c", task.check], readable)
    step = await run_step(task.check, ws.path, step_env, timeout_s, argv)
    status = "killed at the timeout" if step.timed_out else f"exit code {step.returncode}"
    step.output = redact(step.output, secrets)
    with open_private(ws.check_output, "w") as fh:
        fh.write(f"$ {task.check}\n{step.output}[driftdesk] check {status}\n")
    return check_outcome(step, task.check_error_codes), step


async def begin(
    run_dir: Path,
    task: Task,
    attempt: int,
    env: dict[str, str],
    timeout_s: float,
    *,
    isolate: bool = False,
) -> tuple[AttemptWorkspace | None, AgentResult | None]:
    """For a task with a workspace, setup or check: its fresh copy, set up (and the
    harness_error result when setup failed). ``(None, None)`` for a plain answer task.
    ``isolate``: its check and diff run under bubblewrap (``AttemptWorkspace.isolate``)."""
    if not uses_workspace(task):
        return None, None
    ws = await asyncio.to_thread(prepare, run_dir, task, attempt)
    ws.isolate = isolate
    return ws, await setup(ws, task, env, timeout_s)


async def conclude(
    ws: AttemptWorkspace | None,
    ctx: AttemptContext,
    result: AgentResult,
    env: dict[str, str],
    log: Callable[[str], None],
) -> AgentResult:
    """After the agent: when it ended judged (pass/fail) and the task has a check, the check
    decides (its output also goes to ``log``, line by line); the diff is written either way."""
    task = ctx.task
    if ws is None:
        return result
    try:
        if task.check is not None and result.outcome in ("pass", "fail"):
            checked, _ = await check(ws, task, env, ctx.timeout_s, ctx.secrets, result.answer)
            for line in ws.check_output.read_text("utf-8", "replace").splitlines():
                log(line)
            checked.answer = result.answer
            result = checked
    finally:
        await asyncio.to_thread(write_diff, ws)
    return result


def write_diff(ws: AttemptWorkspace) -> None:
    """The final workspace against its start, as ``git diff --no-index`` prints it (difflib
    when git is missing), capped at ``MAX_DIFF_BYTES``. Always removes the baseline copy."""
    try:
        with tempfile.TemporaryDirectory(prefix="driftdesk-empty-") as empty:
            before = ws.baseline or ws.source or Path(empty)
            text = _git_diff(before, ws.path, ws)
            if text is None:
                text = _difflib_diff(before, ws.path)
    finally:
        if ws.baseline is not None:
            shutil.rmtree(ws.baseline, ignore_errors=True)
            ws.baseline = None
    raw = text.encode("utf-8", "replace")
    if len(raw) > MAX_DIFF_BYTES:
        text = raw[:MAX_DIFF_BYTES].decode("utf-8", "ignore")
        text += f"\n[driftdesk] diff cut at {MAX_DIFF_BYTES} bytes of {len(raw)}\n"
    with open_private(ws.diff, "w") as fh:
        fh.write(text)


def _git_diff(before: Path, after: Path, ws: AttemptWorkspace) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        command = [git, "diff", "--no-index", "--no-color", "--no-ext-diff", "--no-renames"]
        argv = [*command, str(before), str(after)]
        done = subprocess.run(
            ws.sandboxed(argv, [before]) or argv,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 1):
        return None
    text = done.stdout.decode("utf-8", "replace")
    # Paths relative to the workspace: a/<file> b/<file>, as in a repository. An added (or
    # removed) file is named by the one side that has it, on both sides: either root goes.
    for prefix in ("a", "b"):
        for root in (before, after):
            text = text.replace(f"{prefix}{root}/", f"{prefix}/")
    return text


def _difflib_diff(before: Path, after: Path) -> str:
    def files(root: Path) -> dict[str, Path]:
        # Never through a symlink: the harness may point one anywhere the user can read.
        return {
            p.relative_to(root).as_posix(): p
            for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()
        }

    old, new = files(before), files(after)
    out: list[str] = []
    for name in sorted(set(old) | set(new)):
        a = old[name].read_text("utf-8", "replace").splitlines(True) if name in old else []
        b = new[name].read_text("utf-8", "replace").splitlines(True) if name in new else []
        if a != b:
            out.extend(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}"))
    return "".join(out)


def file_log(log_path: Path, ctx: AttemptContext) -> Callable[[str], None]:
    """Check output for a harness's log file (and the live view), tagged ``[check]``."""

    def log(line: str) -> None:
        with open_private(log_path, "a") as fh:
            fh.write(f"[check] {line}\n")
        ctx.emit_output("check", line)

    return log
