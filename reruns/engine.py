"""The rerun engine: every task of a suite run N times, bounded concurrency, honest retries.

One run = one run dir (see docs/ARCHITECTURE.md). Slots are (task_id, attempt) pairs, run by
``concurrency`` workers, attempt-major (all tasks' attempt 0 first) so partial runs cover the
suite evenly. Each finished attempt becomes one attempts.jsonl row, appended and fsynced on
the run's I/O thread (``AttemptFinished`` is emitted once it is on disk); cancelled attempts
write nothing, so ``resume_run`` redoes exactly the missing slots. A run dir is locked while a
process runs it (``rundir.lock_run_dir``), so a live run is never resumed twice.

Cancelling the task running ``execute_run``/``resume_run`` (Ctrl-C in the CLI, a worker
cancel in the TUI) cancels the in-flight attempts, marks the manifest ``interrupted`` and
re-raises ``CancelledError``; a ``RunFinished`` event is emitted first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import aiohttp

from driftdesk import __version__
from driftdesk.fileio import JsonlAppender, JsonlProblem
from driftdesk.paths import rerun_dir, runs_dir
from driftdesk.providers.harness_env import pass_env_problem
from driftdesk.providers.profiles import Profile, ProfileNotFound, ProfileStore
from driftdesk.reruns import rundir
from driftdesk.reruns.adaptive import AdaptiveDesign, AdaptivePolicy, DesignError
from driftdesk.reruns.agents import (
    COMMAND_PLACEHOLDERS,
    AttemptContext,
    kill_leftover_harnesses,
    render_command,
)
from driftdesk.reruns.call_verdicts import call_figures
from driftdesk.reruns.demo import demo_profile, is_demo_run, start_demo_sandbox
from driftdesk.reruns.events import (
    AdaptiveProgress,
    AttemptEnded,
    AttemptFinished,
    AttemptOutput,
    AttemptRetrying,
    AttemptStarted,
    CallRecorded,
    RunEvent,
    RunFinished,
    RunListener,
    RunStarted,
    RunStats,
)
from driftdesk.reruns.faults import (
    FaultInjector,
    InjectionSpec,
    InjectSpecError,
    injection_figures,
    parse_inject,
)
from driftdesk.reruns.inspect_harness import (
    InspectRunError,
    check_inspect_ready,
    inspect_suite,
    run_inspect_eval,
)
from driftdesk.reruns.isolation import IsolationUnavailable, check_isolation
from driftdesk.reruns.local_tries import LocalTries
from driftdesk.reruns.preflight import PROBE_TIMEOUT_S, check_endpoint
from driftdesk.reruns.presets import (
    PRESETS,
    client_identity,
    preset_problem,
)
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.ray_executor import (
    EXECUTORS,
    RayCluster,
    RaySettings,
    RayUnavailable,
    check_address,
)
from driftdesk.reruns.ray_tries import RayTries
from driftdesk.reruns.recording import (
    DEFAULT_MAX_RECORDED_MB,
    CallRecorder,
    RecordingSettings,
    max_recorded_mb_problem,
    tries_begun,
)
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.sandbox import SandboxServer
from driftdesk.reruns.suites import Suite, SuiteError, builtin_suites, load_suite
from driftdesk.reruns.tries import TryHost
from driftdesk.reruns.workspace import CHECK_RULE
from driftdesk.rundir import (
    INSPECT_LOG_DIR,
    RECORDING_SUFFIX,
)
from driftdesk.secrets import redact

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)


AgentName = Literal["builtin", "command", "inspect", "claude-code", "codex"]
AGENTS: tuple[AgentName, ...] = get_args(AgentName)


# Attempts at once for a run against a real provider: low, so a new key's rate limit is not
# hit at once (the demo's sandbox has none and runs 8). The CLI and the launch form offer it.
DEFAULT_CONCURRENCY = 2
PROGRESS_SECONDS = 0.25  # an adaptive run's progress events, at most this often


@dataclass
class RunSpec:
    profile: str | Profile
    suite: str  # a built-in suite name (``basic``) or a path to a suite JSONL file
    repeat: int = 5
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = 120.0
    tasks: list[str] | None = None
    sample: int | None = None
    seed: int = 0
    only_failed: Path | None = None
    only_volatile: Path | None = None
    out_dir: Path = field(default_factory=lambda: Path("runs"))
    agent: AgentName = "builtin"
    command: str | None = None
    isolate: bool = False  # run the harness under bubblewrap (reruns/isolation.py)
    # Variables (names or globs) of ours a harness gets beyond the allow-list (--pass-env;
    # providers/harness_env.py). The manifest keeps the names, never a value.
    pass_env: list[str] = field(default_factory=list)
    # In-memory key override (the demo, when no keyring exists). Never written anywhere.
    api_key: str | None = field(default=None, repr=False)
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    # Lines of the suite file that cannot be read: refused unless told to leave them out.
    skip_bad_lines: bool = False
    # Check the endpoint once (the doctor's probe) before the first attempt; off for tests that
    # script every request the endpoint gets.
    probe: bool = False
    # Where attempts run: here, or as Ray tasks on a cluster (reruns/ray_executor.py).
    executor: Literal["local", "ray"] = "local"
    ray: RaySettings = field(default_factory=RaySettings)
    # Call recordings (reruns/recording.py): off with --no-bodies (or the profile's
    # record_bodies = false); the per-slot cap in MiB of compressed bytes, 0: none.
    record_bodies: bool = True
    max_recorded_mb: float = DEFAULT_MAX_RECORDED_MB
    # Fault injection at the proxy (reruns/faults.py): ``429=5%,500=2%``...; None: the
    # profile's ``inject`` setting; "none": no faults whatever the profile says.
    inject: str | None = None
    # Adaptive reruns (reruns/adaptive.py): None, every task runs ``repeat`` times.
    adaptive: AdaptiveDesign | None = None

    @classmethod
    def rerun_of(
        cls,
        manifest: dict[str, Any],
        tasks: list[str],
        source: Path | None,
        *,
        profile: str | Profile | None = None,
        out_dir: Path | None = None,
        api_key: str | None = None,
    ) -> RunSpec:
        """A new run of ``tasks`` under the conditions the run of ``manifest`` recorded (suite,
        repeats or adaptive design, concurrency, timeout, seed, agent, command, isolation,
        retry policy, executor),
        beside
        its ``source`` run dir unless ``out_dir`` says otherwise."""
        suite = manifest.get("suite") or {}
        recorded = manifest.get("agent")
        # An imported run ("import:tau2"...) has no agent of ours: its tasks rerun built in.
        agent: AgentName = next((a for a in AGENTS if a == recorded), "builtin")
        if out_dir is None:
            out_dir = rerun_dir(source) if source is not None else runs_dir()
        ran_on = manifest.get("executor") or {"kind": "local"}
        on_ray = ran_on.get("kind") == "ray"
        recording = RecordingSettings.from_manifest(manifest)
        injection = InjectionSpec.from_manifest(manifest)
        return cls(
            profile=profile or str(manifest.get("profile")),
            suite=str(suite.get("path") or suite.get("name") or "basic"),
            repeat=int(manifest.get("repeat") or 5),
            concurrency=int(manifest.get("concurrency") or 4),
            timeout_s=float(manifest.get("timeout_seconds") or 120.0),
            tasks=list(tasks),
            seed=int(manifest.get("seed") or 0),
            out_dir=out_dir,
            agent=agent,
            command=manifest.get("command"),
            isolate=bool(manifest.get("isolate", False)),
            pass_env=[str(n) for n in manifest.get("pass_env") or []],
            api_key=api_key,
            retry_policy=RetryPolicy.from_manifest(manifest),
            probe=True,
            executor="ray" if on_ray else "local",
            ray=RaySettings.from_manifest(ran_on) if on_ray else RaySettings(),
            record_bodies=recording.bodies,
            max_recorded_mb=recording.max_recorded_mb,
            inject=injection.text() if injection is not None else "none",
            adaptive=(
                AdaptiveDesign.from_manifest(manifest["adaptive"])
                if isinstance(manifest.get("adaptive"), dict)
                else None
            ),
        )


@dataclass
class RunOutcome:
    run_dir: Path
    run_id: str
    status: str  # "completed" | "interrupted" | "failed"
    stats: RunStats
    notices: list[str] = field(default_factory=list)  # e.g. a torn last line that was dropped
    reason: str | None = None  # one line: why a run stopped early (a full disk)


class RunSetupError(ValueError):
    """A run that cannot start as asked (bad spec, unknown tasks, changed suite...)."""


def _resolve_profile(profile: str | Profile) -> Profile:
    if isinstance(profile, Profile):
        profile.validate()
        return profile
    found = ProfileStore().get(profile)
    problem = pass_env_problem(found.pass_env)  # hand-written in the TOML file
    if problem:
        raise RunSetupError(f"profile {found.name!r}: {problem}")
    return found


def _resolve_key(profile: Profile, override: str | None) -> str:
    if override:
        return override
    if profile.no_key:
        # A keyless endpoint: an unguessable stand-in the proxy never sends upstream, so the
        # scrubbing that looks for "the real key" still has something to look for.
        from secrets import token_urlsafe

        return "dd-keyless-" + token_urlsafe(24)
    from driftdesk.providers.keys import get_key

    return get_key(profile.name)


def select_tasks(spec: RunSpec, suite: Suite) -> list[str]:
    """The task ids to run, in suite order: --tasks, --only-failed/--only-volatile, --sample."""
    chosen = suite.task_ids
    if spec.tasks:
        known = set(chosen)
        unknown = [t for t in spec.tasks if t not in known]
        if unknown:
            raise RunSetupError(f"unknown task ids for suite {suite.name}: {', '.join(unknown)}")
        wanted = set(spec.tasks)
        chosen = [t for t in chosen if t in wanted]
    if spec.only_failed and spec.only_volatile:
        raise RunSetupError("use --only-failed or --only-volatile, not both")
    earlier = spec.only_failed or spec.only_volatile
    if earlier is not None:
        from driftdesk.analysis.selection import select_task_ids

        which: Literal["failed", "volatile"] = "failed" if spec.only_failed else "volatile"
        selected = set(select_task_ids([Path(earlier)], which=which))
        chosen = [t for t in chosen if t in selected]
        if not chosen:
            raise RunSetupError(f"no {which} tasks of suite {suite.name} in {earlier}")
    if spec.sample is not None:
        if spec.sample < 1:
            raise RunSetupError("--sample must be at least 1")
        picked = set(random.Random(spec.seed).sample(chosen, min(spec.sample, len(chosen))))
        chosen = [t for t in chosen if t in picked]
    return chosen


def _sum_tokens(calls: list[dict[str, Any]], key: str) -> int | None:
    values = [c[key] for c in calls if isinstance(c.get(key), int)]
    return sum(values) if values else None


def _harness_of(manifest: dict[str, Any]) -> tuple[str, str | None, bool]:
    """The run's harness as its manifest recorded it: agent, command, bubblewrap isolation."""
    command = manifest.get("command")
    return (
        str(manifest.get("agent", "builtin")),
        str(command) if command is not None else None,
        bool(manifest.get("isolate", False)),
    )


