"""Where a try runs, on a Ray node (reruns/ray_executor.py): the node runs the try; its calls,
retries and verdicts are judged here, as local tries are, and its files written into the run
dir by this process only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from driftdesk.reruns.agents import AgentResult, AttemptContext
from driftdesk.reruns.command_agent import command_outcome, template_fields
from driftdesk.reruns.events import AttemptPlaced
from driftdesk.reruns.presets import client_fields, client_files, client_verdict
from driftdesk.reruns.proxy import AttemptCalls
from driftdesk.reruns.ray_executor import NODE_LOST, NodeLost, RayCluster
from driftdesk.reruns.ray_worker import (
    RETURNED_FILES,
    AttemptJob,
    agent_result,
    command_try_of,
    unpack_folder,
)
from driftdesk.reruns.tries import TryHost, link_failure_overrides, retry_the_try
from driftdesk.rundir import attempt_file, open_private
from driftdesk.secrets import redact


class RayTries:
    """An attempt's tries run on the cluster."""

    def __init__(self, host: TryHost, cluster: RayCluster) -> None:
        self.host = host
        self.cluster = cluster

    async def run_attempt(
        self, ctx: AttemptContext, log_path: Path, transcript_path: Path
    ) -> tuple[AgentResult, list[dict[str, Any]], dict[str, Any]]:
        """The attempt's tries run on the cluster; their calls, retries and verdicts are
        judged here, as ``LocalTries`` judges them, and their files written
        into the run dir by this process only."""
        where: dict[str, Any] = {}
        all_calls: list[dict[str, Any]] = []
        folder = log_path.parent.absolute()
        folder.mkdir(parents=True, exist_ok=True)
        uses_result_path = "result_path" in template_fields(self.host.command or "")
        while True:
            try_id = os.urandom(4).hex()
            reply, calls = await self._remote_try(ctx, try_id, where, log_path)
            all_calls.extend(calls.calls)
            if isinstance(reply, AgentResult):  # the node was lost, or our worker code failed
                return reply, all_calls, where
            self._write_remote_files(ctx, reply)
            if self.host.kind.in_process:
                for number, code, delay in reply["retries"]:
                    ctx.on_retry(number, code, delay)
                ctx.retries = int(reply["retry_count"])
                ctx.log_lines = [str(reply["log"])] if reply["log"] else []
                result = link_failure_overrides(agent_result(reply["result"]), calls.calls)
                self.host.write_builtin_files(ctx, log_path, transcript_path, reply["transcript"])
                return result, all_calls, where
            with open_private(log_path, "a") as fh:
                fh.write(redact(reply["log"] or "", ctx.secrets))
            if "try" not in reply:  # setup failed (or, for a client, none on the node)
                return agent_result(reply["result"]), all_calls, where
            if self.host.kind.preset is not None:
                result, client = self._remote_client_result(ctx, reply, calls, log_path)
                if await retry_the_try(ctx, result, calls.last_retry_after_s, log_path):
                    continue
                return result, all_calls, client | where
            result_path = folder / f"{ctx.attempt}.{try_id}.result.json"
            ctx.result_path = str(result_path.relative_to(self.host.run_dir.absolute()))
            if reply["result_file"] is not None:
                with open_private(result_path, "w") as fh:
                    fh.write(reply["result_file"].decode("utf-8", "replace"))
            result = command_outcome(
                result_path,
                command_try_of(reply, calls),
                calls,
                uses_result_path=uses_result_path,
            )
            result = link_failure_overrides(result, calls.calls)
            if reply["check_ran"] and result.outcome in ("pass", "fail"):
                result = agent_result(reply["result"])
            if await retry_the_try(ctx, result, calls.last_retry_after_s, log_path):
                continue
            return result, all_calls, where

    def _remote_client_result(
        self, ctx: AttemptContext, reply: dict[str, Any], calls: AttemptCalls, log_path: Path
    ) -> tuple[AgentResult, dict[str, Any]]:
        """A client preset's try that ran on a node, judged here with the calls the proxy saw;
        the client's output and config dir kept where a local attempt leaves them."""
        preset = self.host.kind.preset
        assert preset is not None
        home, output = client_files(self.host.run_dir, ctx.task.task_id, ctx.attempt)
        with open_private(output, "w") as fh:
            fh.write(redact(reply["client_output"], ctx.secrets))
        if home.exists():
            shutil.rmtree(home)
        if reply["client_home"] is not None:
            unpack_folder(reply["client_home"], home, from_a_node=True)
        report = preset.read_result(reply["client_output"])
        result = client_verdict(report, command_try_of(reply, calls), calls, log_path, ctx.task)
        result = link_failure_overrides(result, calls.calls)
        if reply["check_ran"] and result.outcome in ("pass", "fail"):
            result = agent_result(reply["result"])
        return result, client_fields(report, reply["client_wall_ms"])

    async def _remote_try(
        self, ctx: AttemptContext, try_id: str, where: dict[str, Any], log_path: Path
    ) -> tuple[dict[str, Any] | AgentResult, AttemptCalls]:
        """One try as a Ray task. A node lost before the try called the model: run it once
        more elsewhere; after a call: ``harness_error`` ``node_lost`` (never run twice)."""
        moved = False
        while True:
            token = self.host.proxy.open_attempt(ctx.task.task_id, ctx.attempt)
            try:

                def placed(info: dict[str, Any]) -> None:
                    where["node"] = info["node"]
                    self.host.emit(
                        AttemptPlaced(self.host.run_id, ctx.task.task_id, ctx.attempt, info["node"])
                    )

                try:
                    job = AttemptJob(
                        kind=self.host.kind.name,
                        run_id=self.host.run_id,
                        task=ctx.task,
                        attempt=ctx.attempt,
                        try_id=try_id,
                        model=self.host.profile.model,
                        protocol=self.host.profile.protocol,
                        timeout_s=self.host.timeout_s,
                        policy=self.host.policy,
                        base_url=self.host.proxy.base_url_for(token),
                        run_key=self.host.proxy.run_key,
                        command=self.host.command,
                        uses_result_path="result_path" in template_fields(self.host.command or ""),
                        isolate=self.host.isolate,
                        workspace_tar=self.cluster.workspace_ref(ctx.task),
                        seed=str(self.host.rng.random()),
                        pass_env=ctx.pass_env,
                    )
                    reply = await self.cluster.run(job, placed, ctx.emit_output)
                except NodeLost as exc:
                    calls = await self.host.proxy.settle(token)
                    if calls.calls or calls.in_flight or moved:
                        return AgentResult(
                            "harness_error",
                            error_code=NODE_LOST,
                            error_message=f"the attempt's Ray node was lost after it called "
                            f"the model ({len(calls.calls)} calls): {exc}",
                        ), calls
                    moved = True
                    with open_private(log_path, "a") as fh:
                        fh.write(
                            f"[driftdesk] node {where.get('node')} lost ({exc}); "
                            "no model call was made: running the try again\n"
                        )
                    continue
                except (RuntimeError, ValueError, OSError) as exc:
                    return AgentResult(
                        "harness_error",
                        error_code="harness_crash",
                        error_message=f"the Ray task failed: {exc}",
                    ), await self.host.proxy.settle(token)
                return reply, await self.host.proxy.settle(token)
            finally:
                self.host.proxy.close_attempt(token)

    def _write_remote_files(self, ctx: AttemptContext, reply: dict[str, Any]) -> None:
        """The check's output and the workspace diff a node sent back, where a local attempt
        leaves them."""
        for suffix, key in RETURNED_FILES:
            if reply.get(key) is not None:
                path = attempt_file(self.host.run_dir, ctx.task.task_id, ctx.attempt, suffix)
                with open_private(path, "w") as fh:
                    fh.write(redact(reply[key], ctx.secrets))
