"""Volatility of a run that is still being written, refreshed from the new lines only.

``LiveVolatility`` keeps the winning row of every (task, attempt) slot and per-task aggregates;
``refresh()`` reads the bytes appended since the last call (up to the last complete line, so a
row being written is picked up next time), updates only the tasks those lines touch, and
assembles the report with the same code as the cold DuckDB report, so both give the same
numbers for the same file.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.metrics import TaskAggregate
from analysis.sources import ATTEMPTS_FILE, RunSource, is_blank, read_manifest, row_problem
from analysis.volatility import GroupBy, RunExtras, RunReport, SkippedLine, SortKey, assemble_report

if TYPE_CHECKING:
    from analysis.prices import ModelPrice


@dataclass
class _Slot:
    outcome: str
    scenario_id: str | None
    error_code: str | None
    latency_ms: float | None
    total_tokens: int | None
    model: str | None
    ord: int  # record number of the winning row (non-blank lines counted, like DuckDB)
    prompt_sum: int = 0  # tokens of every row of the slot, superseded ones included
    completion_sum: int = 0
    total_sum: int = 0


class LiveVolatility:
    """Incremental report of one run dir; call ``refresh()`` on a timer."""

    def __init__(
        self,
        run_dir: Path | str,
        *,
        include_link_errors: bool = False,
        min_runs: int = 1,
        group_by: GroupBy = "task",
        sort: SortKey = "spread",
        top: int | None = None,
        prices: dict[str, ModelPrice] | None = None,
        ci_interval_s: float = 5.0,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.include_link_errors = include_link_errors
        self.min_runs = min_runs
        self.group_by: GroupBy = group_by
        self.sort: SortKey = sort
        self.top = top
        self._prices = prices
        # The bootstrap costs more than the rest of a refresh on big runs; intervals move
        # slowly, so they are recomputed at most this often (0: every refresh).
        self.ci_interval_s = ci_interval_s
        self._ci: dict[str, list[float] | None] | None = None
        self._ci_at = 0.0
        self._reset()

    def _reset(self) -> None:
        self._ci = None  # recompute the intervals after a reset
        self._offset = 0  # bytes consumed (always at a line boundary)
        self._line = 0  # physical lines consumed
        self._records = 0  # non-blank lines consumed
        self._slots: dict[str, dict[int, _Slot]] = {}
        self._max_attempt: dict[str, int] = {}
        self._link_kinds: dict[str, int] = {}  # winning link_error slots by error code
        self._aggregates: dict[str, TaskAggregate] = {}
        self._tokens: dict[str | None, list[int]] = {}
        self._skipped: list[SkippedLine] = []
        self.lines_read_last_refresh = 0

    @property
    def path(self) -> Path:
        return self.run_dir / ATTEMPTS_FILE

    def refresh(self) -> RunReport:
        """Read the new complete lines and return the up-to-date report."""
        if self._prices is None:
            from analysis.prices import load_prices

            self._prices = load_prices()
        touched = self._read_new_lines()
        for task_id in touched:
            self._aggregates[task_id] = self._aggregate(task_id)
        return self._report()

    def _read_new_lines(self) -> set[str]:
        touched: set[str] = set()
        self.lines_read_last_refresh = 0
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return touched
        if size < self._offset:  # replaced or truncated: start over
            self._reset()
        if size == self._offset:
            return touched
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read(size - self._offset)
        end = chunk.rfind(b"\n")
        if end < 0:
            return touched  # only a partial line so far
        complete = chunk[: end + 1]
        self._offset += len(complete)
        for raw in complete.split(b"\n")[:-1]:
            self._line += 1
            self.lines_read_last_refresh += 1
            if is_blank(raw):
                continue
            self._records += 1
            task_id = self._apply(raw)
            if task_id is not None:
                touched.add(task_id)
        return touched

    def _apply(self, raw: bytes) -> str | None:
        try:
            row: Any = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._skipped.append(SkippedLine(str(self.path), self._line, str(exc)))
            return None
        problem = row_problem(row)
        if problem is not None:
            self._skipped.append(SkippedLine(str(self.path), self._line, problem))
            return None
        task_id = str(row["task_id"])
        attempt = int(str(row["attempt"]).strip())
        prompt, completion = _int(row.get("prompt_tokens")), _int(row.get("completion_tokens"))
        total = _int(row.get("total_tokens"))
        if total is None and prompt is not None and completion is not None:
            total = prompt + completion
        slots = self._slots.setdefault(task_id, {})
        old = slots.get(attempt)
        new = _Slot(
            outcome=row["outcome"],
            scenario_id=_str(row.get("scenario_id")),
            error_code=_str(row.get("error_code")),
            latency_ms=_float(row.get("latency_ms")),
            total_tokens=total,
            model=_str(row.get("model")),
            ord=self._records,
        )
        if old is not None:
            # The slot's tokens follow its winning row's model, as in the cold report.
            self._add_tokens(old.model, old, -1)
            self._count_link_kind(old, -1)
            new.prompt_sum, new.completion_sum, new.total_sum = (
                old.prompt_sum,
                old.completion_sum,
                old.total_sum,
            )
        new.prompt_sum += prompt or 0
        new.completion_sum += completion or 0
        new.total_sum += total or 0
        self._add_tokens(new.model, new, +1)
        self._count_link_kind(new, +1)
        slots[attempt] = new
        self._max_attempt[task_id] = max(attempt, self._max_attempt.get(task_id, attempt))
        return task_id

    def _count_link_kind(self, slot: _Slot, sign: int) -> None:
        if slot.outcome == "link_error":
            kind = slot.error_code or "unknown"
            self._link_kinds[kind] = self._link_kinds.get(kind, 0) + sign
            if not self._link_kinds[kind]:
                del self._link_kinds[kind]

    def _add_tokens(self, model: str | None, slot: _Slot, sign: int) -> None:
        sums = self._tokens.setdefault(model, [0, 0, 0])
        sums[0] += sign * slot.prompt_sum
        sums[1] += sign * slot.completion_sum
        sums[2] += sign * slot.total_sum

    def _aggregate(self, task_id: str) -> TaskAggregate:
        slots = list(self._slots[task_id].values())
        counted = [s for s in slots if self.include_link_errors or s.outcome in ("pass", "fail")]
        latencies = [s.latency_ms for s in counted if s.latency_ms is not None]
        tokens = [float(s.total_tokens) for s in counted if s.total_tokens is not None]
        errors = sorted((s for s in slots if s.outcome != "pass"), key=lambda s: -s.ord)
        with_scenario = [s for s in slots if s.scenario_id is not None]
        return TaskAggregate(
            task_id=task_id,
            scenario_id=max(with_scenario, key=lambda s: s.ord).scenario_id
            if with_scenario
            else None,
            passes=sum(s.outcome == "pass" for s in slots),
            fails=sum(s.outcome == "fail" for s in slots),
            link_errors=sum(s.outcome == "link_error" for s in slots),
            harness_errors=sum(s.outcome == "harness_error" for s in slots),
            latency_mean_ms=_mean(latencies),
            latency_std_ms=_pstdev(latencies),
            tokens_mean=_mean(tokens),
            tokens_std=_pstdev(tokens),
            last_error_kinds=[s.error_code or s.outcome for s in errors[:3]],
            first_seen=min(s.ord for s in slots),
        )

    def _report(self) -> RunReport:
        manifest = read_manifest(self.run_dir)
        extras = RunExtras(
            tokens_by_model={m: (p, c, t) for m, (p, c, t) in self._tokens.items()},
            skipped_lines=list(self._skipped),
            skipped_line_count=len(self._skipped),
        )
        # Kept up to date slot by slot: a refresh costs O(tasks), never O(rows).
        extras.link_errors_by_kind = dict(
            sorted(self._link_kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        tasks, repeat = manifest.get("tasks"), manifest.get("repeat")
        if isinstance(tasks, list) and isinstance(repeat, int) and repeat > 0:
            for task_id in (str(t) for t in tasks):
                present = self._slots.get(task_id, {})
                if len(present) == repeat and self._max_attempt[task_id] == repeat - 1:
                    continue  # distinct non-negative attempts: exactly 0..repeat−1
                extras.missing_slots.extend((task_id, a) for a in range(repeat) if a not in present)
        aggregates = sorted(self._aggregates.values(), key=lambda a: a.first_seen)
        assert self._prices is not None
        now = time.monotonic()
        fresh = self._ci is not None and now - self._ci_at < self.ci_interval_s
        reuse = self._ci if fresh else None
        report = assemble_report(
            RunSource(self.path, self.run_dir, manifest),
            aggregates,
            extras,
            min_runs=self.min_runs,
            include_link_errors=self.include_link_errors,
            group_by=self.group_by,
            sort=self.sort,
            top=self.top,
            prices=self._prices,
            ci95=reuse,
        )
        if reuse is None:
            self._ci, self._ci_at = report.ci95, now
        return report


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _pstdev(values: list[float]) -> float | None:
    """Population standard deviation in floats (statistics.pstdev is exact, and slow)."""
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
