"""The progress protocol between the rerun engine and any face (CLI progress bar, TUI).

The engine calls ``listener.on_event(event)`` on its own event loop for every event below; a
listener must be cheap and must never block (a face keeps its own state, or reads the
``RunStats`` the engine keeps up to date, and redraws on a timer).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    run_dir: Path
    spec: dict[str, Any]  # summary: profile, model, base_url, suite, agent, concurrency...
    task_ids: tuple[str, ...]
    repeat: int
    # attempts this execution will make (a resume: only the missing ones); adaptive: at most,
    # narrowed by its AdaptiveProgress events
    total_attempts: int


@dataclass(frozen=True)
class AttemptStarted:
    run_id: str
    task_id: str
    attempt: int


@dataclass(frozen=True)
class AttemptOutput:
    run_id: str
    task_id: str
    attempt: int
    stream: str  # "stdout" | "stderr" (command agent) or "turn" (builtin agent's turn log)
    text: str  # one line, without its newline


@dataclass(frozen=True)
class CallRecorded:
    run_id: str
    task_id: str
    attempt: int
    call: dict[str, Any]  # the calls.jsonl row just written


@dataclass(frozen=True)
class AttemptRetrying:
    run_id: str
    task_id: str
    attempt: int
    retry: int  # 1 for the first retry
    error_code: str
    delay_s: float


@dataclass(frozen=True)
class AttemptEnded:
    """The attempt's work is over (finished or cancelled); its row, if any, follows in
    ``AttemptFinished`` once it is on disk. Count running attempts from Started to Ended."""

    run_id: str
    task_id: str
    attempt: int


@dataclass(frozen=True)
class AttemptPlaced:
    """With ``--executor ray``: the attempt's try started on this cluster node (a try moved
    off a lost node is placed again). Count attempts running per node from Placed to Ended."""

    run_id: str
    task_id: str
    attempt: int
    node: str  # "<node ip>/<node id prefix>"


@dataclass(frozen=True)
class AttemptFinished:
    run_id: str
    row: dict[str, Any]  # the attempts.jsonl row just written


@dataclass(frozen=True)
class AdaptiveProgress:
    """An adaptive run's target progress (reruns/adaptive.py), after every attempt: the
    headline's CI width now vs the target and attempts used vs the budget, and each open task
    with why it is open. ``stop_reason`` is set once the run is done."""

    run_id: str
    target: str  # "ci=5pp" | "volatile"
    attempts: int  # rows so far + in flight
    budget_attempts: int | None
    spent_usd: float | None
    budget_usd: float | None
    success: float | None
    ci_half_width: float | None  # of the success rate, now (a fraction: 0.05 = 5 pp)
    target_half_width: float | None  # the ci target's (None for volatile)
    volatile_tasks: int
    open_tasks: dict[str, str]  # task id -> why it is still open
    stop_reason: str | None
    # Attempts this execution makes at most, as known now (RunStats.total follows it: the
    # progress bar and ETA of an adaptive run narrow as tasks close).
    execution_total: int

    @classmethod
    def of(
        cls, run_id: str, progress: Any, open_tasks: dict[str, str], rows_before: int
    ) -> AdaptiveProgress:
        """From an ``adaptive.Progress`` (duck-typed: events.py imports no engine module)."""
        target = str(progress.target)
        target_half = float(target[3:-2]) / 100 if target.startswith("ci=") else None
        return cls(
            run_id=run_id,
            target=target,
            attempts=progress.attempts,
            budget_attempts=progress.budget_attempts,
            spent_usd=progress.spent_usd,
            budget_usd=progress.budget_usd,
            success=progress.success,
            ci_half_width=progress.ci_half_width,
            target_half_width=target_half,
            volatile_tasks=progress.volatile_tasks,
            open_tasks=open_tasks,
            stop_reason=progress.stop_reason,
            execution_total=max(progress.attempts_bound - rows_before, 0),
        )


@dataclass(frozen=True)
class ConcurrencyChanged:
    """The run's concurrency limit moved (reruns/concurrency.py): the controller's law
    (``reason`` "slow start", "grow", "at the provider's edge", "rate-limit episode") or a
    retune ("set"); ``setting`` is the run's ``--concurrency`` now (``4``, ``auto:1-4-64``)."""

    run_id: str
    limit: int
    previous: int
    reason: str
    setting: str
    episodes: int  # rate-limit episodes so far