class _Execution:
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
        concurrency: int | None = None,
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
        self.agent, self.command, self.isolate = _harness_of(manifest)
        self.pass_env = tuple(str(n) for n in manifest.get("pass_env") or ())
        self.timeout_s = float(manifest.get("timeout_seconds", 120.0))
        self.concurrency = max(1, concurrency or int(manifest.get("concurrency", 2)))
        seed = int(manifest.get("seed") or 0)
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
        try:
            await self._start()
            if self.agent == "inspect":  # one inspect process for the whole run
                await run_inspect_eval(self)
                slots = []
            pending = deque(slots)
            if self.adaptive is not None:
                self._emit_progress(now=True)
                workers = self._workers = [
                    asyncio.create_task(self._adaptive_worker()) for _ in range(self.concurrency)
                ]
            else:
                workers = self._workers = [
                    asyncio.create_task(self._worker(pending))
                    for _ in range(min(self.concurrency, len(slots)))
                ]
            try:
                await asyncio.gather(*workers)
            except BaseException:
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
            await self._stop()
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
                rundir.write_final_manifest(self.run_dir, self.manifest)
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
        except OSError as exc:
            raise RunSetupError(_cannot_write(self.run_dir, exc)) from None
        # File writes and fsyncs run on one I/O thread, in submission order, so they never
        # stall the event loop (and the proxy's streams with it). One thread: on a small
        # machine more threads only compete with the loop for the cores.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftdesk-run-io")
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
            injector=(
                # An injected timeout hangs past the client's timeout and the attempt's.
                FaultInjector(self.injection, self._seed, hang_s=self.timeout_s + 5.0)
                if self.injection is not None
                else None
            ),
        )
        await self.proxy.start()
        if self.agent == "builtin":
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
            agent=self.agent,
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
        for appender in (self._calls_file, self._attempts_file):
            if appender is not None:
                appender.close()

    async def _worker(self, pending: deque[tuple[str, int]]) -> None:
        while pending and self._stop_reason is None:
            task_id, attempt = pending.popleft()
            try:
                await self._run_slot(task_id, attempt)
            except OSError as exc:  # the attempt's log or result folder could not be written
                self._stop_for_write_failure(exc, f"the files of {task_id}/{attempt}")
                return

    async def _adaptive_worker(self) -> None:
        """Start the slot the policy hands out whenever this worker is free; when it hands out
        none while attempts are in flight, wait for one of them to land and ask again."""
        policy = self.adaptive
        assert policy is not None
        while self._stop_reason is None:
            slot = policy.next_slot()
            if slot is None:
                if policy.in_flight() == 0:
                    self._slot_freed.set()  # the run is done: wake the waiting workers
                    return
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            task_id, attempt = slot
            try:
                await self._run_slot(task_id, attempt)
            except OSError as exc:
                self._stop_for_write_failure(exc, f"the files of {task_id}/{attempt}")
                return
            finally:
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

    async def _run_slot(self, task_id: str, attempt: int) -> None:
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
    with rundir.open_private(log_path, "w") as fh:
        fh.write(log_text)
    if transcript is not None:
        # The same redaction as the log: a transcript quotes what the provider said.
        text = redact(json.dumps(transcript, indent=1, ensure_ascii=False), secrets)
        with rundir.open_private(transcript_path, "w") as fh:
            fh.write(text)


