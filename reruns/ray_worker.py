"""The worker's side of ``--executor ray``: what travels to a node, and one try run there.

A **worker** (``worker_attempt``, in a Ray worker process on any node) gets an ``AttemptJob``:
the task, the proxy URL with the attempt's token and the run's throwaway key — never the real
key — and does the work in a private temporary folder: workspace copy, setup, agent (the
builtin loop, a command, a client preset: its ``AgentKind``), check, diff. It writes nothing
the driver owns; it sends back the capped log, the result file, the check output and the diff,
then removes its folder. The driver's side (settings, the connection, the nodes) is
reruns/ray_executor.py; judging a try's reply is reruns/ray_tries.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import queue
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from driftdesk.reruns import rundir, workspace
from driftdesk.reruns.agent_kinds import AGENT_KINDS
from driftdesk.reruns.agents import AgentResult, AttemptContext, run_builtin
from driftdesk.reruns.command_agent import (
    CommandTry,
    child_environment,
    command_for_try,
    command_outcome,
    run_command_once,
)
from driftdesk.reruns.isolation import drop_unwritten, isolated_harness
from driftdesk.reruns.presets import (
    ClientPreset,
    PresetUnavailable,
    client_files,
    client_verdict,
    client_workspace,
    log_report,
    run_client_try,
)
from driftdesk.reruns.proxy import AttemptCalls
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.suites import Task
from driftdesk.rundir import CHECK_OUTPUT_SUFFIX, WORKSPACE_DIFF_SUFFIX, attempt_file, open_private

OUTPUT_EVERY_S = 0.5  # how often a node sends the try's new output lines to the driver
MAX_WORKSPACE_BYTES = 64 * 1024 * 1024  # a task's workspace shipped to the nodes, packed
MAX_CLIENT_HOME_BYTES = 16 * 1024 * 1024  # a client's config dir shipped back, packed
# An attempt's files a node sends back (as text), by the reply's key, where a local attempt
# leaves them.
RETURNED_FILES = ((CHECK_OUTPUT_SUFFIX, "check_output"), (WORKSPACE_DIFF_SUFFIX, "diff"))


# --- what travels to a worker and back ------------------------------------------------------


@dataclass
class AttemptJob:
    """One try of one slot, as a worker needs it. ``run_key`` is the run's throwaway key
    (the proxy refuses anything else); the real key is not here."""

    kind: str  # the agent kind's name (reruns/agent_kinds.py): "builtin", "command", a client's
    run_id: str
    task: Task
    attempt: int
    try_id: str
    model: str
    protocol: str
    timeout_s: float
    policy: RetryPolicy
    base_url: str  # the driver's proxy, with this try's attempt token
    run_key: str
    command: str | None = None
    uses_result_path: bool = False
    isolate: bool = False
    workspace_tar: Any = None  # an ObjectRef of the task's packed workspace (None: none)
    seed: str = ""
    pass_env: tuple[str, ...] = ()  # names (globs) of the node's environment the harness gets


def pack_folder(folder: Path, limit: int = MAX_WORKSPACE_BYTES) -> bytes:
    """A folder as a tar (symlinks kept), for nodes that do not share our disk (a task's
    workspace on its way out, a client's config dir on its way back)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=".")
    data = buffer.getvalue()
    if len(data) > limit:
        raise ValueError(
            f"{folder} is {len(data)} bytes packed; the Ray executor ships at most {limit}"
        )
    return data


def unpack_folder(data: bytes, folder: Path, *, from_a_node: bool = False) -> None:
    """What ``pack_folder`` packed, into ``folder``; nothing may land outside it. What a node
    sends back (``from_a_node``) also may not hold links out of it or special files (tarfile's
    ``data`` filter); a workspace we packed keeps its symlinks as they were (``tar``)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(folder, filter=_skip_unsafe if from_a_node else "tar")


def _skip_unsafe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """A member the ``data`` filter refuses (a client's link to its own binary, say) is left
    out; the rest still lands."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8", "replace")
    except FileNotFoundError:
        return None


def _node_label() -> dict[str, Any]:
    import ray

    context = ray.get_runtime_context()
    node_id = context.get_node_id()
    ip = ray.util.get_node_ip_address()
    return {"node_id": node_id, "node": f"{ip}/{node_id[:8]}", "pid": os.getpid()}


def worker_attempt(job: AttemptJob) -> Any:
    """The Ray task (a generator): first where it runs, then the try's output lines as they
    come (a batch every ``OUTPUT_EVERY_S``; the log's cap bounds them), then what the try
    produced. The try runs on a thread of its own so its lines can be yielded meanwhile."""
    yield _node_label()
    lines: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
    ended: list[Any] = []

    def run() -> None:
        try:
            ended.append(asyncio.run(_run_job(job, lambda stream, text: lines.put((stream, text)))))
        except BaseException as exc:  # raised again below, in the task: Ray reports it
            ended.append(exc)

    thread = threading.Thread(target=run, name="driftdesk-attempt", daemon=True)
    thread.start()
    while True:
        thread.join(OUTPUT_EVERY_S)
        batch = _drain(lines)
        if batch:
            yield {"output": batch}
        if not thread.is_alive():
            break
    if isinstance(ended[0], BaseException):
        raise ended[0]
    yield ended[0]


def _drain(lines: queue.SimpleQueue[tuple[str, str]]) -> list[tuple[str, str]]:
    batch = []
    while True:
        try:
            batch.append(lines.get_nowait())
        except queue.Empty:
            return batch


async def _run_job(job: AttemptJob, emit_output: Callable[[str, str], None]) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="driftdesk-ray-"))
    try:
        task = job.task
        if job.workspace_tar is not None:
            import ray

            source = root / "source"
            unpack_folder(ray.get(job.workspace_tar), source)
            task = replace(task, workspace=source)
        return await _run_in(root / "run", job, task, emit_output)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _run_in(
    run_dir: Path, job: AttemptJob, task: Task, emit_output: Callable[[str, str], None]
) -> dict[str, Any]:
    import random

    log_path, _ = rundir.attempt_paths(run_dir, task.task_id, job.attempt)
    folder = log_path.parent.absolute()
    folder.mkdir(parents=True, exist_ok=True)
    retries: list[tuple[int, str, float]] = []
    ctx = AttemptContext(
        run_id=job.run_id,
        task=task,
        attempt=job.attempt,
        model=job.model,
        protocol=job.protocol,
        api_key=job.run_key,
        timeout_s=job.timeout_s,
        policy=job.policy,
        rng=random.Random(job.seed),
        emit_output=emit_output,  # streamed to the driver; the log comes back whole too
        on_retry=lambda number, code, delay: retries.append((number, code, delay)),
        secrets=(job.run_key,),
        pass_env=job.pass_env,
    )
    # The worker has no real key to look for: the throwaway one stands in for it.
    step_env = workspace.step_environment(job.run_key, job.run_id, job.pass_env)
    reply: dict[str, Any] = {"retries": retries}
    kind = AGENT_KINDS[job.kind]
    if kind.preset is not None:  # a client always runs in a workspace folder of its own
        reply.update(await _preset(job, kind.preset, ctx, run_dir, log_path, step_env))
        return _with_files(reply, run_dir, job, ctx)
    ws, failed = await workspace.begin(
        run_dir, task, job.attempt, step_env, job.timeout_s, isolate=job.isolate
    )
    if kind.in_process:
        result, transcript = (failed, None) if failed is not None else await _builtin(job, ctx)
        result = await workspace.conclude(
            ws, ctx, result, step_env, lambda line: ctx.log("check", line)
        )
        reply.update(result=asdict(result), transcript=transcript, log="\n".join(ctx.log_lines))
    elif failed is not None:
        reply.update(result=asdict(failed), log=None)
    else:
        reply.update(await _command(job, ctx, run_dir, folder, log_path, ws, step_env))
    return _with_files(reply, run_dir, job, ctx)


