"""Volatility of a run that is still being written, refreshed from the new lines only.

``LiveVolatility`` keeps the rows read so far in a DuckDB table (``analysis.attempt_table``,
the same table and SQL as the cold report) and per-task aggregates. ``refresh()`` reads the
bytes appended since the last call up to the last complete line (a row being written is picked
up next time), loads them into the table, re-aggregates in SQL only the tasks those lines
touch, and assembles the report with the cold report's code, so both give the same numbers.
The first refresh of a long file is one parallel DuckDB scan, like a cold report.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis import attempt_table, row_cache
from driftdesk.analysis.report import SortKey, assemble_report
from driftdesk.analysis.run_reader import RunExtras, SkippedLine
from driftdesk.analysis.run_report import GroupBy, RunReport, TaskStats
from driftdesk.analysis.sources import (
    ATTEMPTS_FILE,
    RunSource,
    is_blank,
    manifest_or_empty,
    name_bad_records,
)

if TYPE_CHECKING:
    import duckdb

    from driftdesk.analysis.prices import ModelPrice

_BLOCK = 1 << 24  # bytes read at a time when counting lines
_BLANK_START = re.compile(rb"\n[\n \t\r]")  # a newline a blank line may follow


class LiveVolatility:
    """Incremental report of one run dir; call ``refresh()`` on a timer, ``close()`` when done."""

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
        self._con: duckdb.DuckDBPyConnection | None = None
        self._spill: str | None = None  # DuckDB's temporary folder while _con is open
        self._reset()

    def _reset(self) -> None:
        self.close()
        self._ci = None  # recompute the intervals after a reset
        self._offset = 0  # bytes consumed (always at a line boundary)
        self._line: int | None = 0  # physical lines consumed (None: not counted yet)
        self._first_load_end = 0  # with _line None: lines before it not counted yet,
        self._line_extra = 0  # and lines counted after it
        self._rows = 0  # rows in the table (records read; blank lines are not records)
        # TaskStats of every task as of the last report, the tasks aggregated since (None:
        # all of them) and the manifest facts they were made with
        self._stats: dict[str, TaskStats] = {}
        self._changed: set[str] | None = None
        self._manifest_key: tuple[Any, ...] | None = None
        # Token sums by model, link-error and harness-error kinds: per task and for the run
        self._tokens = _RunSums()
        self._link_kinds = _RunSums()
        self._harness_kinds = _RunSums()
        self._skipped: list[SkippedLine] = []
        self._lines_read: int | None = 0

    def close(self) -> None:
        """Free the table (a later ``refresh()`` reads the file again)."""
        if self._con is not None:
            self._con.close()
            self._con = None
        if self._spill is not None:
            shutil.rmtree(self._spill, ignore_errors=True)
            self._spill = None

    @property
    def path(self) -> Path:
        return self.run_dir / ATTEMPTS_FILE

    def refresh(self) -> RunReport:
        """Read the new complete lines and return the up-to-date report."""
        if self._prices is None:
            from driftdesk.analysis.prices import load_prices

            self._prices = load_prices()
        since = self._read_new_lines()
        if since is not None:
            self._update_tasks(since)
        return self._report()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._spill = attempt_table.spill_dir()
            self._con = attempt_table.connect(self._spill)
        return self._con

    @property
    def lines_read_last_refresh(self) -> int:
        """Physical lines the last ``refresh()`` consumed (counted on demand after a first
        load, which does not need them)."""
        if self._lines_read is None:
            self._lines_read = self._lines_consumed()
        return self._lines_read

    def _lines_consumed(self) -> int:
        if self._line is None:  # after a first load that did not need to count them
            self._line = _scan_lines(self.path, 0, self._first_load_end)[0] + self._line_extra
        return self._line

    def _read_new_lines(self) -> int | None:
        """Load the complete lines appended since the last call; the first new ``rowid`` (None
        when nothing new)."""
        self._lines_read = 0
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return None
        if size < self._offset:  # replaced or truncated: start over
            self._reset()
        if size == self._offset:
            return None
        if self._offset == 0:
            return self._load_whole_file(size)
        # A few new lines: DuckDB reads a copy of just those bytes (the row cache extends a
        # run's cache with the same reader).
        con = self._connection()
        since = self._rows
        with row_cache.appended_lines(self.path, self._offset) as chunk:
            if chunk is None:
                return None  # only a partial line so far
            self._rows += attempt_table.load_file(con, chunk.path, 0)
            self._name_bad_rows(chunk.path, since, self._lines_consumed)
        lines = chunk.lines
        self._offset += chunk.size
        if self._line is None:
            self._line_extra += lines
        else:
            self._line += lines
        self._lines_read = lines
        return since

    def _load_whole_file(self, size: int) -> int | None:
        """First load: DuckDB reads the file in place, in parallel (one scan, like a cold
        report). Lines a writer appends meanwhile may be read too; they are dropped here and
        read again next time."""
        end = row_cache.last_line_end(self.path, size)
        if end == 0:
            return None
        con = self._connection()
        loaded = attempt_table.load_file(con, self.path, 0)
        try:
            after = self.path.stat().st_size
        except FileNotFoundError:
            after = -1
        if end == size == after:
            records = loaded  # nothing was appended: DuckDB read exactly the complete lines
            self._line = None  # counted if ever needed
            self._lines_read = None
            self._first_load_end, self._line_extra = end, 0
        else:
            lines, maybe_blank = _scan_lines(self.path, 0, end)
            records = lines - (_blank_lines(self.path, end) if maybe_blank else 0)
            if loaded > records:
                con.execute(
                    "UPDATE attempts SET valid = FALSE, f = -1 WHERE rowid >= $first",
                    {"first": records},
                )
            records = min(loaded, records)
            self._line = self._lines_read = lines
        self._name_bad_rows(self.path, 0, lambda: 0)
        self._rows = records
        self._offset = end
        return 0

    def _name_bad_rows(self, source: Path, since: int, lines_before: Callable[[], int]) -> None:
        """Name the bad rows from ``since`` on; their lines in ``source`` follow
        ``lines_before()`` lines of the attempts file (counted only if there are any)."""
        assert self._con is not None
        ordinals = {
            rowid - since + 1 for f, rowid in attempt_table.bad_rowids(self._con, since) if f >= 0
        }
        if ordinals:
            first_line = lines_before()
            for problem in name_bad_records(source, ordinals):
                self._skipped.append(
                    SkippedLine(str(self.path), first_line + problem.line, problem.reason)
                )

    def _update_tasks(self, since: int) -> None:
        """Re-aggregate the tasks with rows at ``rowid >= since`` and fold them into the totals."""
        assert self._prices is not None
        attempt_table.price_models(self._connection(), self._prices, since)
        result = attempt_table.aggregate(
            self._connection(),
            include_link_errors=self.include_link_errors,
            touched_since=None if since == 0 else since,
            per_task_extras=True,
        )
        tokens, kinds, harness = (
            _by_task(table) for table in (result.tokens, result.link_kinds, result.harness_kinds)
        )
        touched = result.touched if since else {*tokens, *kinds, *harness}
        if not since:
            self._changed = None
        elif self._changed is not None:
            self._changed.update(result.touched)
        for new, sums in (
            (tokens, self._tokens),
            (kinds, self._link_kinds),
            (harness, self._harness_kinds),
        ):
            # A merged task's sums are its new rows' only: with the task's own added they are
            # its whole sums, which replace the old ones as a re-read task's do.
            for task_id in result.merged:
                new[task_id] = _added(sums.by_task.get(task_id, {}), new.get(task_id, {}))
            for task_id in touched:
                sums.replace(task_id, new.get(task_id, {}))

    def _report(self) -> RunReport:
        manifest = manifest_or_empty(self.run_dir)
        extras = RunExtras(
            tokens_by_model=dict(self._tokens.totals),
            skipped_lines=list(self._skipped),
            skipped_line_count=len(self._skipped),
        )
        # Kept up to date task by task: a refresh costs O(tasks), never O(rows).
        extras.link_errors_by_kind = dict(
            sorted(self._link_kinds.totals.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        extras.harness_errors_by_kind = dict(self._harness_kinds.totals)
        tasks, repeat = manifest.get("tasks"), manifest.get("repeat")
        manifest_key = (tuple(tasks) if isinstance(tasks, list) else None, repeat)
        if manifest_key != self._manifest_key:  # missing attempts are the manifest's too
            self._changed, self._manifest_key = None, manifest_key
        assert self._prices is not None
        now = time.monotonic()
        fresh = self._ci is not None and now - self._ci_at < self.ci_interval_s
        reuse = self._ci if fresh else None
        report = assemble_report(
            self._connection(),
            0,
            RunSource(self.path, self.run_dir, manifest),
            extras,
            min_runs=self.min_runs,
            include_link_errors=self.include_link_errors,
            group_by=self.group_by,
            sort=self.sort,
            top=self.top,
            prices=self._prices,
            ci95=reuse,
            stats_cache=self._stats,
            changed=None if self._changed is None else sorted(self._changed),
            # the tasks changed since the last report are the last aggregate's touched ones
            changed_rows="touched_rows" if self._changed else "attempts",
        )
        self._changed = set()
        if reuse is None:
            self._ci, self._ci_at = report.ci95, now
        return report


class _RunSums:
    """Sums kept per task (a table of counts, or of token triples, by key) and the run's
    totals of them, kept up to date a task at a time. A key is in the totals while some task
    has it, as in a cold report's sums over the rows (a model whose every row was superseded
    is gone, not a model with zero tokens)."""

    def __init__(self) -> None:
        self.by_task: dict[str, dict[Any, Any]] = {}
        self.totals: dict[Any, Any] = {}
        self._tasks_with: dict[Any, int] = {}  # key -> tasks whose sums have it

    def replace(self, task_id: str, sums: dict[Any, Any]) -> None:
        for key, value in self.by_task.get(task_id, {}).items():
            self._shift(key, value, -1)
        self.by_task[task_id] = sums
        for key, value in sums.items():
            self._shift(key, value, +1)

    def _shift(self, key: Any, value: Any, sign: int) -> None:
        tasks = self._tasks_with.get(key, 0) + sign
        if tasks:
            self._tasks_with[key] = tasks
            self.totals[key] = _sum(self.totals.get(key), value, sign)
        else:
            del self._tasks_with[key], self.totals[key]


def _by_task(table: dict[tuple[Any, ...], Any]) -> dict[str, dict[Any, Any]]:
    """``aggregate``'s per-task extras ((f, task_id, key) -> value) as task -> key -> value."""
    out: dict[str, dict[Any, Any]] = {}
    for (_, task_id, key), value in table.items():
        out.setdefault(task_id, {})[key] = value
    return out


