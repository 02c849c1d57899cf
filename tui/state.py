"""Shared state for live runs: the engine's listener writes here, the screens redraw from here.

The listener is called on the engine's own event loop (a worker thread), so every update is a
cheap in-memory write (dict/deque/counter), and ``version`` lets a pane skip a redraw when
nothing changed since its last tick. Logs are capped per attempt so a chatty agent cannot grow
memory without bound.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.reruns.events import (
    AdaptiveProgress,
    AttemptEnded,
    AttemptFinished,
    AttemptOutput,
    AttemptPlaced,
    AttemptRetrying,
    AttemptStarted,
    CallRecorded,
    RunEvent,
    RunFinished,
    RunStarted,
    RunStats,
)

LOG_LINES_PER_ATTEMPT = 2000

AttemptKey = tuple[str, int]


@dataclass(repr=False)
class LiveRun:
    """One run as the TUI sees it while the engine executes it (implements ``RunListener``)."""

    # Short: Textual describes every worker by the repr of its arguments, and the Run screen
    # starts one with this run each cost tick (the dataclass repr of a 10k run is megabytes).
    def __repr__(self) -> str:
        return (
            f"LiveRun({self.label!r}, {self.run_id or '(starting)'}, {self.status}, "
            f"{self.done}/{self.total})"
        )

    label: str
    run_id: str = ""
    run_dir: Path | None = None
    status: str = "starting"  # starting | running | completed | interrupted | failed
    spec: dict[str, Any] = field(default_factory=dict)
    task_ids: tuple[str, ...] = ()
    repeat: int = 0
    # The counters (done, running, outcomes, retries, calls, tokens), kept from the events by
    # the same rules as the engine's and the CLI's; read them through the properties below.
    stats: RunStats = field(default_factory=RunStats)
    cells: dict[AttemptKey, str] = field(default_factory=dict)  # running|retrying|<outcome>
    rows: dict[AttemptKey, dict[str, Any]] = field(default_factory=dict)
    # A finished attempt's lines are a tuple: a run's state outlives many collections, and
    # a full one (the app paused) traverses every deque of 10,000 attempts, while a tuple of
    # strings the collector stops tracking (bench_tui_live.py --census).
    logs: dict[AttemptKey, deque[str] | tuple[str, ...]] = field(default_factory=dict)
    # Lines ever appended per attempt (the deque drops old ones), so a pane can tail the new.
    log_counts: Counter[AttemptKey] = field(default_factory=Counter)
    last_started: AttemptKey | None = None
    last_active: AttemptKey | None = None  # the attempt that most recently logged something
    error: str | None = None
    # From analysis (prices × tokens), refreshed by the Run screen: None until known.
    cost_text: str | None = None
    cost_final: bool = False
    version: int = 0
    started_monotonic: float = field(default_factory=time.monotonic)
    ended_monotonic: float | None = None
    # Set by the worker thread that runs the engine (or relays its child's events), so a cancel
    # can reach its loop.
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    # The App's worker executing this run (a textual Worker): wait on this one, not on a group.
    worker: Any = None
    pid: int | None = None  # the child process executing the run (``reruns.run_process``)
    # --executor ray: attempts running per cluster node (from AttemptPlaced to AttemptEnded).
    running_per_node: Counter[str] = field(default_factory=Counter)
    node_of: dict[AttemptKey, str] = field(default_factory=dict)
    # An adaptive run's target progress and open tasks (the latest AdaptiveProgress).
    adaptive: AdaptiveProgress | None = None
    # A run another process executes, tailed from its run dir (``tui.follow``): not this
    # app's to cancel, nor to ask about on quit.
    followed: bool = False
    # Calls seen per attempt: the Run screen reads the followed attempt's recording again
    # (the commands its client ran) only when it has new calls.
    call_counts: Counter[AttemptKey] = field(default_factory=Counter)

    # -- RunListener -------------------------------------------------------------------------
    def on_event(self, event: RunEvent) -> None:
        self.version += 1
        self.stats.record_event(event)
        if isinstance(event, AttemptOutput):
            self._append(
                event.task_id,
                event.attempt,
                event.text if event.stream != "stderr" else f"[stderr] {event.text}",
            )
        elif isinstance(event, AttemptStarted):
            key = (event.task_id, event.attempt)
            self.cells[key] = "running"
            self.last_started = key
        elif isinstance(event, CallRecorded):
            call = event.call
            self.call_counts[(event.task_id, event.attempt)] += 1
            self._append(
                event.task_id,
                event.attempt,
                f"[call {call.get('call_index')}] {call.get('method')} {call.get('path')} "
                f"→ {call.get('status') or call.get('error_kind')} "
                f"{float(call.get('latency_ms') or 0):.0f} ms, "
                f"{call.get('total_tokens') or 0} tokens"
                # --link-faults absorb: held at the proxy and sent again, the agent never saw it
                + (
                    f", absorbed (waiting {call.get('wait_s') or 0:.1f}s)"
                    if call.get("absorbed")
                    else ""
                ),
            )
        elif isinstance(event, AttemptRetrying):
            self.cells[(event.task_id, event.attempt)] = "retrying"
            self._append(
                event.task_id,
                event.attempt,
                f"[driftdesk] retry {event.retry} after {event.error_code} "
                f"(waiting {event.delay_s:.1f}s)",
            )
        elif isinstance(event, AttemptEnded):
            self._leave_node((event.task_id, event.attempt))  # (the running count: stats)
        elif isinstance(event, AttemptPlaced):
            key = (event.task_id, event.attempt)
            self._leave_node(key)  # a try moved off a lost node
            self.node_of[key] = event.node
            self.running_per_node[event.node] += 1
        elif isinstance(event, AttemptFinished):
            row = event.row
            key = (str(row.get("task_id")), int(row.get("attempt") or 0))
            outcome = str(row.get("outcome"))
            self.cells[key] = outcome
            self.rows[key] = row
            error = (
                f" {row.get('error_code')}: {row.get('error_message')}"
                if row.get("error_code")
                else ""
            )
            self._append(
                key[0],
                key[1],
                f"[driftdesk] finished: {outcome}{error} · {row.get('total_tokens') or 0} tokens · "
                f"{float(row.get('latency_ms') or 0):.0f} ms · {row.get('retries') or 0} retries",
            )
            self.logs[key] = tuple(self.logs[key])
        elif isinstance(event, RunStarted):
            self.run_id = event.run_id
            self.run_dir = event.run_dir
            self.spec = dict(event.spec)
            self.task_ids = tuple(event.task_ids)
            self.repeat = event.repeat
            self.status = "running"
            self.started_monotonic = time.monotonic()
        elif isinstance(event, AdaptiveProgress):
            self.adaptive = event
        elif isinstance(event, RunFinished):
            self.status = event.status
            self.ended_monotonic = time.monotonic()

    def _leave_node(self, key: AttemptKey) -> None:
        node = self.node_of.pop(key, None)
        if node is not None:
            self.running_per_node[node] -= 1
            if self.running_per_node[node] <= 0:
                del self.running_per_node[node]

    def add_earlier_rows(self, rows: list[dict[str, Any]]) -> None:
        """Slots a resumed run finished before it was interrupted: shown done in the grid (the
        counters stay this execution's own)."""
        for row in rows:
            key = (str(row.get("task_id")), int(row.get("attempt") or 0))
            self.cells[key] = str(row.get("outcome"))
            self.rows[key] = row
        self.version += 1

    def _append(self, task_id: str, attempt: int, line: str) -> None:
        key = (task_id, attempt)
        log = self.logs.get(key)
        if not isinstance(log, deque):  # new, or a finished slot run again (a retried slot)
            log = self.logs[key] = deque(log or (), maxlen=LOG_LINES_PER_ATTEMPT)
        log.append(line)
        self.log_counts[key] += 1
        self.last_active = key

    def new_log_lines(self, key: AttemptKey, seen: int) -> tuple[list[str], int]:
        """Lines of ``key`` appended after the first ``seen`` (at most what is still kept)."""
        total = self.log_counts.get(key, 0)
        log = self.logs.get(key)
        if log is None or total <= seen:
            return [], total
        fresh = min(total - seen, len(log))
        return list(log)[-fresh:], total

    # -- read side (screens) -----------------------------------------------------------------
    @property
    def grid_width(self) -> int:
        """Attempt columns to show: ``repeat``, or for an adaptive run its --max-repeats (more
        if link errors took a task past it)."""
        design = self.spec.get("adaptive")
        if not isinstance(design, dict):
            return self.repeat
        highest = max((attempt for _, attempt in self.cells.copy()), default=-1)
        return max(int(design.get("max_repeats") or self.repeat), highest + 1)

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "interrupted", "failed")

    @property
    def total(self) -> int:
        return self.stats.total

    @property
    def done(self) -> int:
        return self.stats.done

    @property
    def running(self) -> int:
        return self.stats.running

    @property
    def by_outcome(self) -> Counter[str]:
        return self.stats.by_outcome

    @property
    def link_errors(self) -> Counter[str]:
        return self.stats.link_errors

    @property
    def retries(self) -> int:
        return self.stats.retries

    @property
    def calls(self) -> int:
        return self.stats.calls

    @property
    def tokens(self) -> int:
        return self.stats.tokens

    @property
    def elapsed_seconds(self) -> float:
        end = self.ended_monotonic or time.monotonic()
        return end - self.started_monotonic

    def eta_seconds(self) -> float | None:
        if self.finished or self.done <= 0 or self.total <= 0:
            return None
        return self.elapsed_seconds / self.done * max(self.total - self.done, 0)

    def mark_failed(self, message: str, status: str = "failed") -> None:
        """The run ended with ``message`` shown (``status``: "interrupted" for a run whose
        process was killed: its run dir is resumable)."""
        self.error = message
        if not self.finished:
            self.status = status
            self.stats.running = 0  # nothing runs any more, whether or not the engine said so
            self.ended_monotonic = time.monotonic()
        self.version += 1

    def request_cancel(self) -> bool:
        """Cancel the engine's task on its own loop; the engine marks the run interrupted."""
        loop, task = self.loop, self.task
        if loop is None or task is None or task.done() or loop.is_closed():
            return False
        loop.call_soon_threadsafe(task.cancel)
        return True
