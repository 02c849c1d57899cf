"""The progress protocol between the rerun engine and any face (CLI progress bar, TUI).

The engine calls ``listener.on_event(event)`` on its own event loop for every event below; a
listener must be cheap and must never block (a face keeps its own state, or reads the
``RunStats`` the engine keeps up to date, and redraws on a timer).
"""

from __future__ import annotations

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
    total_attempts: int  # attempts this execution will make (a resume: only the missing ones)


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
        elif isinstance(event, RunFinished):
            self.running = 0

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
            "elapsed_seconds": round(self.elapsed_seconds, 3),
        }
