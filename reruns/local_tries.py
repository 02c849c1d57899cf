"""Where a try runs, here: the builtin agent in this process, a command harness or a client
preset (Claude Code, Codex) as a child process, each through the run's metering proxy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from driftdesk.reruns import workspace
from driftdesk.reruns.agents import AgentResult, AttemptContext, run_builtin
from driftdesk.reruns.command_agent import (
    child_environment,
    command_for_try,
    command_outcome,
    run_command_once,
    template_fields,
)
from driftdesk.reruns.isolation import drop_unwritten, isolated_harness
from driftdesk.reruns.presets import run_preset_attempt
from driftdesk.reruns.tries import TryHost, link_failure_overrides, retry_the_try
from driftdesk.rundir import open_private


class LocalTries:
    """An attempt's tries run on this machine."""

    def __init__(self, host: TryHost) -> None:
        self.host = host

    async def run_attempt(
        self, ctx: AttemptContext, log_path: Path, transcript_path: Path
    ) -> tuple[AgentResult, list[dict[str, Any]], dict[str, Any]]:
        """The attempt's result, the calls it made, and a client preset's own figures."""
        host = self.host
        if host.kind.preset is not None:
            return await run_preset_attempt(
                host.kind.preset,
                proxy=host.proxy,
                ctx=ctx,
                run_dir=host.run_dir,
                log_path=log_path,
                protocol=host.profile.protocol,
                real_key=host.real_key,
                isolate=host.isolate,
                readable=(host.suite.path.parent,),
            )
        if host.kind.runs_command:
            result, calls = await self._run_command(ctx, log_path)
            return result, calls, {}
        step_env = workspace.step_environment(host.real_key, host.run_id, ctx.pass_env)
        ws, failed = await workspace.begin(
            host.run_dir, ctx.task, ctx.attempt, step_env, host.timeout_s
        )
        transcript: list[dict[str, Any]] | None
        if failed is not None:
            result, calls, transcript = failed, [], None
        else:
            result, calls, transcript = await self._run_builtin(ctx)
        result = await workspace.conclude(
            ws, ctx, result, step_env, lambda line: ctx.log("check", line)
        )
        host.write_builtin_files(ctx, log_path, transcript_path, transcript)
        return result, calls, {}

    async def _run_builtin(
        self, ctx: AttemptContext
    ) -> tuple[AgentResult, list[dict[str, Any]], list[dict[str, Any]] | None]:
        token = self.host.proxy.open_attempt(ctx.task.task_id, ctx.attempt)
        base_url = self.host.proxy.base_url_for(token)
        try:
            result, transcript = await run_builtin(
                self.host.profile.protocol,
                base_url,
                ctx,
                openai_client=self.host.openai_client,
                http=self.host.http,
                on_crash=lambda exc: self.host.log_exception(
                    exc, f"builtin agent crashed on {ctx.task.task_id}/{ctx.attempt}"
                ),
            )
            calls = await self.host.proxy.settle(token)
            result = link_failure_overrides(result, calls.calls)
        finally:
            self.host.proxy.close_attempt(token)
        return result, list(calls.calls), transcript

    async def _run_command(
        self, ctx: AttemptContext, log_path: Path
    ) -> tuple[AgentResult, list[dict[str, Any]]]:
        """Run the harness; retry the whole try when it ended on a retryable link error.

        Every try gets fresh files of its own (``<attempt>.<try id>.result.json`` and
        ``.prompt.txt``, absolute paths) and, for a task with a workspace, a fresh copy of it:
        a harness left over from another try, or another task, can never hand its result to
        this one. The row records the last try's result file."""
        assert self.host.command is not None
        all_calls: list[dict[str, Any]] = []
        folder = log_path.parent.absolute()
        folder.mkdir(parents=True, exist_ok=True)
        uses_result_path = "result_path" in template_fields(self.host.command)
        step_env = workspace.step_environment(self.host.real_key, self.host.run_id, ctx.pass_env)
        while True:
            try_id = os.urandom(4).hex()
            result_path = folder / f"{ctx.attempt}.{try_id}.result.json"
            prompt_path = folder / f"{ctx.attempt}.{try_id}.prompt.txt"
            ctx.result_path = str(result_path.relative_to(self.host.run_dir.absolute()))
            with open_private(prompt_path, "w") as fh:
                fh.write(ctx.task.prompt_text)
            ws, failed = await workspace.begin(
                self.host.run_dir,
                ctx.task,
                ctx.attempt,
                step_env,
                self.host.timeout_s,
                isolate=self.host.isolate,
            )
            if failed is not None:
                return failed, all_calls
            token = self.host.proxy.open_attempt(ctx.task.task_id, ctx.attempt)
            try:
                command, extra = command_for_try(
                    self.host.command,
                    ctx,
                    run_dir=self.host.run_dir,
                    result_path=result_path,
                    prompt_path=prompt_path,
                    workspace=ws.path if ws is not None else None,
                )
                env = child_environment(
                    self.host.profile.protocol,
                    self.host.proxy.base_url_for(token),
                    self.host.proxy.run_key,
                    self.host.real_key,
                    extra,
                    run_id=self.host.run_id,
                    pass_env=ctx.pass_env,
                )
                argv = None
                if self.host.isolate:
                    argv = isolated_harness(
                        command,
                        result_path=result_path,
                        prompt_path=prompt_path,
                        workspace=ws.path if ws is not None else None,
                        readable=[self.host.suite.path.parent],
                    )
                outcome = await run_command_once(
                    command, env, log_path, ctx, self.host.proxy.attempt_calls(token), argv=argv
                )
                calls = await self.host.proxy.settle(token)
            finally:
                self.host.proxy.close_attempt(token)
            drop_unwritten(result_path)
            all_calls.extend(calls.calls)
            result = command_outcome(result_path, outcome, calls, uses_result_path=uses_result_path)
            # A verdict reached over a broken last call is a link error: no check for it.
            result = link_failure_overrides(result, calls.calls)
            result = await workspace.conclude(
                ws, ctx, result, step_env, workspace.file_log(log_path, ctx)
            )
            if await retry_the_try(ctx, result, calls.last_retry_after_s, log_path):
                continue
            return result, all_calls
