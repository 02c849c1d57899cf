"""Volatility of a run that is still being written, refreshed from the new lines only.

``LiveVolatility`` keeps the rows read so far in a DuckDB table (``analysis.attempt_table``,
the same table and SQL as the cold report) and per-task aggregates. ``refresh()`` reads the
bytes appended since the last call up to the last complete line (a row being written is picked
up next time), loads them into the table, re-aggregates in SQL only the tasks those lines
touch, and assembles the report with the cold report's code, so both give the same numbers.
The first refresh of a long file is one parallel DuckDB scan, like a cold report.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis import attempt_table
from driftdesk.analysis.sources import (
    ATTEMPTS_FILE,
    RunSource,
    is_blank,
    name_bad_records,
    read_manifest,
)
from driftdesk.analysis.volatility import (
    GroupBy,
    RunExtras,
    RunReport,
    SkippedLine,
    SortKey,
    TaskStats,
    assemble_report,
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
        self._task_tokens: dict[str, dict[str | None, tuple[int, int, int]]] = {}
        self._task_kinds: dict[str, dict[str, int]] = {}
        self._tokens: dict[str | None, list[int]] = {}  # run totals, kept up to date per task
        self._link_kinds: dict[str, int] = {}
        self._task_harness_kinds: dict[str, dict[str, int]] = {}
        self._harness_kinds: dict[str, int] = {}
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
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read(size - self._offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        if not complete:
            return None  # only a partial line so far
        # A few new lines: DuckDB reads a copy of just those bytes.
        con = self._connection()
        since = self._rows
        fd, name = tempfile.mkstemp(prefix="driftdesk-live-", suffix=".jsonl")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(complete)
            self._rows += attempt_table.load_file(con, Path(name), 0)
            self._name_bad_rows(Path(name), since, self._lines_consumed)
        finally:
            os.unlink(name)
        lines = complete.count(b"\n")
        self._offset += len(complete)
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
        end = _last_line_end(self.path, size)
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
        tokens: dict[str, dict[str | None, tuple[int, int, int]]] = {}
        for (_, task_id, model), sums in result.tokens.items():
            tokens.setdefault(task_id, {})[model] = sums
        kinds: dict[str, dict[str, int]] = {}
        for (_, task_id, kind), count in result.link_kinds.items():
            kinds.setdefault(task_id, {})[kind] = count
        harness: dict[str, dict[str, int]] = {}
        for (_, task_id, kind), count in result.harness_kinds.items():
            harness.setdefault(task_id, {})[kind] = count
        touched = result.touched if since else {*tokens, *kinds, *harness}
        if not since:
            self._changed = None
        elif self._changed is not None:
            self._changed.update(result.touched)
        # A merged task's sums are its new rows' only: with the task's own added they are its
        # whole sums, which replace the old ones as a re-read task's do.
        for task_id in result.merged:
            tokens[task_id] = _added(self._task_tokens.get(task_id, {}), tokens.get(task_id, {}))
            kinds[task_id] = _added(self._task_kinds.get(task_id, {}), kinds.get(task_id, {}))
            harness[task_id] = _added(
                self._task_harness_kinds.get(task_id, {}), harness.get(task_id, {})
            )
        for task_id in touched:
            for kind, count in self._task_harness_kinds.get(task_id, {}).items():
                self._add_kind(kind, -count, self._harness_kinds)
            self._task_harness_kinds[task_id] = harness.get(task_id, {})
            for kind, count in self._task_harness_kinds[task_id].items():
                self._add_kind(kind, count, self._harness_kinds)
            for model, sums in self._task_tokens.get(task_id, {}).items():
                self._add_tokens(model, sums, -1)
            for kind, count in self._task_kinds.get(task_id, {}).items():
                self._add_kind(kind, -count)
            self._task_tokens[task_id] = tokens.get(task_id, {})
            self._task_kinds[task_id] = kinds.get(task_id, {})
            for model, sums in self._task_tokens[task_id].items():
                self._add_tokens(model, sums, +1)
            for kind, count in self._task_kinds[task_id].items():
                self._add_kind(kind, count)

    def _add_tokens(self, model: str | None, sums: tuple[int, int, int], sign: int) -> None:
        totals = self._tokens.setdefault(model, [0, 0, 0])
        for i in range(3):
            totals[i] += sign * sums[i]

    def _add_kind(self, kind: str, count: int, totals: dict[str, int] | None = None) -> None:
        totals = self._link_kinds if totals is None else totals
        totals[kind] = totals.get(kind, 0) + count
        if not totals[kind]:
            del totals[kind]

    def _report(self) -> RunReport:
        manifest = read_manifest(self.run_dir)
        extras = RunExtras(
            tokens_by_model={m: (p, c, t) for m, (p, c, t) in self._tokens.items()},
            skipped_lines=list(self._skipped),
            skipped_line_count=len(self._skipped),
        )
        # Kept up to date task by task: a refresh costs O(tasks), never O(rows).
        extras.link_errors_by_kind = dict(
            sorted(self._link_kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        extras.harness_errors_by_kind = dict(self._harness_kinds)
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


def _added(old: dict[Any, Any], new: dict[Any, Any]) -> dict[Any, Any]:
    """Per-key sums of two tables of counts (ints, or token triples summed element-wise)."""
    total = dict(old)
    for key, value in new.items():
        if key not in total:
            total[key] = value
        elif isinstance(value, tuple):
            total[key] = tuple(a + b for a, b in zip(total[key], value, strict=True))
        else:
            total[key] += value
    return total


def _last_line_end(path: Path, size: int) -> int:
    """Offset just after the last newline in the first ``size`` bytes (0 if none)."""
    with open(path, "rb") as fh:
        position = size
        while position > 0:
            start = max(0, position - (1 << 16))
            fh.seek(start)
            block = fh.read(position - start)
            last = block.rfind(b"\n")
            if last >= 0:
                return start + last + 1
            position = start
    return 0


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
