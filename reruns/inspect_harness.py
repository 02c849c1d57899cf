"""The inspect_ai harness: ``driftdesk run --agent inspect --suite path/task.py[@task]``.

inspect runs **once per run** (starting it per attempt costs seconds of start-up that would be
reported as latency) with ``--epochs <repeat>``: its samples × epochs are the run's attempts
(``task_id`` = sample id, ``attempt`` = epoch - 1). Its concurrency is ours
(``--max-connections`` / ``--max-samples``), its retries are bounded by our retry policy and
counted from its model events, ``--time-limit`` is our per-attempt timeout. It talks to the
metering proxy only, with the run's throwaway key (``openai-api/driftdesk/<model>`` through
``DRIFTDESK_BASE_URL`` / ``DRIFTDESK_API_KEY``, or ``anthropic/<model>``); the real key is
never in its environment.

Rows come from inspect's own log, read with its own reader while it is written (``--log-buffer
1`` flushes every finished sample), so progress is live. The proxy keeps the eval's calls
unattributed until a finished sample names them: inspect records the ``x-request-id`` of each
model call, and the proxy gives every response one. inspect exits 0 even when the eval
stopped on an error: the log's ``status`` is what counts; samples it never finished become
``harness_error`` rows (``eval_error``) with the eval's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import os
import signal
import sys
from pathlib import Path
from typing import Any, Protocol

from driftdesk.analysis.inspect_logs import INSPECT_EXTRA, SampleAttempt, sample_attempt
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.call_verdicts import call_figures, link_failure_verdict
from driftdesk.reruns.command_agent import child_environment, redact_log_streams
from driftdesk.reruns.events import AttemptEnded, AttemptStarted, RunEvent, RunStats
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.suites import Suite, SuiteError
from driftdesk.rundir import INSPECT_LOG_DIR, open_private, write_manifest
from driftdesk.secrets import redact

POLL_S = 0.5  # how often the log is read while inspect runs
OUTPUT_FILE = "inspect.log"  # inspect's own stdout/stderr, beside its logs


class InspectRunError(ValueError):
    """inspect could not run the eval at all (no log was written)."""


def inspect_suite(spec: str) -> Suite:
    """``path/task.py[@task_name]`` as a suite without tasks (its samples are known once
    inspect has loaded the dataset and written its log header)."""
    path_text, _, task_name = spec.partition("@")
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise SuiteError(
            f"--agent inspect needs --suite path/to/task.py[@task_name]; {path} is not a .py file"
        )
    name = f"{path.stem}@{task_name}" if task_name else path.stem
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Suite(name, path.resolve(), digest, [])


def check_inspect_ready(protocol: str) -> None:
    """Before the run starts: inspect-ai (and, for an Anthropic profile, its SDK) installed."""
    if importlib.util.find_spec("inspect_ai") is None:
        raise InspectRunError(f"--agent inspect needs inspect-ai: {INSPECT_EXTRA}")
    if protocol == "anthropic" and importlib.util.find_spec("anthropic") is None:
        raise InspectRunError(
            "--agent inspect with an Anthropic profile needs the anthropic SDK: pip install anthropic "
            "(or driftdesk[inspect])"
        )


def inspect_model(profile: Profile) -> str:
    if profile.protocol == "anthropic":
        return f"anthropic/{profile.model}"
    return f"openai-api/driftdesk/{profile.model}"


class InspectHost(Protocol):
    """What the harness uses of the engine's execution (kept narrow, and no import cycle)."""

    run_dir: Path
    run_id: str
    manifest: dict[str, Any]
    suite: Suite
    profile: Profile
    proxy: MeteringProxy | None
    concurrency: int
    timeout_s: float
    policy: RetryPolicy
    stats: RunStats
    notices: list[str]
    _real_key: str

    def emit(self, event: RunEvent) -> None: ...

    def _persist_row(self, row: dict[str, Any]) -> asyncio.Future[None]: ...


def inspect_command(host: InspectHost, log_dir: Path) -> list[str]:
    task = host.suite.path.name  # inspect takes it relative to its working dir (the file's)
    if "@" in host.suite.name:
        task += "@" + host.suite.name.split("@", 1)[1]
    timeout = str(max(1, round(host.timeout_s)))
    command = [
        sys.executable,
        "-m",
        "inspect_ai",
        "eval",
        task,
        "--model",
        inspect_model(host.profile),
        "--epochs",
        str(int(host.manifest["repeat"])),
        "--max-connections",
        str(host.concurrency),
        "--max-samples",
        str(host.concurrency),
        "--max-retries",
        str(host.policy.max_retries),
        "--timeout",
        timeout,
        "--time-limit",
        timeout,
        "--no-fail-on-error",
        "--log-dir",
        str(log_dir),
        "--log-format",
        "eval",
        "--log-buffer",
        "1",
        "--display",
        "plain",
    ]
    sample_ids = (host.manifest.get("inspect") or {}).get("sample_ids")
    if sample_ids:
        command += ["--sample-id", ",".join(sample_ids)]
    return command


