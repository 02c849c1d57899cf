"""The execution of a run's slots: workers, the metering proxy, and the run's one writer thread.

One run = one run dir (see docs/ARCHITECTURE.md). An ``Execution`` runs a set of slots,
(task_id, attempt) pairs, in a run dir whose manifest is already written (a fresh run or a
resume, reruns/run_start.py): ``concurrency`` workers, attempt-major (all tasks' attempt 0
first) so partial runs cover the suite evenly, or the slots an adaptive policy hands out.
Each finished attempt becomes one attempts.jsonl row, appended and fsynced on the run's single
I/O thread (``AttemptFinished`` is emitted once it is on disk); cancelled attempts write
nothing, so a resume redoes exactly the missing slots. Events go to a ``RunListener``
(reruns/events.py); a listener that fails is logged once and never stops the run.

How many attempts run at once, and the live retunes, are ``LiveControl``'s
(reruns/run_control.py): the workers ask its admission before each slot.

About 700 lines: one class, because the loop, the writer thread and the events share the
execution's state (its stats, stop reason, rows in flight and workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import traceback
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from driftdesk.fileio import JsonlAppender
from driftdesk.providers.profiles import Profile
from driftdesk.reruns import rundir
from driftdesk.reruns.adaptive import AdaptivePolicy
from driftdesk.reruns.agent_kinds import AGENT_KINDS
from driftdesk.reruns.agents import AttemptContext
from driftdesk.reruns.call_verdicts import call_figures
from driftdesk.reruns.concurrency import Concurrency, Ticket, concurrency_text, start_of
from driftdesk.reruns.events import (
    AdaptiveProgress,
    AttemptEnded,
    AttemptFinished,
    AttemptOutput,
    AttemptRetrying,
    AttemptStarted,
    CallRecorded,
    ConcurrencyChanged,
    RunControlled,
    RunEvent,
    RunFinished,
    RunListener,
    RunStarted,
    RunStats,
)
from driftdesk.reruns.injection import FaultInjector, InjectionSpec, injection_figures
from driftdesk.reruns.inspect_harness import run_inspect_eval
from driftdesk.reruns.link_absorb import AbsorbPolicy
from driftdesk.reruns.local_tries import LocalTries
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.ray_executor import RayCluster
from driftdesk.reruns.ray_tries import RayTries
from driftdesk.reruns.recording import CallRecorder, RecordingSettings, tries_begun
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_control import LiveControl
from driftdesk.reruns.run_spec import RunSettings, RunSetupError
from driftdesk.reruns.suites import Suite
from driftdesk.reruns.tries import TryHost
from driftdesk.rundir import (
    CONTROL_FILE,
    RECORDING_SUFFIX,
    open_private,
    write_final_manifest,
)
from driftdesk.secrets import redact

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)


PROGRESS_SECONDS = 0.25  # an adaptive run's progress events, at most this often


@dataclass
class RunOutcome:
    run_dir: Path
    run_id: str
    status: str  # "completed" | "interrupted" | "failed"
    stats: RunStats
    notices: list[str] = field(default_factory=list)  # e.g. a torn last line that was dropped
    reason: str | None = None  # one line: why a run stopped early (a full disk)


def _sum_tokens(calls: list[dict[str, Any]], key: str) -> int | None:
    values = [c[key] for c in calls if isinstance(c.get(key), int)]
    return sum(values) if values else None


class Execution:
    """One execution of a set of slots in a run dir (a fresh run, or a resume)."""

    def __init__(
        self,
        *,
        run_dir: Path,
        manifest: dict[str, Any],
        suite: Suite,
        profile: Profile,
        real_key: str,
        listener: RunListener | None,
        notices: list[str],
        cluster: RayCluster | None = None,
        concurrency: Concurrency | None = None,
    ) -> None:
        """The run's settings come from its manifest, written before: a fresh run and a resume
        run the same way (``concurrency`` overrides the manifest's, as ``resume`` allows)."""
        self.run_dir = run_dir
        self.cluster = cluster
        self.manifest = manifest
        self.run_id = str(manifest["run_id"])
        self.suite = suite
        self.profile = profile
        self._real_key = real_key
        settings = RunSettings.from_manifest(manifest)
        self.agent, self.command, self.isolate = settings.agent, settings.command, settings.isolate
        self.kind = AGENT_KINDS[settings.agent]  # refused before when unknown
        self.pass_env = settings.pass_env
        self.timeout_s = settings.timeout_s
        # N, or auto bounds: the limit on attempts at once and on model calls in flight at
        # the proxy (reruns/concurrency.py); ``ctl`` may change it while the run runs.
        self.concurrency_setting: Concurrency = (
            concurrency if concurrency is not None else settings.concurrency_setting
        )
        self.concurrency = start_of(self.concurrency_setting)
        self.live = LiveControl(
            run_dir, self.run_id, self.concurrency_setting, self.emit, self._ensure_workers
        )
        self.admission = self.live.admission
        self._control_appender: JsonlAppender | None = None
        self._pending: deque[tuple[str, int]] = deque()
        seed = settings.seed
        self.policy = RetryPolicy.from_manifest(manifest)
        self.injection = InjectionSpec.from_manifest(manifest)
        self._seed = seed
        self.listener = listener
        self.notices = notices
        self.stats = RunStats()
        self._rng = random.Random(f"{seed}:{self.run_id}:{time.time_ns()}")
        self._listener_failed = False
        self.proxy: MeteringProxy | None = None
        self._openai: openai.AsyncOpenAI | None = None
        self._http: aiohttp.ClientSession | None = None
        self._attempts_file: JsonlAppender | None = None
        self._tries: LocalTries | RayTries | None = None
        self._calls_file: JsonlAppender | None = None
        self._io: ThreadPoolExecutor | None = None
        self._rows_pending = 0
        self._rows_flushed = asyncio.Event()
        self._rows_flushed.set()
        self._stop_reason: str | None = None  # set when the run dir cannot take more writes
        self._workers: list[asyncio.Task[None]] = []
        self.adaptive: AdaptivePolicy | None = None  # set by ``run_adaptive``
        self._slot_freed = asyncio.Event()  # a row landed or an attempt ended: ask again
        self._landed: set[tuple[str, int]] = set()  # adaptive slots whose row is on disk
        self._progress_at = 0.0  # when the last AdaptiveProgress was emitted (monotonic)
        self._rows_before = 0  # an adaptive run's rows when this execution started

    # --- events -----------------------------------------------------------------------------

    def emit(self, event: RunEvent) -> None:
        if isinstance(event, (ConcurrencyChanged, RunControlled)):
            self.stats.record_event(event)  # the limit, the pause, the episodes
        if self.listener is None:
            return
        try:
            self.listener.on_event(event)
        except Exception as exc:  # a face's bug must not break the run or lose rows
            if not self._listener_failed:
                self._log_exception(
                    exc, "run listener failed; further listener errors are not logged"
                )
            self._listener_failed = True

    def _log_exception(self, exc: BaseException, message: str) -> None:
        """``log.exception`` with the traceback masked: its messages may quote a key."""
        secrets = (self._real_key, self.proxy.run_key if self.proxy else None)
        trace = "".join(traceback.format_exception(exc))
        log.error("%s\n%s", message, redact(trace, secrets).rstrip("\n"))

    # --- the workers the limit needs (reruns/run_control.py) ---------------------------------

    def _ensure_workers(self) -> None:
        """Enough workers for the limit (a retune may raise it past the workers started)."""
        if not self._workers or (self.adaptive is None and not self._pending):
            return
        while sum(not w.done() for w in self._workers) < self.live.worker_count():
            self._workers.append(asyncio.get_running_loop().create_task(self._next_worker()))

    def _next_worker(self) -> Coroutine[Any, Any, None]:
        return self._adaptive_worker() if self.adaptive is not None else self._worker()

    def _on_call(self, call: dict[str, Any]) -> None:
        self.stats.record_call(call)
        self.emit(CallRecorded(self.run_id, call["task_id"], call["attempt"], call))

    # --- the run ----------------------------------------------------------------------------

    async def run_adaptive(self, policy: AdaptivePolicy) -> RunOutcome:
        """Run the slots ``policy`` hands out, one whenever a worker is free, until it says
        the run is done (reruns/adaptive.py)."""
        self.adaptive = policy
        self._rows_before = policy.rows
        return await self.run([], total=max(policy.attempts_bound() - policy.rows, 0))

    def _emit_progress(self, *, now: bool = False) -> None:
        """An ``AdaptiveProgress`` event; at most every ``PROGRESS_SECONDS`` unless ``now``
        (it lists every open task: on a big suite, not after every attempt)."""
        assert self.adaptive is not None
        clock = time.monotonic()
        if not now and clock - self._progress_at < PROGRESS_SECONDS:
            return
        self._progress_at = clock
        progress = self.adaptive.progress()
        open_tasks = {
            state.task_id: state.why
            for state in map(self.adaptive.task_state, self.adaptive.task_ids)
            if state.open
        }
        event = AdaptiveProgress.of(self.run_id, progress, open_tasks, self._rows_before)
        self.stats.total = event.execution_total
        self.emit(event)

    async def run(self, slots: list[tuple[str, int]], *, total: int | None = None) -> RunOutcome:
        self.stats.total = len(slots) if total is None else total
        self.stats.concurrency = self.live.controller.limit()
        self.stats.concurrency_setting = concurrency_text(self.live.setting)
        task_ids = tuple(self.manifest["tasks"])
        # the client of this execution (a resume's may be newer than the run's)
        resumes = self.manifest.get("resumes") or [{}]
        client = resumes[-1].get("client") or self.manifest.get("client")
        self.emit(
            RunStarted(
                run_id=self.run_id,
                run_dir=self.run_dir,
                spec={
                    "profile": self.profile.name,
                    "protocol": self.profile.protocol,
                    "model": self.profile.model,
                    "base_url": self.profile.base_url,
                    "suite": self.suite.name,
                    "agent": self.agent,
                    "client": client,
                    "concurrency": self.concurrency,
                    "concurrency_setting": concurrency_text(self.live.setting),
                    "timeout_seconds": self.timeout_s,
                    "resumed": bool(self.manifest.get("resumes")),
                    "notices": list(self.notices),
                    "executor": "ray" if self.cluster is not None else "local",
                    "ray_dashboard": self.cluster.dashboard_url if self.cluster else None,
                    "adaptive": self.manifest.get("adaptive"),
                },
                task_ids=task_ids,
                repeat=int(self.manifest["repeat"]),
                total_attempts=self.stats.total,
            )
        )
        status = "failed"
        control: asyncio.Task[None] | None = None
        try:
            await self._start()
            control = asyncio.create_task(self.live.take_requests())
            if self.kind.once_per_run:  # one inspect process for the whole run
                await run_inspect_eval(self)
                slots = []
            self._pending = deque(slots)
            if self.adaptive is not None:
                self._emit_progress(now=True)
                count = self.live.worker_count()
            else:
                count = min(self.live.worker_count(), len(slots))
            self._workers = [asyncio.create_task(self._next_worker()) for _ in range(count)]
            try:
                # A retune may add workers while these run: wait for those too.
                while True:
                    workers = list(self._workers)
                    await asyncio.gather(*workers)
                    if len(self._workers) == len(workers):
                        break
            except BaseException:
                workers = list(self._workers)
                for worker in workers:
                    worker.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                # Workers cancelled because the disk took no more rows: the run stops here,
                # interrupted (a Ctrl-C meanwhile still propagates).
                current = asyncio.current_task()
                if self._stop_reason is None or (current is not None and current.cancelling()):
                    raise
            finally:
                await self._rows_flushed.wait()  # finished attempts' rows are on disk
            status = "completed" if self._stop_reason is None else "interrupted"
        except asyncio.CancelledError:
            status = "interrupted"
            raise
        finally:
            if control is not None:
                control.cancel()
                await asyncio.gather(control, return_exceptions=True)
            await self._stop()
            self.manifest["concurrency_control"] = self.live.summary(
                self.manifest.get("concurrency_control")
            )
            self.manifest["status"] = status
            self.manifest["ended_at"] = rundir.iso(rundir.utc_now())
            if self._stop_reason is not None:
                self.manifest["stop_reason"] = self._stop_reason
            if self.adaptive is not None:
                self.manifest["adaptive"]["result"] = self.adaptive.summary()
                self._emit_progress(now=True)
            if self.manifest.get("resumes"):
                self.manifest["resumes"][-1]["ended_at"] = self.manifest["ended_at"]
                self.manifest["resumes"][-1]["status"] = status
            try:
                write_final_manifest(self.run_dir, self.manifest)
            except OSError as exc:  # not even in its reserve: it says "running"; resume works
                self._stop_for_write_failure(exc, "manifest.json")
            self.emit(RunFinished(self.run_id, status, self.stats))
        return RunOutcome(
            self.run_dir, self.run_id, status, self.stats, self.notices, self._stop_reason
        )

    def _stop_for_write_failure(self, error: BaseException, what: str) -> None:
        """A row, log or manifest could not be written (disk full, quota, I/O error): start
        no new attempt and cancel those in flight (they could only pay for calls whose rows
        would be lost). Their slots have no row: ``resume`` redoes exactly them."""
        if self._stop_reason is None:
            detail = error.strerror if isinstance(error, OSError) and error.strerror else error
            self._stop_reason = (
                f"stopped: cannot write {what} in {self.run_dir} ({detail}); "
                f"free space, then: driftdesk resume {self.run_dir}"
            )
        for worker in self._workers:
            worker.cancel()

    async def _start(self) -> None:
        try:
            self._attempts_file = JsonlAppender(self.run_dir / rundir.ATTEMPTS)
            # calls.jsonl rows are written at once (a kill -9 keeps them: they are in the OS's
            # page cache) but not fsynced one by one: only attempts.jsonl rows carry that cost.
            self._calls_file = JsonlAppender(self.run_dir / rundir.CALLS, fsync=False)
            self._control_appender = JsonlAppender(self.run_dir / CONTROL_FILE, fsync=False)
        except OSError as exc:
            raise RunSetupError(cannot_write_run_dir(self.run_dir, exc)) from None
        # File writes and fsyncs run on one I/O thread, in submission order, so they never
        # stall the event loop (and the proxy's streams with it). One thread: on a small
        # machine more threads only compete with the loop for the cores.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftdesk-run-io")
        try:
            self.live.open(_BackgroundRows(self._control_appender, self._io, self._watch_write))
        except OSError as exc:
            raise RunSetupError(cannot_write_run_dir(self.run_dir, exc)) from None
        recording = RecordingSettings.from_manifest(self.manifest)
        recorder = None
        if recording.bodies:
            recorder = CallRecorder(
                self.run_dir,
                self._real_key,
                max_bytes=recording.max_bytes,
                submit=self._submit_recording,
            )
        self.proxy = MeteringProxy(
            run_id=self.run_id,
            upstream_base_url=self.profile.base_url,
            protocol=self.profile.protocol,
            real_key=self._real_key,
            auth_header="none" if self.profile.no_key else self.profile.auth,
            extra_headers=self.profile.headers,
            calls_file=_BackgroundRows(self._calls_file, self._io, self._watch_write),
            on_call=self._on_call,
            call_counts=rundir.count_calls(self.run_dir),
            tries=tries_begun(self.run_dir),
            host=self.cluster.node_ip if self.cluster is not None else "127.0.0.1",
            recorder=recorder,
            call_gate=self.live.controller,
            absorb=(
                AbsorbPolicy(self.policy, self.timeout_s)
                if RunSettings.from_manifest(self.manifest).link_faults == "absorb"
                else None
            ),
            injector=(
                # An injected timeout hangs past the client's timeout and the attempt's.
                FaultInjector(self.injection, self._seed, hang_s=self.timeout_s + 5.0)
                if self.injection is not None
                else None
            ),
        )
        await self.proxy.start()
        if self.kind.in_process:
            if self.profile.protocol == "anthropic":
                self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
            else:
                import openai  # lazily: a slow import that setup errors should not pay for

                # One client (one connection pool) for the run; attempts get cheap copies
                # with their own base URL. max_retries=0: ours is the only retry layer.
                # follow_redirects=False: a redirect would lead the agent past the meter; it
                # is a link error (the SDK raises on the 3xx).
                self._openai = openai.AsyncOpenAI(
                    base_url=self.proxy.url,
                    api_key=self.proxy.run_key,
                    max_retries=0,
                    timeout=self.timeout_s,
                    http_client=openai.DefaultAsyncHttpxClient(
                        follow_redirects=False, timeout=self.timeout_s
                    ),
                )
        host = TryHost(
            run_dir=self.run_dir,
            run_id=self.run_id,
            suite=self.suite,
            profile=self.profile,
            real_key=self._real_key,
            kind=self.kind,
            command=self.command,
            isolate=self.isolate,
            timeout_s=self.timeout_s,
            policy=self.policy,
            rng=self._rng,
            proxy=self.proxy,
            emit=self.emit,
            log_exception=self._log_exception,
            write_builtin_files=self._write_builtin_files,
            openai_client=self._openai,
            http=self._http,
        )
        self._tries = LocalTries(host) if self.cluster is None else RayTries(host, self.cluster)

    async def _stop(self) -> None:
        if self._openai is not None:
            with contextlib.suppress(Exception):
                await self._openai.close()
        if self._http is not None:
            await self._http.close()
        if self.proxy is not None:
            await self.proxy.stop()
        if self.cluster is not None:
            self.cluster.close()
        if self._io is not None:
            self._io.shutdown(wait=True)  # every submitted write is done before we close
        self.live.close()
        for appender in (self._calls_file, self._attempts_file, self._control_appender):
            if appender is not None:
                appender.close()

    async def _worker(self) -> None:
        """Run the next pending slot whenever the admission has room (the limit, a pause)."""
        pending = self._pending
        while pending and self._stop_reason is None:
            ticket = await self.admission.enter()
            try:
                if not pending or self._stop_reason is not None:
                    return  # another worker took the last slot meanwhile
                task_id, attempt = pending.popleft()
                try:
                    await self._run_slot(task_id, attempt, ticket)
                except OSError as exc:  # the attempt's log or result folder was not written
                    self._stop_for_write_failure(exc, f"the files of {task_id}/{attempt}")
                    return
            finally:
                ticket.leave()

    async def _adaptive_worker(self) -> None:
        """Start the slot the policy hands out whenever this worker is free; when it hands out
        none while attempts are in flight, wait for one of them to land and ask again."""
        policy = self.adaptive
        assert policy is not None
        while self._stop_reason is None:
            ticket = await self.admission.enter()
            slot = policy.next_slot()
            if slot is None:
                ticket.leave()
                if policy.in_flight() == 0:
                    self._slot_freed.set()  # the run is done: wake the waiting workers
                    return
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            task_id, attempt = slot
            try:
                await self._run_slot(task_id, attempt, ticket)
            except OSError as exc:
                self._stop_for_write_failure(exc, f"the files of {task_id}/{attempt}")
                return
            finally:
                ticket.leave()
                if policy.tallies[task_id].in_flight and (task_id, attempt) not in self._landed:
                    policy.abandoned(task_id, attempt)  # no row: the number is free again
                self._landed.discard((task_id, attempt))
                self._slot_freed.set()
                self._emit_progress()

    # --- one attempt ------------------------------------------------------------------------

    def _context(self, task_id: str, attempt: int) -> AttemptContext:
        def output(stream: str, text: str) -> None:
            self.emit(AttemptOutput(self.run_id, task_id, attempt, stream, text))

        def retrying(number: int, code: str, delay: float) -> None:
            self.stats.record_retry()
            self.emit(AttemptRetrying(self.run_id, task_id, attempt, number, code, delay))

        assert self.proxy is not None
        return AttemptContext(
            run_id=self.run_id,
            task=self.suite.task(task_id),
            attempt=attempt,
            model=self.profile.model,
            protocol=self.profile.protocol,
            api_key=self.proxy.run_key,
            timeout_s=self.timeout_s,
            policy=self.policy,
            rng=self._rng,
            emit_output=output,
            on_retry=retrying,
            secrets=(self._real_key, self.proxy.run_key),
            pass_env=(*self.pass_env, *self.profile.pass_env, *self.suite.task(task_id).pass_env),
        )

    async def _run_slot(self, task_id: str, attempt: int, ticket: Ticket | None = None) -> None:
        """One attempt; its admission ``ticket`` is given back once its work ends, so another
        may start while its row is written (the worker itself waits for the row)."""
        self.emit(AttemptStarted(self.run_id, task_id, attempt))
        self.stats.running += 1
        started_at = rundir.iso(rundir.utc_now())
        t0 = time.perf_counter()
        ctx = self._context(task_id, attempt)
        log_path, transcript_path = rundir.attempt_paths(self.run_dir, task_id, attempt)
        client_fields: dict[str, Any] = {}  # a preset client's own figures, for the row
        try:
            assert self._tries is not None
            result, calls, client_fields = await self._tries.run_attempt(
                ctx, log_path, transcript_path
            )
        finally:
            self.stats.running -= 1
            if ticket is not None:
                ticket.leave()
            self.emit(AttemptEnded(self.run_id, task_id, attempt))
        row = {
            "run_id": self.run_id,
            "task_id": task_id,
            "scenario_id": ctx.task.scenario_id,
            "attempt": attempt,
            "outcome": result.outcome,
            "success": result.success,
            "score": result.score,
            "error_code": result.error_code,
            "error_message": (
                redact(result.error_message, ctx.secrets)[:2000] if result.error_message else None
            ),
            "retries": ctx.retries,
            "calls": len(calls),
            "prompt_tokens": _sum_tokens(calls, "prompt_tokens"),
            "completion_tokens": _sum_tokens(calls, "completion_tokens"),
            "total_tokens": _sum_tokens(calls, "total_tokens"),
            "latency_ms": round((time.perf_counter() - t0) * 1000, 3),
            **call_figures(calls),
            **(injection_figures(calls, result.outcome) if self.injection is not None else {}),
            "started_at": started_at,
            "ended_at": rundir.iso(rundir.utc_now()),
            "model": self.profile.model,
            "base_url": self.profile.base_url,
            **client_fields,
        }
        if ctx.result_path is not None:
            row["result_path"] = ctx.result_path  # the last try's, relative to the run dir
        # Shielded: a cancelled worker stops waiting, but the row's bookkeeping still runs.
        await asyncio.shield(self._persist_row(row))

    def _write_builtin_files(
        self,
        ctx: AttemptContext,
        log_path: Path,
        transcript_path: Path,
        transcript: list[dict[str, Any]] | None,
    ) -> None:
        """The builtin agent's log and transcript, written (redacted) on the I/O thread."""
        assert self._io is not None
        self._watch_write(
            self._io.submit(
                _write_attempt_files,
                log_path,
                redact("\n".join(ctx.log_lines) + "\n", ctx.secrets),
                transcript_path,
                transcript,
                ctx.secrets,
            ),
            f"the log of {ctx.task.task_id}/{ctx.attempt}",
        )

    def _persist_row(self, row: dict[str, Any]) -> asyncio.Future[None]:
        """Append + fsync the row on the I/O thread (off the event loop); the future is done
        once it is written or has failed.

        A worker takes its next slot only once its row is on disk, so a write that fails
        (a full disk) stops the run before that worker pays for another attempt: at most the
        attempts in flight are paid without a row. ``AttemptFinished`` is emitted once the
        row is on disk. A kill before that loses only rows not yet written, whose slots
        ``resume`` then runs again (never twice).
        """
        assert self._attempts_file is not None and self._io is not None
        loop = asyncio.get_running_loop()
        self._rows_pending += 1
        self._rows_flushed.clear()
        durable: asyncio.Future[None] = loop.create_future()
        future = self._io.submit(self._attempts_file.append, row)

        def written(_: object) -> None:
            self._rows_pending -= 1
            error = future.exception()
            if error is not None:
                self._stop_for_write_failure(error, rundir.ATTEMPTS)
            else:
                self.stats.record_row(row)
                if self.adaptive is not None:
                    self.adaptive.finished(row)
                    self._landed.add((str(row["task_id"]), int(row["attempt"])))
                self.emit(AttemptFinished(self.run_id, row))
            if self._rows_pending == 0:
                self._rows_flushed.set()
            if not durable.done():
                durable.set_result(None)

        future.add_done_callback(lambda f: loop.call_soon_threadsafe(written, f))
        return durable

    def _submit_recording(self, job: Callable[[], None]) -> None:
        """A call recording's work (read, redact, compress, append) on the I/O thread."""
        assert self._io is not None
        self._watch_write(self._io.submit(job), f"a call recording (*{RECORDING_SUFFIX})")

    def _watch_write(self, future: Future[Any], what: str) -> None:
        """Stop the run if a write done on the I/O thread fails."""
        loop = asyncio.get_running_loop()

        def done(f: Future[Any]) -> None:
            error = f.exception()
            if error is not None:
                loop.call_soon_threadsafe(self._stop_for_write_failure, error, what)

        future.add_done_callback(done)


class _BackgroundRows:
    """Appends rows on the run's I/O thread (in order) instead of on the event loop; a
    failed write is handed to ``watch`` (it stops the run)."""

    def __init__(
        self,
        appender: JsonlAppender,
        io: ThreadPoolExecutor,
        watch: Callable[[Future[Any], str], None],
    ) -> None:
        self._appender = appender
        self._io = io
        self._watch = watch

    def append(self, row: dict[str, Any]) -> None:
        self._watch(self._io.submit(self._appender.append, row), rundir.CALLS)


def _write_attempt_files(
    log_path: Path,
    log_text: str,
    transcript_path: Path,
    transcript: list[dict[str, Any]] | None,
    secrets: tuple[str, ...] = (),
) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open_private(log_path, "w") as fh:
        fh.write(log_text)
    if transcript is not None:
        # The same redaction as the log: a transcript quotes what the provider said.
        text = redact(json.dumps(transcript, indent=1, ensure_ascii=False), secrets)
        with open_private(transcript_path, "w") as fh:
            fh.write(text)


def cannot_write_run_dir(run_dir: Path, exc: OSError) -> str:
    return f"cannot write the run dir {run_dir}: {exc.strerror or exc}"