@dataclass(frozen=True)
class RunControlled:
    """A control request was applied (``driftdesk ctl``, the workbench): ``row`` is its
    ``control.jsonl`` row (``at``, ``change``, ``by``, ``setting``, ``limit``, ``paused``)."""

    run_id: str
    row: dict[str, Any]


@dataclass(frozen=True)
class RunFinished:
    run_id: str
    status: str  # "completed" | "interrupted" | "failed"
    stats: RunStats


RunEvent = (
    RunStarted
    | AttemptStarted
    | AttemptOutput
    | CallRecorded
    | AttemptRetrying
    | AttemptEnded
    | AttemptFinished
    | RunFinished
    | AttemptPlaced
    | AdaptiveProgress
    | ConcurrencyChanged
    | RunControlled
)


@runtime_checkable
class RunListener(Protocol):
    def on_event(self, event: RunEvent) -> None:
        """Called on the engine's loop; must be cheap and must not block."""


@dataclass
class RunStats:
    """Counters the engine keeps up to date while a run executes (read them from any face)."""

    total: int = 0  # attempts this execution will make
    done: int = 0  # attempts whose row is on disk
    # Attempts executing now (AttemptStarted .. AttemptEnded): never more than the concurrency.
    # An attempt whose work ended but whose row is still being written is in neither count.
    running: int = 0
    by_outcome: Counter[str] = field(default_factory=Counter)  # pass/fail/link_error/harness_error
    link_errors: Counter[str] = field(default_factory=Counter)  # by error_code
    retries: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_mismatches: int = 0  # calls whose served model differed from the requested one
    # The concurrency limit now (fixed or the controller's), whether new attempts are held
    # (ctl --pause), and the rate-limit episodes so far.
    concurrency: int = 0
    concurrency_setting: str = ""
    paused: bool = False
    rate_limit_episodes: int = 0
    started_at: float = field(default_factory=time.monotonic)  # monotonic seconds

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def elapsed_seconds(self) -> float:
        return time.monotonic() - self.started_at

    def eta_seconds(self) -> float | None:
        """Remaining time at the rate so far; ``None`` until one attempt has finished."""
        if self.done <= 0 or self.total <= 0:
            return None
        remaining = max(self.total - self.done, 0)
        return self.elapsed_seconds / self.done * remaining

    # Calls, tokens and retries are counted live (as they happen), so cancelled attempts'
    # spending still shows; outcomes are counted when an attempt's row is written.
    def record_call(self, call: dict[str, Any]) -> None:
        self.calls += 1
        self.prompt_tokens += int(call.get("prompt_tokens") or 0)
        self.completion_tokens += int(call.get("completion_tokens") or 0)
        if call.get("model_mismatch"):
            self.model_mismatches += 1

    def record_retry(self) -> None:
        self.retries += 1

    def record_row(self, row: dict[str, Any]) -> None:
        self.done += 1
        outcome = str(row.get("outcome"))
        self.by_outcome[outcome] += 1
        if outcome == "link_error":
            self.link_errors[str(row.get("error_code"))] += 1

    def record_event(self, event: RunEvent) -> None:
        """Keep these counters from the engine's events, as a face receives them (the same
        rules as the engine's own: running from Started to Ended, outcomes from the rows)."""
        if isinstance(event, AttemptStarted):
            self.running += 1
        elif isinstance(event, CallRecorded):
            self.record_call(event.call)
        elif isinstance(event, AttemptRetrying):
            self.record_retry()
        elif isinstance(event, AttemptEnded):
            self.running = max(self.running - 1, 0)
        elif isinstance(event, AttemptFinished):
            self.record_row(event.row)
        elif isinstance(event, RunStarted):
            self.total = event.total_attempts
            self.started_at = time.monotonic()
            self.concurrency = int(event.spec.get("concurrency") or 0)
            self.concurrency_setting = str(event.spec.get("concurrency_setting") or "")
        elif isinstance(event, AdaptiveProgress):
            self.total = event.execution_total
        elif isinstance(event, ConcurrencyChanged):
            self.concurrency = event.limit
            self.concurrency_setting = event.setting
            self.rate_limit_episodes = event.episodes
        elif isinstance(event, RunControlled):
            self.paused = bool(event.row.get("paused"))
            # a retune to the limit it had already moves no limit: its setting changes all the same
            if isinstance(event.row.get("limit"), int):
                self.concurrency = event.row["limit"]
            if event.row.get("setting"):
                self.concurrency_setting = str(event.row["setting"])
        elif isinstance(event, RunFinished):
            self.running = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunStats:
        """The counters ``to_dict`` gave (another process's): elapsed time counts on from here."""
        return cls(
            total=int(data.get("total") or 0),
            done=int(data.get("done") or 0),
            running=int(data.get("running") or 0),
            by_outcome=Counter(data.get("by_outcome") or {}),
            link_errors=Counter(data.get("link_errors") or {}),
            retries=int(data.get("retries") or 0),
            calls=int(data.get("calls") or 0),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            model_mismatches=int(data.get("model_mismatches") or 0),
            concurrency=int(data.get("concurrency") or 0),
            concurrency_setting=str(data.get("concurrency_setting") or ""),
            paused=bool(data.get("paused")),
            rate_limit_episodes=int(data.get("rate_limit_episodes") or 0),
            started_at=time.monotonic() - float(data.get("elapsed_seconds") or 0.0),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "done": self.done,
            "running": self.running,
            "by_outcome": dict(self.by_outcome),
            "link_errors": dict(self.link_errors),
            "retries": self.retries,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model_mismatches": self.model_mismatches,
            "concurrency": self.concurrency,
            "concurrency_setting": self.concurrency_setting,
            "paused": self.paused,
            "rate_limit_episodes": self.rate_limit_episodes,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
        }