async def _checkpoint() -> None:
    """Let the loop run between set-up steps (a big suite takes seconds to set up): a Ctrl-C or
    SIGTERM, which cancels the run's task, takes effect at the next step, not at the end."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def _cannot_write(run_dir: Path, exc: OSError) -> str:
    return f"cannot write the run dir {run_dir}: {exc.strerror or exc}"


def _check_agent(
    agent: str, command: str | None, suite: Suite, task_ids: list[str], isolate: bool = False
) -> None:
    if agent not in ("builtin", "command", "inspect", *PRESETS):
        raise RunSetupError(
            f"unknown agent {agent!r}: use builtin, command, inspect, " + " or ".join(PRESETS)
        )
    if isolate:
        if agent == "builtin":
            raise RunSetupError(
                "--isolate sandboxes a harness; the builtin agent runs inside driftdesk"
            )
        if agent == "inspect":
            raise RunSetupError(
                "--isolate sandboxes one harness per attempt; inspect runs once for the whole "
                "run and is not isolated"
            )
        try:
            check_isolation()
        except IsolationUnavailable as exc:
            raise RunSetupError(str(exc)) from None
    if agent == "inspect":
        return
    if agent in PRESETS:
        lacking = [t for t in task_ids if not suite.task(t).prompt_text]
        if lacking:
            raise RunSetupError(
                f"--agent {agent} needs a prompt for every task; missing in: "
                + ", ".join(lacking[:5])
            )
        return
    if agent == "command":
        if not command:
            raise RunSetupError("--agent command needs --command TEMPLATE")
        render_command(command, dict.fromkeys(COMMAND_PLACEHOLDERS, "x"))
        return
    lacking = [t for t in task_ids if not suite.task(t).runnable_by_builtin]
    if lacking:
        raise RunSetupError(
            "the builtin agent needs a prompt (or messages) and expected for every task; "
            f"missing in: {', '.join(lacking[:5])}"
        )


def _inspect_setup(spec: RunSpec, profile: Profile) -> tuple[Suite, list[str]]:
    """The inspect task file as a suite; its samples become the tasks once inspect ran."""
    if spec.sample is not None or spec.only_failed or spec.only_volatile:
        raise RunSetupError(
            "--agent inspect takes --tasks (sample ids), not --sample/--only-failed/--only-volatile"
        )
    try:
        check_inspect_ready(profile.protocol)
    except InspectRunError as exc:
        raise RunSetupError(str(exc)) from None
    return inspect_suite(spec.suite), []


def _check_preset(agent: str, profile: Profile, executor: str = "local") -> None:
    """A client preset's client is installed and speaks the profile's protocol (before the
    run starts, so nothing is half-created). On Ray the client runs on the nodes, not here:
    they are asked once connected (``_connect_executor``)."""
    if executor == "ray" and agent in PRESETS:
        problem = PRESETS[agent].check_profile(profile.protocol)
    else:
        problem = preset_problem(agent, profile.protocol)
    if problem is not None:
        raise RunSetupError(problem)


def _suite_manifest(suite: Suite) -> dict[str, Any]:
    return {"path": str(suite.path), "name": suite.name, "sha256": suite.sha256}


def _check_executor(executor: str, agent: str) -> None:
    if executor not in EXECUTORS:
        raise RunSetupError(f"unknown executor {executor!r}: use " + " or ".join(EXECUTORS))
    if executor == "ray" and agent == "inspect":
        raise RunSetupError(
            "--agent inspect runs one inspect process for the whole run, with its own "
            "concurrency, and driftdesk reads its log live: it runs here (use --executor local)"
        )


def _connect_executor(executor: str, settings: RaySettings, agent: str) -> RayCluster | None:
    """None for the local executor; for ``ray`` the cluster, connected (or a clear refusal
    before anything is written)."""
    _check_executor(executor, agent)
    if executor == "local":
        return None
    try:
        check_address(settings.address)
        cluster = RayCluster(settings)
        cluster.connect()
    except (RayUnavailable, ValueError) as exc:
        raise RunSetupError(str(exc)) from None
    if agent in PRESETS:
        preset = PRESETS[agent]
        try:
            lacking = cluster.nodes_without(preset.executable)
        except RayUnavailable as exc:  # the cluster failed while asked: refused, left closed
            cluster.close()
            raise RunSetupError(str(exc)) from None
        if lacking:
            cluster.close()
            raise RunSetupError(
                f"--agent {agent} on Ray runs `{preset.executable}` on the nodes; it is not on "
                f"the PATH of node(s) {', '.join(lacking)}: install it there with "
                f"{preset.install_hint} (the PATH the node was started with counts)"
            )
    return cluster


async def execute_run(spec: RunSpec, listener: RunListener | None = None) -> RunOutcome:
    """Start a new run dir and run every (task, attempt) slot (adaptive: the slots its policy
    hands out). Cancel the task to interrupt."""
    if spec.adaptive is not None and spec.agent == "inspect":
        raise RunSetupError(
            "--adaptive chooses each next attempt; --agent inspect runs one inspect process "
            "for the whole run"
        )
    if spec.repeat < 1:
        raise RunSetupError("--repeat must be at least 1")
    if spec.concurrency < 1:
        raise RunSetupError("--concurrency must be at least 1")
    if spec.timeout_s <= 0:
        raise RunSetupError("--timeout must be positive")
    problem = max_recorded_mb_problem(spec.max_recorded_mb)
    if problem is not None:
        raise RunSetupError(problem)
    profile = _resolve_profile(spec.profile)
    try:
        injection = parse_inject(spec.inject if spec.inject is not None else profile.inject)
    except InjectSpecError as exc:
        raise RunSetupError(str(exc)) from None
    notices: list[str] = []
    if spec.agent == "inspect":
        suite, task_ids = _inspect_setup(spec, profile)
    else:
        suite = load_suite(spec.suite)
        notices = suite.bad_lines(skip=spec.skip_bad_lines)
        await _checkpoint()
        task_ids = select_tasks(spec, suite)
    await _checkpoint()
    _check_agent(spec.agent, spec.command, suite, task_ids, spec.isolate)
    if pass_env_problem(spec.pass_env):
        raise RunSetupError(str(pass_env_problem(spec.pass_env)))
    _check_executor(spec.executor, spec.agent)
    _check_preset(spec.agent, profile, spec.executor)
    if spec.adaptive is not None:
        _row_cost(spec.adaptive, profile)  # a dollar budget needs a price: refused here
    await _checkpoint()
    real_key = _resolve_key(profile, spec.api_key)
    if spec.probe:
        probe_key = None if profile.no_key else real_key
        notices += await check_endpoint(profile, probe_key, min(spec.timeout_s, PROBE_TIMEOUT_S))
    cluster = _connect_executor(spec.executor, spec.ray, spec.agent)
    try:
        return await _execute_new_run(
            spec, profile, suite, task_ids, real_key, notices, cluster, listener, injection
        )
    finally:
        if cluster is not None:
            cluster.close()


async def _execute_new_run(
    spec: RunSpec,
    profile: Profile,
    suite: Suite,
    task_ids: list[str],
    real_key: str,
    notices: list[str],
    cluster: RayCluster | None,
    listener: RunListener | None,
    injection: InjectionSpec | None = None,
) -> RunOutcome:
    now = rundir.utc_now()
    made = rundir.missing_folders(Path(spec.out_dir))  # taken back if the run is refused
    try:
        run_id, run_dir = rundir.create_run_dir(
            Path(spec.out_dir), profile.name, profile.model, now
        )
    except OSError as exc:
        rundir.discard_unstarted_run_dir(None, made)
        raise RunSetupError(_cannot_write(Path(spec.out_dir), exc)) from None
    manifest: dict[str, Any] = {
        "run_id": run_id,
        "profile": profile.name,
        "protocol": profile.protocol,
        "base_url": profile.base_url,
        "model": profile.model,
        # How the key travelled (never the key): resume sends it the same way.
        "auth_header": profile.auth,
        "no_key": profile.no_key,
        "suite": _suite_manifest(suite),
        # adaptive: the first round every task gets (the rest follow the design)
        "repeat": spec.adaptive.min_repeats if spec.adaptive else spec.repeat,
        "concurrency": spec.concurrency,
        "timeout_seconds": spec.timeout_s,
        "agent": spec.agent,
        # the client behind the agent and its version (analysis.agent_identity reads it)
        "client": await asyncio.to_thread(client_identity, spec.agent),
        "check_rule": CHECK_RULE,  # how a task's check exit became an outcome
        "command": spec.command,
        "isolate": spec.isolate,
        "pass_env": list(spec.pass_env),  # names and globs only, never a value
        "executor": cluster.settings.manifest() if cluster is not None else {"kind": "local"},
        "seed": spec.seed,
        "sample": spec.sample,
        "selection": (
            {"only_failed": str(spec.only_failed)}
            if spec.only_failed
            else {"only_volatile": str(spec.only_volatile)}
            if spec.only_volatile
            else None
        ),
        "tasks": task_ids,
        "retry_policy": spec.retry_policy.to_manifest(),
        "recording": RecordingSettings(
            bodies=spec.record_bodies and profile.records_bodies,
            max_recorded_mb=spec.max_recorded_mb,
        ).to_manifest(),
        "driftdesk_version": __version__,
        "started_at": rundir.iso(now),
        "ended_at": None,
        "status": "running",
        "resumes": [],
    }
    if injection is not None:  # a run without injection has no such key at all
        manifest["injection"] = injection.to_manifest()
    if spec.agent == "inspect":
        manifest["inspect"] = {"sample_ids": spec.tasks}
    lock = rundir.lock_run_dir(run_dir)
    try:
        policy = None
        if spec.adaptive is not None:
            manifest["adaptive"] = spec.adaptive.to_manifest()
            policy = _adaptive_policy(manifest, profile, [])
        return await _write_manifest_and_execute(
            _Execution(
                run_dir=run_dir,
                manifest=manifest,
                suite=suite,
                profile=profile,
                real_key=real_key,
                listener=listener,
                notices=notices,
                cluster=cluster,
            ),
            policy,
            rundir.pending_slots(task_ids, spec.repeat, [], False),
        )
    except BaseException:
        # Refused (or interrupted) before its manifest was written: no run dir is left.
        rundir.discard_unstarted_run_dir(run_dir, made)
        raise
    finally:
        rundir.unlock_run_dir(lock)


def _adaptive_policy(
    manifest: dict[str, Any], profile: Profile, rows: list[dict[str, Any]]
) -> AdaptivePolicy:
    """The policy of an adaptive run's manifest, told the rows it already has; with a USD
    budget, the model's price (refused before anything runs if there is none)."""
    try:
        design = AdaptiveDesign.from_manifest(manifest["adaptive"])
    except DesignError as exc:
        raise RunSetupError(f"the run's adaptive design: {exc}") from None
    return AdaptivePolicy(
        design,
        [str(t) for t in manifest["tasks"]],
        rows,
        cost_of=_row_cost(design, profile),
    )


