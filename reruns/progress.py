"""Headless progress for ``driftdesk run``/``resume``: one status line on stderr.

On a terminal the line redraws in place (at most 10 times a second); otherwise a plain line
is printed at most every ``plain_interval_s`` seconds and at the end, so logs stay readable.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any, TextIO

from driftdesk.reruns.events import AdaptiveProgress, RunEvent, RunFinished, RunStarted, RunStats
from driftdesk.terminal import printable
from driftdesk.text import plural, tokens

BAR_WIDTH = 24


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    total_seconds = round(seconds)
    hours, rest = divmod(total_seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def status_line(stats: RunStats, bar: bool = True) -> str:
    """``[#####-----] 34/68  pass 20 fail 10 link 4 (429:2 timeout:2) ...  ETA 00:12``."""
    total = max(stats.total, 0)
    fraction = stats.done / total if total else 1.0
    parts = []
    if bar:
        filled = round(fraction * BAR_WIDTH)
        parts.append("[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "]")
    parts.append(f"{stats.done}/{total} {fraction:4.0%}")
    outcome = stats.by_outcome
    parts.append(f"pass {outcome.get('pass', 0)}")
    parts.append(f"fail {outcome.get('fail', 0)}")
    link = f"link {outcome.get('link_error', 0)}"
    if stats.link_errors:
        kinds = " ".join(f"{k}:{v}" for k, v in sorted(stats.link_errors.items()))
        link += f" ({kinds})"
    parts.append(link)
    if outcome.get("harness_error"):
        parts.append(f"harness {outcome['harness_error']}")
    parts.append(f"retries {stats.retries}")
    if stats.model_mismatches:
        parts.append(f"served-model mismatches {stats.model_mismatches}")
    parts.append(f"tokens {tokens(stats.tokens)}")
    parts.append(f"running {stats.running}")
    if stats.concurrency_setting.startswith("auto") or stats.paused:
        # the limit the controller (or a retune) set, and what a ctl --pause holds
        parts.append(f"limit {stats.concurrency}" + (" PAUSED" if stats.paused else ""))
    parts.append(f"ETA {_duration(stats.eta_seconds())}")
    return "  ".join(parts)


def adaptive_headline(event: AdaptiveProgress) -> str:
    """An adaptive run's target progress in one line: the CI width now vs the target (or the
    tasks still open), attempts used vs the budget, and why it stopped once it has."""
    parts = [f"target {event.target}"]
    if event.ci_half_width is not None:
        width = f"success ± {event.ci_half_width * 100:.1f} pp"
        if event.target_half_width is not None:
            width += f" (target ± {event.target_half_width * 100:g})"
        parts.append(width)
    parts.append(f"{plural(len(event.open_tasks), 'task')} open")
    parts.append(f"{event.volatile_tasks} volatile")
    used = f"{plural(event.attempts, 'attempt')}"
    if event.budget_attempts is not None:
        used += f" of {event.budget_attempts}"
    if event.budget_usd is not None and event.spent_usd is not None:
        used += f", ${event.spent_usd:.4f} of ${event.budget_usd:g}"
    parts.append(used)
    if event.stop_reason:
        parts.append(f"stopped: {event.stop_reason}")
    return " · ".join(parts)


def _agent_label(spec: dict[str, Any]) -> str:
    """The agent and its client as the run's first line names them: ``claude-code 2.1.332``."""
    from driftdesk.analysis.agent_identity import agent_identity

    return agent_identity({"agent": spec.get("agent"), "client": spec.get("client")}).label


class TextProgress:
    """A ``RunListener`` that draws progress on a text stream (stderr by default)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        is_tty: bool | None = None,
        plain_interval_s: float = 2.0,
    ) -> None:
        self.stream = stream or sys.stderr
        self.is_tty = self.stream.isatty() if is_tty is None else is_tty
        self.plain_interval_s = plain_interval_s
        self._last_draw = 0.0
        self.stats = RunStats()
        self.run_dir: str | None = None
        self.status: str | None = None
        self.adaptive: AdaptiveProgress | None = None

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed stderr must not stop a run

    def on_event(self, event: RunEvent) -> None:
        # The listener keeps its own counters from the events (any face can do the same).
        stats = self.stats
        if isinstance(event, RunStarted):
            self.run_dir = str(event.run_dir)
            stats.record_event(event)
            spec = event.spec
            verb = "resuming" if spec.get("resumed") else "run"
            design = spec.get("adaptive")
            repeats = (
                f"adaptive repeats (target {design.get('target')}, "
                f"{design.get('min_repeats')}..{design.get('max_repeats')} per task)"
                if isinstance(design, dict)
                else plural(event.repeat, "repeat")
            )
            to_make = "at most " if isinstance(design, dict) else ""
            self._write(
                printable(
                    f"{verb} {event.run_id}: {plural(len(event.task_ids), 'task')} x "
                    f"{repeats}, {to_make}"
                    f"{plural(event.total_attempts, 'attempt')} to make; {spec.get('model')} at "
                    f"{spec.get('base_url')} (agent {_agent_label(spec)}, concurrency "
                    f"{spec.get('concurrency_setting') or spec.get('concurrency')})\n"
                    f"  -> {event.run_dir}  (driftdesk ctl DIR --concurrency N|auto, "
                    "--pause, --unpause: retune it while it runs)\n"
                )
            )
            if spec.get("executor") == "ray":
                dashboard = spec.get("ray_dashboard") or "(none: the cluster runs no dashboard)"
                self._write(printable(f"  attempts run on Ray; dashboard: {dashboard}\n"))
            for notice in spec.get("notices") or []:  # may quote task ids and file lines
                self._write(printable(f"  note: {notice}\n"))
            return
        if isinstance(event, AdaptiveProgress):
            self.adaptive = event
            return
        if isinstance(event, RunFinished):
            self.status = event.status
            self.draw(event.stats, force=True)
            if self.is_tty:
                self._write("\n")
            if self.adaptive is not None:
                self._write(printable(f"adaptive: {adaptive_headline(self.adaptive)}\n"))
            return
        stats.record_event(event)
        self.draw(stats)

    def draw(self, stats: RunStats, force: bool = False) -> None:
        """The status line for ``stats`` (at most every interval unless ``force``)."""
        now = time.monotonic()
        interval = 0.1 if self.is_tty else self.plain_interval_s
        if not force and now - self._last_draw < interval:
            return
        self._last_draw = now
        if self.is_tty:
            # Never wider than the terminal: a wrapped line cannot be redrawn in place.
            width = shutil.get_terminal_size((120, 24)).columns - 1
            line = status_line(stats)
            if self.adaptive is not None:
                line += "  " + adaptive_headline(self.adaptive)
            self._write("\r" + line[:width] + "\x1b[K")
        else:
            self._write(status_line(stats, bar=False) + "\n")