def _with_files(
    reply: dict[str, Any], run_dir: Path, job: AttemptJob, ctx: AttemptContext
) -> dict[str, Any]:
    """The reply with what every kind of try leaves: its retries, the check's output and the
    workspace diff."""
    reply["retry_count"] = ctx.retries
    for suffix, key in RETURNED_FILES:
        reply[key] = _read(attempt_file(run_dir, ctx.task.task_id, job.attempt, suffix))
    return reply


async def _builtin(
    job: AttemptJob, ctx: AttemptContext
) -> tuple[AgentResult, list[dict[str, Any]] | None]:
    import aiohttp

    if job.protocol == "anthropic":
        async with aiohttp.ClientSession() as http:
            return await run_builtin(
                job.protocol, job.base_url, ctx, openai_client=None, http=http, on_crash=_ignore
            )
    import openai

    client = openai.AsyncOpenAI(
        base_url=job.base_url,
        api_key=job.run_key,
        max_retries=0,
        timeout=job.timeout_s,
        http_client=openai.DefaultAsyncHttpxClient(follow_redirects=False, timeout=job.timeout_s),
    )
    try:
        return await run_builtin(
            job.protocol, job.base_url, ctx, openai_client=client, http=None, on_crash=_ignore
        )
    finally:
        with contextlib.suppress(Exception):
            await client.close()


def _ignore(_: Exception) -> None:
    """A crash of the builtin agent is reported in the row's message (the driver logs it)."""