class _EvalWatcher:
    """Reads the eval's log as inspect writes it and turns finished samples into rows."""

    def __init__(self, host: InspectHost, token: str, log_dir: Path) -> None:
        self.host = host
        self.token = token
        self.log_dir = log_dir
        self.done: set[tuple[str, int]] = set()
        self.sample_ids: list[str] | None = None
        self.task_name: str | None = None

    def _log_file(self) -> Path | None:
        files = sorted(self.log_dir.glob("*.eval"))
        return files[-1] if files else None

    async def harvest(self) -> None:
        file = self._log_file()
        if file is None:
            return
        try:
            found = await asyncio.to_thread(self._read_new, file)
        except Exception:  # inspect is rewriting the file right now: next poll
            return
        for attempt in found:
            self._record(attempt)

    def _read_new(self, file: Path) -> list[SampleAttempt]:
        from inspect_ai.log import (
            read_eval_log,
            read_eval_log_sample,
            read_eval_log_sample_summaries,
        )

        if self.sample_ids is None:
            header = read_eval_log(str(file), header_only=True)
            ids = header.eval.dataset.sample_ids
            if ids is None:
                return []
            wanted = (self.host.manifest.get("inspect") or {}).get("sample_ids")
            self.sample_ids = [str(i) for i in ids if not wanted or str(i) in wanted]
            self.task_name = header.eval.task
        found = []
        for summary in read_eval_log_sample_summaries(str(file)):
            key = (str(summary.id), int(summary.epoch))
            if key in self.done or not summary.completed:
                continue
            try:
                sample = read_eval_log_sample(str(file), id=summary.id, epoch=summary.epoch)
            except Exception:  # being rewritten: keep what was read, the rest next poll
                break
            found.append(sample_attempt(sample, task=self.task_name, model=None))
            self.done.add(key)
        return found

    def announce_tasks(self) -> None:
        """Once the header is known: the run's tasks and attempt total, in the manifest too."""
        if self.sample_ids is None or self.host.manifest.get("tasks"):
            return
        self.host.manifest["tasks"] = list(self.sample_ids)
        self.host.stats.total = len(self.sample_ids) * int(self.host.manifest["repeat"])
        write_manifest(self.host.run_dir, self.host.manifest)

    def _record(self, attempt: SampleAttempt) -> None:
        host = self.host
        assert host.proxy is not None
        self.announce_tasks()
        pending = host.proxy.attempt_calls(self.token).calls
        mine = [c for c in pending if c.get("request_id") in attempt.request_ids]
        pending[:] = [c for c in pending if c.get("request_id") not in attempt.request_ids]
        for call in mine:
            host.proxy.attribute(call, attempt.task_id, attempt.attempt)
        last_kind = mine[-1].get("error_kind") if mine else None
        if attempt.outcome == "link_error" and last_kind and last_kind != "client_closed":
            attempt.error_code = str(last_kind)  # the proxy saw the link; inspect, an exception
        verdict = link_failure_verdict(attempt.outcome, mine)
        if verdict is not None:
            attempt.outcome, attempt.success, attempt.score = "link_error", None, None
            attempt.error_code, attempt.error_message = verdict
        self._persist(attempt, mine)

    def _persist(self, attempt: SampleAttempt, calls: list[dict[str, Any]]) -> None:
        host = self.host
        host.emit(AttemptStarted(host.run_id, attempt.task_id, attempt.attempt))
        host.emit(AttemptEnded(host.run_id, attempt.task_id, attempt.attempt))
        secrets = (host._real_key, host.proxy.run_key if host.proxy else None)
        row = {
            "run_id": host.run_id,
            "task_id": attempt.task_id,
            "scenario_id": attempt.scenario_id,
            "attempt": attempt.attempt,
            "outcome": attempt.outcome,
            "success": attempt.success,
            "score": attempt.score,
            "error_code": attempt.error_code,
            "error_message": (
                redact(attempt.error_message, secrets)[:2000] if attempt.error_message else None
            ),
            "retries": attempt.retries,
            "calls": len(calls),
            "prompt_tokens": attempt.prompt_tokens,
            "completion_tokens": attempt.completion_tokens,
            "total_tokens": attempt.total_tokens,
            # inspect's own time for the sample: no process start-up in it
            "latency_ms": attempt.latency_ms,
            **call_figures(calls),
            "limit": attempt.limit,
            "started_at": attempt.started_at,
            "ended_at": attempt.ended_at,
            "model": host.profile.model,
            "base_url": host.profile.base_url,
        }
        for _ in range(attempt.retries):
            host.stats.record_retry()
        host._persist_row(row)  # inspect runs on; the run waits for every row at its end

    async def finish(self, output_tail: str) -> None:
        """After inspect exited: the last samples, the eval's status, the unfinished rest."""
        from inspect_ai.log import read_eval_log

        await self.harvest()
        file = self._log_file()
        if file is None:
            raise InspectRunError(
                "inspect wrote no log: it could not start the eval. Its output ends with:\n"
                + output_tail
            )
        header = await asyncio.to_thread(read_eval_log, str(file), header_only=True)
        self.announce_tasks()
        if header.status == "success":
            return
        reason = header.error.message if header.error is not None else "no error recorded"
        self.host.notices.append(f"inspect's eval ended with status {header.status}: {reason}")
        for sample_id in self.sample_ids or []:
            for attempt in range(int(self.host.manifest["repeat"])):
                if (sample_id, attempt + 1) in self.done:
                    continue
                self._persist(
                    SampleAttempt(
                        task_id=sample_id,
                        attempt=attempt,
                        scenario_id=self.task_name,
                        outcome="harness_error",
                        error_code="eval_error",
                        error_message=f"inspect's eval ended ({header.status}) before this "
                        f"sample finished: {reason}",
                    ),
                    [],
                )