# -- events as JSON lines: how a run executed in another process reaches a face ------------------

_EVENT_TYPES: dict[str, type[Any]] = {
    kind.__name__: kind
    for kind in (
        RunStarted,
        AttemptStarted,
        AttemptOutput,
        CallRecorded,
        AttemptRetrying,
        AttemptEnded,
        AttemptPlaced,
        AttemptFinished,
        RunFinished,
        AdaptiveProgress,
        ConcurrencyChanged,
        RunControlled,
    )
}


def event_to_json(event: RunEvent) -> str:
    """One line of JSON (no newline) that ``event_from_json`` turns back into ``event``."""
    data: dict[str, Any] = {"event": type(event).__name__}
    for item in dataclasses.fields(event):
        data[item.name] = getattr(event, item.name)
    if isinstance(event, RunStarted):
        data["run_dir"] = str(event.run_dir)
        data["task_ids"] = list(event.task_ids)
    elif isinstance(event, RunFinished):
        data["stats"] = event.stats.to_dict()
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)


def event_from_json(line: str | bytes) -> RunEvent:
    """The event of one ``event_to_json`` line; ``ValueError`` for anything else."""
    data = json.loads(line)
    kind = _EVENT_TYPES.get(data.pop("event", None)) if isinstance(data, dict) else None
    if kind is None:
        raise ValueError(f"not a run event: {str(line)[:80]!r}")
    if kind is RunStarted:
        data["run_dir"] = Path(data["run_dir"])
        data["task_ids"] = tuple(data["task_ids"])
    elif kind is RunFinished:
        data["stats"] = RunStats.from_dict(data["stats"])
    try:
        event: RunEvent = kind(**data)
    except TypeError as exc:
        raise ValueError(f"a {kind.__name__} event with other fields: {exc}") from None
    return event