async def _command(
    job: AttemptJob,
    ctx: AttemptContext,
    run_dir: Path,
    folder: Path,
    log_path: Path,
    ws: workspace.AttemptWorkspace | None,
    step_env: dict[str, str],
) -> dict[str, Any]:
    assert job.command is not None
    result_path = folder / f"{job.attempt}.{job.try_id}.result.json"
    prompt_path = folder / f"{job.attempt}.{job.try_id}.prompt.txt"
    with open_private(prompt_path, "w") as fh:
        fh.write(ctx.task.prompt_text)
    command, extra = command_for_try(
        job.command,
        ctx,
        run_dir=run_dir,
        result_path=result_path,
        prompt_path=prompt_path,
        workspace=ws.path if ws is not None else None,
    )
    env = child_environment(
        job.protocol,
        job.base_url,
        job.run_key,
        job.run_key,
        extra,
        run_id=job.run_id,
        pass_env=job.pass_env,
    )
    argv = None
    if job.isolate:
        argv = isolated_harness(
            command,
            result_path=result_path,
            prompt_path=prompt_path,
            workspace=ws.path if ws is not None else None,
            readable=[ctx.task.workspace] if ctx.task.workspace is not None else [],
        )
    no_calls = AttemptCalls(ctx.task.task_id, ctx.attempt)  # the driver's proxy has them
    outcome = await run_command_once(command, env, log_path, ctx, no_calls, argv=argv)
    drop_unwritten(result_path)
    verdict = command_outcome(result_path, outcome, no_calls, uses_result_path=job.uses_result_path)
    # The check runs here, beside the workspace, when the harness's own verdict is judged; the
    # driver drops it when the proxy saw the link fail.
    checked = await workspace.conclude(
        ws, ctx, verdict, step_env, workspace.file_log(log_path, ctx)
    )
    try:
        result_file: bytes | None = result_path.read_bytes()
    except OSError:
        result_file = None
    return {
        "try": {"returncode": outcome.returncode, "timed_out": outcome.timed_out},
        "result_file": result_file,
        "result": asdict(checked),
        "check_ran": checked is not verdict,
        "log": _read(log_path),
    }


async def _preset(
    job: AttemptJob,
    preset: ClientPreset,
    ctx: AttemptContext,
    run_dir: Path,
    log_path: Path,
    step_env: dict[str, str],
) -> dict[str, Any]:
    """A client preset's try on this node: the client found on the node's PATH, run in a fresh
    copy of the workspace with a fresh config dir. The verdict the node can reach without the
    calls (the driver's proxy has them) decides only whether the check runs; the driver judges
    the try again with the calls."""
    ws, failed = await client_workspace(run_dir, ctx, step_env, isolate=job.isolate)
    if failed is not None:
        return {"result": asdict(failed), "log": _read(log_path)}
    try:
        executable = preset.locate()
    except PresetUnavailable as exc:
        missing = AgentResult(
            "harness_error", error_code="client_missing", error_message=f"on this node: {exc}"
        )
        return {"result": asdict(missing), "log": None}
    no_calls = AttemptCalls(ctx.task.task_id, ctx.attempt)
    readable = (ctx.task.workspace,) if ctx.task.workspace is not None else ()
    tried = await run_client_try(
        preset,
        executable,
        ctx,
        run_dir,
        ws,
        log_path,
        proxy_url=job.base_url,
        run_key=job.run_key,
        real_key=job.run_key,
        protocol=job.protocol,
        calls=no_calls,
        isolate=job.isolate,
        readable=readable,
    )
    report = preset.read_result(tried.output)
    log_report(log_path, preset, report, ctx.secrets)
    verdict = client_verdict(report, tried.attempt_try, no_calls, log_path, ctx.task)
    checked = await workspace.conclude(
        ws, ctx, verdict, step_env, workspace.file_log(log_path, ctx)
    )
    home, _ = client_files(run_dir, ctx.task.task_id, job.attempt)
    return {
        "try": {
            "returncode": tried.attempt_try.returncode,
            "timed_out": tried.attempt_try.timed_out,
        },
        "client_output": tried.output,
        "client_wall_ms": tried.wall_ms,
        "client_home": _pack_small(home),
        "result": asdict(checked),
        "check_ran": checked is not verdict,
        "log": _read(log_path),
    }


def _pack_small(folder: Path) -> bytes | None:
    """The client's config dir (its session files: the trajectory as the client kept it),
    packed, when it is small enough to ship back; None otherwise."""
    try:
        return pack_folder(folder, MAX_CLIENT_HOME_BYTES)
    except (ValueError, OSError):
        return None


def command_try_of(reply: dict[str, Any], calls: AttemptCalls) -> CommandTry:
    """The worker's try as the driver judges it. A call still open when the worker killed the
    harness at the timeout was cut by that kill: the proxy recorded it as ``client_closed``."""
    info = reply["try"]
    last = calls.calls[-1] if calls.calls else None
    in_flight = bool(info["timed_out"]) and (
        calls.in_flight > 0 or (last is not None and last.get("error_kind") == "client_closed")
    )
    return CommandTry(info["returncode"], bool(info["timed_out"]), in_flight)


def agent_result(data: dict[str, Any]) -> AgentResult:
    return AgentResult(**data)
