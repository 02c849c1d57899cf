"""Harness presets: the real Claude Code and Codex CLIs as agents (``--agent claude-code`` /
``--agent codex``), run headless once per (task, attempt) try.

Each try: a fresh copy of the task's workspace as the working directory
(``driftdesk.reruns.workspace``), a fresh config dir written by driftdesk
(``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME``, so the user's own ``~/.claude/settings.json`` or
``~/.codex/config.toml`` can neither redirect the client nor hand it a key), the run's metering
proxy and throwaway key in the environment, the client's telemetry, auto-update and
non-essential traffic off, and its own retries off (driftdesk retries a link error by rerunning
the whole try from a fresh workspace, counted in the row). The client's native result is read
back (Claude Code ``-p --output-format json``; Codex ``exec --json`` events) and its own token
counts are recorded beside the proxy-metered ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.reruns import workspace
from driftdesk.reruns.agents import AgentResult, AttemptContext
from driftdesk.reruns.command_agent import CommandTry, child_environment, run_command_once
from driftdesk.reruns.isolation import isolate_argv
from driftdesk.reruns.proxy import AttemptCalls, MeteringProxy
from driftdesk.reruns.suites import Task, judge
from driftdesk.reruns.tries import link_failure_overrides, retry_the_try
from driftdesk.rundir import CLIENT_HOME_SUFFIX, CLIENT_OUTPUT_SUFFIX, attempt_file, open_private
from driftdesk.secrets import redact

# Client tools the non-interactive Claude Code run may use without asking: a throwaway
# workspace, so editing and running commands there is what the task is for.
CLAUDE_ALLOWED_TOOLS = "Bash,Edit,Write,Read,Glob,Grep,LS,MultiEdit,NotebookEdit,TodoWrite"


class PresetUnavailable(RuntimeError):
    """The client a preset drives is not installed (the message says what to install)."""


@dataclass
class ClientReport:
    """What the client itself said about its run."""

    found: bool = False  # a native result was read at all
    answer: str | None = None
    is_error: bool = False
    error: str | None = None
    turns: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None


@dataclass(frozen=True)
class ClientPreset:
    name: str  # the --agent value
    executable: str
    package: str  # npm package
    protocol: str  # the profile protocol the client speaks

    @property
    def install_hint(self) -> str:
        return f"npm install -g {self.package}"

    def locate(self) -> str:
        found = shutil.which(self.executable)
        if found is None:
            raise PresetUnavailable(
                f"--agent {self.name} needs the `{self.executable}` command on PATH; install it "
                f"with: {self.install_hint}"
            )
        return found

    def check_profile(self, protocol: str) -> str | None:
        if protocol != self.protocol:
            return (
                f"--agent {self.name} speaks the {self.protocol} protocol; the profile is "
                f"{protocol!r} (use a profile with --protocol {self.protocol})"
            )
        return None

    # Per-client parts, overridden below.
    def write_config(self, home: Path, proxy_url: str, model: str) -> None:
        raise NotImplementedError

    def environment(self, home: Path, model: str) -> dict[str, str]:
        raise NotImplementedError

    def argv(self, executable: str, prompt: str, model: str) -> list[str]:
        raise NotImplementedError

    def read_result(self, text: str) -> ClientReport:
        raise NotImplementedError


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ClaudeCodePreset(ClientPreset):
    def write_config(self, home: Path, proxy_url: str, model: str) -> None:
        # The env block repeats what the environment already says: Claude Code lets a settings
        # file's env beat the process environment, so ours is the one it reads.
        settings = {"env": self.environment(home, model) | {"ANTHROPIC_BASE_URL": proxy_url}}
        with open_private(home / "settings.json", "w") as fh:
            json.dump(settings, fh, indent=2)

    def environment(self, home: Path, model: str) -> dict[str, str]:
        return {
            "CLAUDE_CONFIG_DIR": str(home),
            "CLAUDE_CODE_MAX_RETRIES": "0",  # driftdesk's retry layer is the only one
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # Side requests (titles, summaries) go to the profile's model too, not a haiku id
            # the endpoint may not serve.
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
        }

    def argv(self, executable: str, prompt: str, model: str) -> list[str]:
        return [
            executable,
            "-p",
            "--output-format",
            "json",
            "--model",
            model,
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            CLAUDE_ALLOWED_TOOLS,
            "--",
            prompt,
        ]

    def read_result(self, text: str) -> ClientReport:
        data: Any = None
        for line in reversed(text.strip().splitlines()):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                break
        if not isinstance(data, dict):
            return ClientReport()
        usage = _dict(data.get("usage"))
        cost = data.get("total_cost_usd")
        duration = data.get("duration_ms")
        result = data.get("result")
        is_error = bool(data.get("is_error")) or data.get("subtype") not in (None, "success")
        return ClientReport(
            found=True,
            answer=result if isinstance(result, str) else None,
            is_error=is_error,
            error=(str(result or data.get("subtype")) if is_error else None),
            turns=_int(data.get("num_turns")),
            prompt_tokens=_int(usage.get("input_tokens")),
            completion_tokens=_int(usage.get("output_tokens")),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            duration_ms=float(duration) if isinstance(duration, int | float) else None,
        )


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


class CodexPreset(ClientPreset):
    def write_config(self, home: Path, proxy_url: str, model: str) -> None:
        lines = [
            "# Written by driftdesk for one attempt: the run's metering proxy, no key (the key",
            "# is the run's throwaway one, read from OPENAI_API_KEY).",
            f"model = {_toml_string(model)}",
            'model_provider = "driftdesk"',
            "check_for_update_on_startup = false",
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[feedback]",
            "enabled = false",
            "",
            "[history]",
            'persistence = "none"',
            "",
            "[model_providers.driftdesk]",
            'name = "driftdesk metering proxy"',
            f"base_url = {_toml_string(proxy_url)}",
            'env_key = "OPENAI_API_KEY"',
            'wire_api = "responses"',
            "request_max_retries = 0  # driftdesk's retry layer is the only one",
            "stream_max_retries = 0",
            "",
        ]
        with open_private(home / "config.toml", "w") as fh:
            fh.write("\n".join(lines))

    def environment(self, home: Path, model: str) -> dict[str, str]:
        return {"CODEX_HOME": str(home)}

    def argv(self, executable: str, prompt: str, model: str) -> list[str]:
        # No sandbox of Codex's own: the workspace is a throwaway copy made for this try, and
        # Codex's sandbox helper cannot run everywhere (containers, temporary homes).
        return [
            executable,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--model",
            model,
            "--",
            prompt,
        ]

    def read_result(self, text: str) -> ClientReport:
        report = ClientReport()
        completed = False
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            report.found = True
            kind = event.get("type")
            item = _dict(event.get("item"))
            if kind == "item.completed" and item.get("type") == "agent_message":
                report.answer = str(item.get("text", ""))
            elif kind == "turn.completed":
                completed = True
                report.turns = (report.turns or 0) + 1
                usage = _dict(event.get("usage"))
                for attr, key in (
                    ("prompt_tokens", "input_tokens"),
                    ("completion_tokens", "output_tokens"),
                ):
                    value = _int(usage.get(key))
                    if value is not None:
                        setattr(report, attr, (getattr(report, attr) or 0) + value)
            elif kind in ("turn.failed", "error"):
                error = _dict(event.get("error")) or event
                report.is_error = True
                report.error = str(error.get("message", kind))
        if report.found and not completed:
            report.is_error = True
            report.error = report.error or "the client ended without completing its turn"
        return report


CLAUDE_CODE = ClaudeCodePreset("claude-code", "claude", "@anthropic-ai/claude-code", "anthropic")
CODEX = CodexPreset("codex", "codex", "@openai/codex", "openai")
PRESETS: dict[str, ClientPreset] = {p.name: p for p in (CLAUDE_CODE, CODEX)}


# How long a client may take to print its version (a cold npm shim can be slow).
VERSION_TIMEOUT_S = 30.0
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.-]+)?")


def client_version(preset: ClientPreset, executable: str | None = None) -> str | None:
    """The version the installed client prints (``claude --version`` → ``2.1.332 (Claude
    Code)``, ``codex --version`` → ``codex-cli 0.171.0``); None when it cannot say. Run in a
    throwaway config dir with nothing of the user's environment but PATH and the locale: it
    needs no key, and its updater and telemetry stay off as in a run."""
    try:
        executable = executable or preset.locate()
    except PresetUnavailable:
        return None
    with tempfile.TemporaryDirectory(prefix="driftdesk-version-") as home:
        env = {
            name: os.environ[name]
            for name in ("PATH", "LANG", "LC_ALL", "TMPDIR")
            if name in os.environ
        }
        env |= {"HOME": home} | preset.environment(Path(home), "")
        try:
            done = subprocess.run(
                [executable, "--version"],
                capture_output=True,
                text=True,
                env=env,
                cwd=home,
                stdin=subprocess.DEVNULL,
                timeout=VERSION_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    found = _VERSION.search(done.stdout) if done.returncode == 0 else None
    return found.group(0) if found else None


def preset_problem(preset: ClientPreset, protocol: str) -> str | None:
    """Why a run of ``preset``'s client cannot start here (checked before the run starts), or
    None."""
    try:
        preset.locate()
    except PresetUnavailable as exc:
        return str(exc)
    return preset.check_profile(protocol)


def client_outcome(
    report: ClientReport, attempt_try: CommandTry, calls: AttemptCalls, stderr_tail: str
) -> AgentResult | None:
    """The outcome when the client itself did not finish cleanly (None: it did)."""
    if attempt_try.timed_out:
        if attempt_try.call_in_flight_at_timeout:
            return AgentResult(
                "link_error",
                error_code="timeout",
                error_message="a provider call was still pending at the timeout",
            )
        return AgentResult(
            "harness_error",
            error_code="timeout",
            error_message="the client ran past the timeout and was killed",
        )
    if report.found and not report.is_error and attempt_try.returncode == 0:
        return None
    last = calls.calls[-1] if calls.calls else None
    if last is not None and last.get("error_kind") and last["error_kind"] != "client_closed":
        return AgentResult(
            "link_error",
            error_code=str(last["error_kind"]),
            error_message=f"last provider call {last['path']} failed: {last['error_kind']}"
            + (f" (client: {report.error})" if report.error else ""),
        )
    why = report.error or (stderr_tail.strip()[-500:] or "no result")
    return AgentResult(
        "harness_error",
        error_code="client_error",
        error_message=f"the client exited with {attempt_try.returncode}: {why}",
    )


def _installation(executable: str) -> Path:
    """The folder a client is installed in (its ``node_modules``, which holds the native binary
    Codex starts), so an isolated client can read all of itself."""
    resolved = Path(executable).resolve()
    for parent in resolved.parents:
        if parent.name == "node_modules":
            return parent
    return resolved.parent


@dataclass
class ClientTry:
    """One try of a client, as it ended: how the process ended, what it wrote as its native
    result, and how long it ran."""

    attempt_try: CommandTry
    output: str
    wall_ms: float


def client_files(run_dir: Path, task_id: str, attempt: int) -> tuple[Path, Path]:
    """The attempt's client config dir and native output file (absolute: the client runs after
    a ``cd``)."""
    run_dir = run_dir.resolve()
    return (
        attempt_file(run_dir, task_id, attempt, CLIENT_HOME_SUFFIX),
        attempt_file(run_dir, task_id, attempt, CLIENT_OUTPUT_SUFFIX),
    )


async def client_workspace(
    run_dir: Path, ctx: AttemptContext, step_env: dict[str, str], *, isolate: bool = False
) -> tuple[workspace.AttemptWorkspace, AgentResult | None]:
    """A fresh folder for the client (a copy of the task's workspace, empty when it has none),
    set up; with the ``harness_error`` of a failed setup (its diff written). ``isolate``: its
    check and diff run under bubblewrap."""
    ws = await asyncio.to_thread(workspace.prepare, run_dir, ctx.task, ctx.attempt)
    ws.isolate = isolate
    failed = await workspace.setup(ws, ctx.task, step_env, ctx.timeout_s)
    if failed is not None:
        await asyncio.to_thread(workspace.write_diff, ws)
    return ws, failed


async def run_client_try(
    preset: ClientPreset,
    executable: str,
    ctx: AttemptContext,
    run_dir: Path,
    ws: workspace.AttemptWorkspace,
    log_path: Path,
    *,
    proxy_url: str,
    run_key: str,
    real_key: str,
    protocol: str,
    calls: AttemptCalls,
    isolate: bool = False,
    readable: tuple[Path, ...] = (),
) -> ClientTry:
    """Run the client once in ``ws`` with a fresh config dir pointing at ``proxy_url``. With
    ``isolate`` it runs under bubblewrap (``reruns.isolation``): it may write only its attempt's
    workspace copy, config dir and output (the rest of the task's folder is hidden) and read
    ``readable`` and its own installation. The same for a try here and on a Ray node (``reruns.ray_executor``)."""
    task = ctx.task
    home, output = client_files(run_dir, task.task_id, ctx.attempt)
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True, mode=0o700)
    output.unlink(missing_ok=True)
    preset.write_config(home, proxy_url, ctx.model)
    env = child_environment(
        protocol,
        proxy_url,
        run_key,
        real_key,
        preset.environment(home, ctx.model) | {"DRIFTDESK_TASK_ID": task.task_id},
        run_id=ctx.run_id,
        pass_env=ctx.pass_env,
    )
    argv = preset.argv(executable, task.prompt_text, ctx.model)
    command = (
        f"cd {shlex.quote(str(ws.path))} && exec {shlex.join(argv)} > {shlex.quote(str(output))}"
    )
    sandboxed = None
    if isolate:
        output.touch(mode=0o600)  # bound into the sandbox: it must exist
        sandboxed = isolate_argv(
            ["/bin/sh", "-c", command],
            writable=[ws.path, home, output],
            cwd=ws.path,
            conceal=log_path.parent.resolve(),
            readable=[*readable, _installation(executable)],
        )
    started = time.perf_counter()
    attempt_try = await run_command_once(command, env, log_path, ctx, calls, argv=sandboxed)
    wall_ms = (time.perf_counter() - started) * 1000
    text = output.read_text("utf-8", "replace") if output.exists() else ""
    return ClientTry(attempt_try, text, wall_ms)


def client_fields(report: ClientReport, wall_ms: float) -> dict[str, Any]:
    """The row's figures from the client itself, beside the proxy's."""
    return {
        "client_prompt_tokens": report.prompt_tokens,
        "client_completion_tokens": report.completion_tokens,
        "client_duration_ms": report.duration_ms,
        "client_wall_ms": round(wall_ms, 3),
    }


def client_verdict(
    report: ClientReport,
    attempt_try: CommandTry,
    calls: AttemptCalls,
    log_path: Path,
    task: Task,
) -> AgentResult:
    """The try's outcome before the task's check: the client's own failure, else its answer
    judged against ``expected``, else a clean finish (the check, if any, decides)."""
    result = client_outcome(report, attempt_try, calls, _stderr_tail(log_path))
    if result is not None:
        return result
    answer = report.answer or ""
    if task.expected:
        success = judge(task.expected, answer)
        result = AgentResult("pass" if success else "fail", success=success, score=float(success))
    else:
        result = AgentResult("pass", success=True, score=1.0)
    result.answer = answer
    return result


async def run_preset_attempt(
    preset: ClientPreset,
    *,
    proxy: MeteringProxy,
    ctx: AttemptContext,
    run_dir: Path,
    log_path: Path,
    protocol: str,
    real_key: str,
    isolate: bool = False,
    readable: tuple[Path, ...] = (),
) -> tuple[AgentResult, list[dict[str, Any]], dict[str, Any]]:
    """One (task, attempt) slot with a client preset; retries the whole try (fresh workspace,
    fresh config dir) on a retryable link error. Returns the result, the proxied calls and the
    row's client fields."""
    executable = preset.locate()
    task = ctx.task
    all_calls: list[dict[str, Any]] = []
    step_env = workspace.step_environment(real_key, ctx.run_id, ctx.pass_env)
    extra: dict[str, Any] = {}
    while True:
        ws, failed = await client_workspace(run_dir, ctx, step_env, isolate=isolate)
        if failed is not None:
            return failed, all_calls, extra
        token = proxy.open_attempt(task.task_id, ctx.attempt)
        try:
            tried = await run_client_try(
                preset,
                executable,
                ctx,
                run_dir,
                ws,
                log_path,
                proxy_url=proxy.base_url_for(token),
                run_key=proxy.run_key,
                real_key=real_key,
                protocol=protocol,
                calls=proxy.attempt_calls(token),
                isolate=isolate,
                readable=readable,
            )
            calls = await proxy.settle(token)
        finally:
            proxy.close_attempt(token)
        all_calls.extend(calls.calls)
        report = preset.read_result(tried.output)
        extra = client_fields(report, tried.wall_ms)
        log_report(log_path, preset, report, ctx.secrets)
        result = client_verdict(report, tried.attempt_try, calls, log_path, task)
        # A verdict reached over a broken last call is a link error: no check for it.
        result = link_failure_overrides(result, calls.calls)
        result = await workspace.conclude(
            ws, ctx, result, step_env, workspace.file_log(log_path, ctx)
        )
        if await retry_the_try(ctx, result, calls.last_retry_after_s, log_path):
            continue
        return result, all_calls, extra


def _stderr_tail(log_path: Path) -> str:
    try:
        lines = log_path.read_text("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line for line in lines[-20:] if line.startswith("[stderr]"))


def log_report(
    log_path: Path, preset: ClientPreset, report: ClientReport, secrets: tuple[str, ...]
) -> None:
    if not report.found:
        summary = f"[{preset.name}] no native result was written"
    else:
        fields = {
            "is_error": report.is_error,
            "turns": report.turns,
            "prompt_tokens": report.prompt_tokens,
            "completion_tokens": report.completion_tokens,
            "cost_usd": report.cost_usd,
            "duration_ms": report.duration_ms,
        }
        summary = f"[{preset.name}] " + " ".join(f"{k}={v}" for k, v in fields.items())
        if report.answer is not None:
            summary += f"\n[{preset.name}] answer: {report.answer[:2000]}"
        if report.error:
            summary += f"\n[{preset.name}] error: {report.error[:2000]}"
    with open_private(log_path, "a") as fh:
        fh.write(redact(summary, secrets) + "\n")