def _added(old: dict[Any, Any], new: dict[Any, Any]) -> dict[Any, Any]:
    """Per-key sums of two tables of counts (ints, or token triples summed element-wise)."""
    total = dict(old)
    for key, value in new.items():
        total[key] = _sum(total.get(key), value, +1)
    return total


def _sum(total: Any, value: Any, sign: int) -> Any:
    """``total`` (None: nothing yet) plus ``sign`` × ``value``: ints, or triples element-wise."""
    if isinstance(value, tuple):
        return tuple(a + sign * b for a, b in zip(total or (0,) * len(value), value, strict=True))
    return (total or 0) + sign * value


def _scan_lines(path: Path, start: int, end: int) -> tuple[int, bool]:
    """(lines, whether a blank line may be among them) in the bytes ``start..end`` of
    ``path``, which end at a line boundary; read in blocks, counted at C speed."""
    lines, maybe_blank = 0, False
    previous = b"\n"  # a line starts at ``start``
    with open(path, "rb") as fh:
        fh.seek(start)
        position = start
        while position < end:
            block = fh.read(min(_BLOCK, end - position))
            if not block:
                break
            lines += block.count(b"\n")
            if not maybe_blank and (
                _BLANK_START.search(previous + block[:1]) or _BLANK_START.search(block)
            ):
                maybe_blank = True
            previous = block[-1:]
            position += len(block)
    return lines, maybe_blank


def _blank_lines(path: Path, end: int) -> int:
    """Blank lines (JSON whitespace only) among the lines before offset ``end``."""
    blank = 0
    with open(path, "rb") as fh:
        remaining = end
        for raw in fh:
            if remaining <= 0:
                break
            remaining -= len(raw)
            blank += is_blank(raw)
    return blank