async def _pump_output(stream: asyncio.StreamReader | None, path: Path, secrets: Any) -> str:
    """inspect's output to ``inspect.log`` (redacted); returns its last lines."""
    tail: list[str] = []
    if stream is None:
        return ""
    with open_private(path, "a") as log:
        start = log.tell()
        while line := await stream.readline():
            text = redact(line.decode("utf-8", "replace"), secrets)
            log.write(text)
            log.flush()
            tail = [*tail, text][-20:]
    # A key printed over several lines (base64, xxd -p) passed the line-by-line redaction.
    await asyncio.to_thread(redact_log_streams, path, start, tuple(secrets), ("",))
    return redact("".join(tail), secrets)


async def run_inspect_eval(host: InspectHost) -> None:
    """Run the eval once, turning its samples × epochs into rows as they finish."""
    proxy = host.proxy
    assert proxy is not None
    log_dir = host.run_dir / INSPECT_LOG_DIR
    log_dir.mkdir(exist_ok=True)
    token = proxy.open_attempt("", -1, deferred=True)
    base_url = proxy.base_url_for(token)
    env = child_environment(
        host.profile.protocol,
        base_url,
        proxy.run_key,
        host._real_key,
        {"DRIFTDESK_BASE_URL": base_url, "DRIFTDESK_API_KEY": proxy.run_key},
        run_id=host.run_id,
        # one eval for the whole run: the run's --pass-env and the profile's pass_env
        pass_env=(*(host.manifest.get("pass_env") or ()), *host.profile.pass_env),
    )
    # inspect reads a .env found above its working dir, and lets it override our variables
    # when it believes it runs inside VS Code: it must not believe so.
    for name in [n for n in env if n.startswith("VSCODE_")]:
        del env[name]
    if env.get("TERM_PROGRAM") == "vscode":
        del env["TERM_PROGRAM"]
    command = inspect_command(host, log_dir)
    watcher = _EvalWatcher(host, token, log_dir)
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=host.suite.path.parent,
        start_new_session=True,
    )
    secrets = (host._real_key, proxy.run_key)
    output = asyncio.create_task(_pump_output(process.stdout, log_dir / OUTPUT_FILE, secrets))
    try:
        while process.returncode is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await process.wait()
            await watcher.harvest()
        await watcher.finish(await output)
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        output.cancel()
        with contextlib.suppress(BaseException):
            await process.wait()
        raise
    finally:
        await proxy.settle(token)
        # Calls no finished sample named (a sample inspect never finished): kept, unattributed.
        for call in proxy.attempt_calls(token).calls:
            proxy.attribute(call, None, None)
        proxy.close_attempt(token)