def _row_cost(design: AdaptiveDesign, profile: Profile) -> Callable[[dict[str, Any]], float] | None:
    """A row's cost in USD at the model's price, for a dollar budget (None without one);
    ``RunSetupError`` when the model has no price."""
    cost_of = None
    if design.budget_usd is not None:
        from driftdesk.analysis.prices import PriceTableError, load_prices, price_for

        try:
            price = price_for(profile.model, load_prices())
        except PriceTableError as exc:
            raise RunSetupError(str(exc)) from None
        if price is None:
            raise RunSetupError(
                f"--budget-usd needs a price for model {profile.model!r}: add it to the price "
                "table (driftdesk prices), or use --budget-attempts"
            )

        def cost_of(row: dict[str, Any]) -> float:
            return price.cost(
                int(row.get("prompt_tokens") or 0), int(row.get("completion_tokens") or 0)
            )

    return cost_of


async def _write_manifest_and_execute(
    execution: _Execution, policy: AdaptivePolicy | None, slots: list[tuple[str, int]]
) -> RunOutcome:
    """What a new run and a resume share once the run dir is locked: the manifest written
    (with the space its last version needs held back), then the slots, or the adaptive
    design's, run. A manifest that cannot be written is a set-up error: nothing ran."""
    run_dir = execution.run_dir
    try:
        rundir.reserve_manifest_space(run_dir)
        rundir.write_manifest(run_dir, execution.manifest)
    except OSError as exc:
        rundir.release_manifest_space(run_dir)
        if execution.cluster is not None:
            execution.cluster.close()
        raise RunSetupError(_cannot_write(run_dir, exc)) from None
    if policy is not None:
        return await execution.run_adaptive(policy)
    return await execution.run(slots)


def _load_suite_for(manifest: dict[str, Any]) -> Suite:
    info = manifest.get("suite") or {}
    path = Path(str(info.get("path", "")))
    name = str(info.get("name", ""))
    if path.is_file():
        suite = load_suite(path)
    elif name in builtin_suites():
        suite = load_suite(name)  # the package moved (reinstalled): same built-in suite
    else:
        raise RunSetupError(f"the run's suite file {path} is gone; cannot resume")
    if info.get("sha256") and suite.sha256 != info["sha256"]:
        raise RunSetupError(
            f"suite {suite.path} changed since the run started (sha256 differs); resuming would "
            "mix two suites — start a new run instead"
        )
    return suite


async def resume_run(
    run_dir: Path,
    listener: RunListener | None = None,
    retry_link_errors: bool = False,
    *,
    api_key: str | None = None,
    profile: Profile | None = None,
    concurrency: int | None = None,
    probe: bool = False,
    executor: str | None = None,
    ray: RaySettings | None = None,
) -> RunOutcome:
    """Run exactly the missing (task, attempt) slots of ``run_dir``; with
    ``retry_link_errors`` also the slots whose latest row is a link_error (the new row is
    appended later in the file and supersedes it: the last row per slot wins). ``executor``
    and ``ray`` default to the run's own (its manifest)."""
    run_dir = Path(run_dir)
    manifest = rundir.read_manifest(run_dir)
    if manifest.get("agent") == "inspect":
        raise RunSetupError(
            "an inspect run is not resumed by driftdesk: run `inspect eval-retry` on its log "
            f"({run_dir / INSPECT_LOG_DIR}), then `driftdesk import` that folder"
        )
    demo_sandbox: SandboxServer | None = None
    demo_note = ""
    if profile is None:
        try:
            stored: Profile | None = ProfileStore().get(str(manifest["profile"]))
        except ProfileNotFound:
            stored = None
        # The run's own endpoint, model and key header, even if the profile was edited since
        # (runs from before the manifest said how the key travelled: the profile's way).
        auth_header = manifest.get("auth_header") or (stored.auth_header if stored else None)
        no_key = manifest.get("no_key")
        if stored is None and is_demo_run(manifest):
            # The demo's profile and sandbox lived only while the demo ran: a new sandbox
            # like it serves the resume.
            demo_sandbox = await asyncio.to_thread(start_demo_sandbox)
            profile = demo_profile(demo_sandbox)
            demo_note = (
                f"a demo run: resumed against a new simulated sandbox at {profile.base_url} "
                "(no network, no key)"
            )
    if profile is None:
        profile = Profile(
            name=str(manifest["profile"]),
            protocol=str(manifest["protocol"]),
            base_url=str(manifest["base_url"]),
            model=str(manifest["model"]),
            headers=stored.headers if stored else {},
            auth_header=str(auth_header) if auth_header else None,
            no_key=bool(stored.no_key if no_key is None and stored else no_key),
            record_bodies=stored.record_bodies if stored else None,
        )
    try:
        lock = rundir.lock_run_dir(run_dir)  # before touching files: never under a live run
        try:
            suite = _load_suite_for(manifest)
            await _checkpoint()
            notices: list[str] = [demo_note] if demo_note else []
            leftovers = kill_leftover_harnesses(str(manifest["run_id"]), run_dir)
            if leftovers:
                notices.append(
                    f"killed {leftovers} harness processes left by the run's last process"
                )
            for name in (rundir.ATTEMPTS, rundir.CALLS):
                try:
                    dropped = rundir.drop_torn_tail(run_dir / name)
                except OSError as exc:
                    raise RunSetupError(_cannot_write(run_dir, exc)) from None
                if dropped:
                    notices.append(
                        f"{name}: dropped a torn last line ({dropped} bytes) left by an interrupted writer"
                    )
            problems: list[JsonlProblem] = []
            rows = rundir.read_attempt_rows(run_dir, problems)
            await _checkpoint()
            notices.extend(f"{rundir.ATTEMPTS} {p} (skipped)" for p in problems)
            task_ids = [str(t) for t in manifest.get("tasks") or []]
            policy = None
            if manifest.get("adaptive"):
                # The design goes on from the rows: link errors are replaced anyway.
                policy = _adaptive_policy(manifest, profile, rows)
                slots = []
                if retry_link_errors:
                    notices.append(
                        "an adaptive run gives a task a new attempt for each link error by "
                        "itself: --retry-link-errors changes nothing here"
                    )
            else:
                slots = rundir.pending_slots(
                    task_ids, int(manifest["repeat"]), rows, retry_link_errors
                )
            agent, command, isolate = _harness_of(manifest)
            _check_agent(agent, command, suite, task_ids, isolate)
            ran_on = manifest.get("executor") or {"kind": "local"}
            executor = executor or str(ran_on.get("kind", "local"))
            _check_preset(agent, profile, executor)
            real_key = _resolve_key(profile, api_key)
            if probe and (slots or policy is not None):
                timeout = float(manifest.get("timeout_seconds", PROBE_TIMEOUT_S))
                probe_key = None if profile.no_key else real_key
                notices += await check_endpoint(profile, probe_key, min(timeout, PROBE_TIMEOUT_S))
            if ray is None and ran_on.get("kind") == "ray":
                ray = RaySettings.from_manifest(ran_on)
            cluster = _connect_executor(executor, ray or RaySettings(), agent)
            # The run's own recording settings; a profile set to record no bodies since wins.
            recording = RecordingSettings.from_manifest(manifest)
            recording.bodies = recording.bodies and profile.records_bodies
            manifest["recording"] = recording.to_manifest()
            manifest["status"] = "running"
            manifest.setdefault("resumes", []).append(
                {
                    "started_at": rundir.iso(rundir.utc_now()),
                    "retry_link_errors": retry_link_errors,
                    "slots": len(slots) if policy is None else None,  # adaptive: as it goes
                    "pid": os.getpid(),
                    "executor": cluster.settings.manifest() if cluster else {"kind": "local"},
                    # its attempts' client and check rule (the run's may be older)
                    "client": await asyncio.to_thread(client_identity, agent),
                    "check_rule": CHECK_RULE,
                }
            )
            return await _write_manifest_and_execute(
                _Execution(
                    run_dir=run_dir,
                    manifest=manifest,
                    suite=suite,
                    profile=profile,
                    real_key=real_key,
                    listener=listener,
                    notices=notices,
                    cluster=cluster,
                    concurrency=concurrency,
                ),
                policy,
                slots,
            )
        finally:
            rundir.unlock_run_dir(lock)
    finally:
        if demo_sandbox is not None:
            await asyncio.to_thread(demo_sandbox.stop)


__all__ = [
    "RunOutcome",
    "RunSetupError",
    "RunSpec",
    "SuiteError",
    "execute_run",
    "resume_run",
    "select_tasks",
]
