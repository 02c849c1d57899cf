"""Reading runs into the report's tables through each run's cache (``analysis.row_cache``).

``read_runs`` fills a connection (``attempt_table.connection()``) with every run's per-task
aggregates (``task_aggs``, keyed by the run's index ``f``) and returns each run's extras. Per
run, the first of these that applies:

- the cache holds aggregates for these options and the source is unchanged: they are loaded
  as they are (rows only for the few tasks whose missing slots need them), unless the caller
  reads the rows themselves (``need_rows``);
- the cache holds the rows: loaded from their Parquet parts (a grown source first extended,
  and the aggregates kept for these options updated for the tasks the new lines touch), then
  any bytes past the covered end (a torn or unfinished last line) read from the JSONL;
- neither: the JSONL is read and typed as before, its bad lines named, and the cache written
  (by a report, its rows by a second connection while the report is made).

Each path gives the numbers a read of the JSONL alone gives (``tests/analysis/
test_row_cache.py`` compares them on the golden runs); a cache that cannot be written or read
is left aside.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis import attempt_table, row_cache, zero_copy
from driftdesk.analysis.cache_store import FileIdentity, file_identity, size_of
from driftdesk.analysis.sources import is_blank, name_bad_records

MAX_NAMED_SKIPPED_LINES = 1000  # per file; the count is always exact

if TYPE_CHECKING:
    import duckdb

    from driftdesk.analysis.prices import ModelPrice
    from driftdesk.analysis.sources import RunSource


@dataclass
class SkippedLine:
    """A line of an attempts file that could not be used (never fatal)."""

    file: str
    line: int
    reason: str
    torn: bool = False  # the unterminated last line of a file a writer was killed during

    def __str__(self) -> str:
        kind = "torn last line" if self.torn else "skipped line"
        return f"{self.file}:{self.line}: {kind}: {self.reason}"


@dataclass
class RunExtras:
    """Run-level facts the reader gathers besides per-task aggregates."""

    tokens_by_model: dict[str | None, tuple[int, int, int]] = field(default_factory=dict)
    link_errors_by_kind: dict[str, int] = field(default_factory=dict)
    harness_errors_by_kind: dict[str, int] = field(default_factory=dict)
    missing_slots: list[tuple[str, int]] = field(default_factory=list)
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    skipped_line_count: int = 0
    # where the rows came from (``analysis.run_reader``): "jsonl", "cached rows" or "cached
    # aggregates", with " extended" when the cache first took in lines appended since
    read_from: str = "jsonl"
    # the run's cache holding these aggregates (``row_cache.CiRef``), and the bootstrap
    # intervals kept with them by ``min_runs`` (a pure function of the aggregates)
    cache_ref: Any = None
    cached_ci95: dict[str, dict[str, list[float] | None]] = field(default_factory=dict)


def name_skipped_lines(path: Path, ordinals: set[int]) -> tuple[int, list[SkippedLine]]:
    """(count, named lines) for the ``ordinals``-th records of ``path`` (streams the file)."""
    problems = name_bad_records(path, ordinals)
    return len(problems), [
        SkippedLine(str(path), p.line, p.reason, p.torn) for p in problems[:MAX_NAMED_SKIPPED_LINES]
    ]


@dataclass
class _Run:
    index: int
    run: RunSource
    rows_path: Path
    linked: zero_copy.LinkedSource | None
    identity: FileIdentity | None  # the source's, before it was read
    entry: row_cache.Entry | None = None
    served: dict[str, Any] | None = None  # the cached aggregates loaded as they are
    cold: bool = False  # read from the JSONL
    base: int = 0  # rowid of the run's first row in ``attempts``
    loaded: int = 0
    bad_ordinals: set[int] = field(default_factory=set)
    skipped_count: int = 0  # the bad lines when read cold, and the first ones named
    skipped: list[SkippedLine] = field(default_factory=list)
    per_task: dict[str, dict[str, dict[Any, Any]]] | None = None


def read_runs(
    con: duckdb.DuckDBPyConnection,
    runs: Sequence[RunSource],
    *,
    include_link_errors: bool,
    prices: dict[str, ModelPrice] | None = None,
    need_rows: bool = True,
    pending: list[Callable[[], bool]] | None = None,
) -> list[RunExtras]:
    """Fill ``con`` (``attempt_table.connection()``) with the per-task aggregates of every run
    (``task_aggs``, keyed by the run's index ``f``); each run's extras. One parallel scan per
    file, or the run's cache. The rows land in one table in file order
    (``analysis.attempt_table``); per-task aggregates keep the last valid row of each (task,
    attempt) slot, token sums count every valid row (superseded rows cost money too), and the
    rows that are not usable are named by line.

    ``need_rows`` False lets a run's kept aggregates stand in for its rows (the caller reads
    ``task_aggs`` only, not ``attempts``). With ``pending`` a run read from its JSONL has its
    rows written to its cache while the caller goes on: each call in ``pending`` waits for one
    and says whether it was kept; the caller makes them all before ``con`` closes, and uses a
    ``cache_ref`` only once it was kept."""
    key = row_cache.options_key(include_link_errors, prices)
    extras = [RunExtras() for _ in runs]
    states = [_open(index, run) for index, run in enumerate(runs)]
    for state in states:
        _load(con, state, extras[state.index], key, need_rows, include_link_errors, prices)
    if prices:
        attempt_table.price_models(con, prices)
    read = [s for s in states if s.served is None]
    if read:
        result = attempt_table.aggregate(
            con, include_link_errors=include_link_errors, per_task_extras=True
        )
        for state in read:
            state.per_task = row_cache.per_task_extras(
                result.tokens, result.link_kinds, result.harness_kinds, state.index
            )
            extra = extras[state.index]
            tokens, link, harness = row_cache.totals(state.per_task)
            extra.tokens_by_model, extra.link_errors_by_kind = tokens, link
            extra.harness_errors_by_kind = harness
    for state in states:
        if state.served is not None:
            assert state.entry is not None
            row_cache.load_aggs(con, state.entry, state.served, state.index)
        else:
            extras[state.index].cache_ref = _store(con, state, key, pending)
    return extras


def _open(index: int, run: RunSource) -> _Run:
    linked = zero_copy.linked_source(run.manifest)
    rows_path = run.attempts_path if linked is None else linked.path
    if linked is not None:  # a changed source is refused before anything is read, as before
        zero_copy.check(linked, str(run.run_dir or run.attempts_path), content=False)
    return _Run(index, run, rows_path, linked, file_identity(rows_path))


def _load(
    con: duckdb.DuckDBPyConnection,
    state: _Run,
    extra: RunExtras,
    key: str,
    need_rows: bool,
    include_link_errors: bool,
    prices: dict[str, ModelPrice] | None,
) -> None:
    """Load one run's rows (or its kept aggregates) and name its skipped lines in ``extra``."""
    import duckdb

    if state.identity is None and state.linked is None:
        return  # no attempts file: an empty run
    linked_json = None if state.linked is None else state.linked.to_json()
    entry = row_cache.find(state.run, state.rows_path, linked_json)
    if entry is not None and entry.tail and entry.meta.extendable:
        try:
            if _extend(entry, state, key, include_link_errors, prices):
                extra.read_from = "extended"
        except (OSError, ValueError, duckdb.Error):
            entry = None  # not extended: read the JSONL, and write the cache again
    if entry is not None:
        try:
            _load_cached(con, state, entry, extra, key, need_rows)
            return
        except (OSError, ValueError, duckdb.Error):
            # a part gone under a reader (another process rewrote the cache): start over
            con.execute("DELETE FROM attempts WHERE f = $f", {"f": state.index})
            state.entry = state.served = None
    extra.read_from = "jsonl"
    _load_cold(con, state, extra)


def _load_cached(
    con: duckdb.DuckDBPyConnection,
    state: _Run,
    entry: row_cache.Entry,
    extra: RunExtras,
    key: str,
    need_rows: bool,
) -> None:
    state.entry = entry
    count, named = row_cache.skipped_lines(entry)
    file = str(state.run.attempts_path)
    skipped = [SkippedLine(file, n, reason, torn) for n, reason, torn in named]
    aggs = row_cache.cached_aggs(entry, key)
    if aggs is not None and not need_rows:
        state.served = aggs
        extra.read_from = _joined("cached aggregates", extra.read_from)
        extra.cache_ref = row_cache.CiRef(entry.folder, key, aggs["aggs"])
        extra.cached_ci95 = dict(aggs.get("ci95", {}))
        extra.tokens_by_model, extra.link_errors_by_kind, extra.harness_errors_by_kind = (
            row_cache.run_extras(aggs)
        )
    else:
        extra.read_from = _joined("cached rows", extra.read_from)
        state.base = attempt_table.table_size(con)
        state.loaded = row_cache.load_rows(con, entry, state.index)
        if entry.tail:  # the bytes past the covered end: an unfinished or torn last line
            with row_cache.appended_lines(
                state.rows_path, entry.meta.offset, complete=False
            ) as chunk:
                if chunk is not None:
                    since = attempt_table.table_size(con)
                    attempt_table.load_file(con, chunk.path, state.index)
                    ordinals = {r - since + 1 for _, r in attempt_table.bad_rowids(con, since)}
                    if ordinals:
                        before = row_cache.lines_covered(entry, state.rows_path)
                        for problem in name_bad_records(chunk.path, ordinals):
                            count += 1
                            skipped.append(
                                SkippedLine(
                                    file, before + problem.line, problem.reason, problem.torn
                                )
                            )
    extra.skipped_line_count = count
    extra.skipped_lines = skipped[:MAX_NAMED_SKIPPED_LINES]


def _joined(source: str, before: str) -> str:
    return f"{source} extended" if before == "extended" else source


def _load_cold(con: duckdb.DuckDBPyConnection, state: _Run, extra: RunExtras) -> None:
    """The rows read and typed from the JSONL (the cache is written from them later)."""
    from driftdesk.analysis.import_formats import number_rows

    state.cold, state.base = True, attempt_table.table_size(con)
    if state.linked is not None:  # its rows are read from the imported file, mapped
        state.loaded = zero_copy.load(con, state.run, state.linked, state.index, number_rows)
    else:
        state.loaded = attempt_table.load_file(con, state.run.attempts_path, state.index)
    state.bad_ordinals = {
        rowid - state.base + 1  # the k-th record of its file
        for f, rowid in attempt_table.bad_rowids(con, state.base)
        if f == state.index
    }
    if state.bad_ordinals:
        extra.skipped_line_count, extra.skipped_lines = name_skipped_lines(
            state.run.attempts_path, state.bad_ordinals
        )
        state.skipped_count, state.skipped = extra.skipped_line_count, extra.skipped_lines


def _store(
    con: duckdb.DuckDBPyConnection,
    state: _Run,
    key: str,
    pending: list[Callable[[], bool]] | None,
) -> row_cache.CiRef | None:
    """Write what was read to the run's cache (best effort: derived data)."""
    import duckdb

    assert state.per_task is not None
    # ``first_seen`` as the place among the cached rows (valid rows only, in file order)
    first_seen = f"first_seen - {state.base}"
    if state.cold and state.bad_ordinals:  # less the invalid rows before it
        con.execute(
            "CREATE OR REPLACE TEMP TABLE invalid_rows AS "
            "SELECT rowid AS r FROM attempts WHERE f = $f AND NOT valid",
            {"f": state.index},
        )
        first_seen += " - (SELECT count(*) FROM invalid_rows WHERE r < t.first_seen)"
    aggs_sql = (
        f"SELECT * EXCLUDE (f) REPLACE ({first_seen} AS first_seen) "
        f"FROM task_aggs t WHERE f = {state.index}"
    )
    try:
        if state.cold:
            return _store_cold(con, state, key, aggs_sql, pending)
        elif state.entry is not None and not state.entry.tail:
            entry = state.entry
            with row_cache.writable(state.run, entry) as folder:
                if folder != entry.folder:
                    return None  # its parts are where it was read from
                entry.meta.aggs[key] = row_cache.write_aggs(con, folder, aggs_sql, state.per_task)
                row_cache.save(folder, entry.meta)
                return row_cache.CiRef(folder, key, entry.meta.aggs[key]["aggs"])
    except (OSError, ValueError, duckdb.Error):
        pass
    return None


def _store_cold(
    con: duckdb.DuckDBPyConnection,
    state: _Run,
    key: str,
    aggs_sql: str,
    pending: list[Callable[[], bool]] | None,
) -> row_cache.CiRef | None:
    identity = state.identity
    if identity is None or file_identity(state.rows_path) != identity:
        return None  # written to while it was read: what was read is no state of the file to keep
    size = size_of(identity)
    offset, records, lines = size, state.loaded, None
    torn_bad = False
    if state.linked is None:  # a torn or unfinished last line is read again each time
        offset = row_cache.last_line_end(state.rows_path, size)
        if offset < size:
            with open(state.rows_path, "rb") as fh:
                fh.seek(offset)
                tail_is_record = not is_blank(fh.read())
            records -= tail_is_record
            torn_bad = tail_is_record and state.loaded in state.bad_ordinals
            lines = row_cache.count_lines(state.rows_path, offset)
    linked_json = None if state.linked is None else state.linked.to_json()
    with row_cache.writable(state.run, None) as folder:
        meta = row_cache.new_meta(state.rows_path, linked_json, identity)
        meta.records, meta.lines = records, lines
        row_cache.covered(meta, state.rows_path, identity, offset)
        # the torn last line is the tail's, named each time it is read
        meta.skipped_count = state.skipped_count - torn_bad
        meta.skipped = [[s.line, s.reason, s.torn] for s in state.skipped if not s.torn]
    # aggregates only of a source read to its end (a torn last line is read each time)
    per_task, name = (state.per_task, uuid.uuid4().hex) if offset == size else (None, None)
    rows_sql = (
        f"SELECT {row_cache.ROW_COLUMNS} FROM attempts WHERE f = $f AND valid AND rowid < $end"
    )

    def write(db: duckdb.DuckDBPyConnection, aggs_sql: str = aggs_sql) -> None:
        row_cache.write_part(db, meta, folder, rows_sql, f=state.index, end=state.base + records)
        if per_task is not None:
            meta.aggs[key] = row_cache.write_aggs(db, folder, aggs_sql, per_task, name)
        row_cache.save(folder, meta)

    if pending is None:
        write(con)
    else:  # the aggregates kept as they are now in a table the writer's connection sees
        snapshot = f"cache_aggs_{uuid.uuid4().hex}"
        if per_task is not None:
            con.execute(f"CREATE TABLE {snapshot} AS {aggs_sql}")

        def write_from_snapshot(db: duckdb.DuckDBPyConnection) -> None:
            try:
                write(db, aggs_sql=f"FROM {snapshot}")
            finally:
                db.execute(f"DROP TABLE IF EXISTS {snapshot}")

        pending.append(row_cache.Background(con, write_from_snapshot).wait)
    return None if name is None else row_cache.CiRef(folder, key, row_cache.aggs_file(name))


def _extend(
    entry: row_cache.Entry,
    state: _Run,
    key: str,
    include_link_errors: bool,
    prices: dict[str, ModelPrice] | None,
) -> bool:
    """Add the complete lines appended past the cache's end to it (the live view's reader,
    ``row_cache.appended_lines``): a new part, the new bad lines named, and the aggregates
    kept for ``key`` updated for the tasks the new rows touch (the others are dropped)."""
    meta = entry.meta
    with (
        attempt_table.connection() as scratch,
        row_cache.appended_lines(state.rows_path, meta.offset) as chunk,
    ):
        identity = file_identity(state.rows_path)
        if chunk is None or identity is None:
            return False  # only an unfinished line past the end
        records = attempt_table.load_file(scratch, chunk.path, 0)
        ordinals = {rowid + 1 for _, rowid in attempt_table.bad_rowids(scratch)}
        problems = name_bad_records(chunk.path, ordinals) if ordinals else []
        before = row_cache.lines_covered(entry, state.rows_path) if problems else meta.lines
        with row_cache.writable(state.run, entry) as folder:
            if folder != entry.folder:
                raise OSError(f"{entry.folder}: not writable")
            cached_rows = sum(meta.part_rows)
            parts = list(meta.parts)
            row_cache.write_part(
                scratch, meta, folder, f"SELECT {row_cache.ROW_COLUMNS} FROM attempts WHERE valid"
            )
            kept = meta.aggs.get(key)
            meta.aggs = {}
            if kept is not None:
                earlier = row_cache.Entry(folder, replace(meta, parts=parts), tail=False)
                meta.aggs[key] = _merged_aggs(
                    earlier,
                    kept,
                    folder / meta.parts[-1],
                    cached_rows,
                    include_link_errors,
                    prices,
                )
            for problem in problems:
                assert before is not None
                meta.skipped_count += 1
                if len(meta.skipped) < row_cache.MAX_NAMED:
                    meta.skipped.append([before + problem.line, problem.reason, problem.torn])
            meta.records += records
            meta.lines = None if meta.lines is None else meta.lines + chunk.lines
            row_cache.covered(meta, state.rows_path, identity, meta.offset + chunk.size)
            row_cache.save(folder, meta)
    entry.tail = size_of(identity) > meta.offset
    return True


def _merged_aggs(
    entry: row_cache.Entry,
    kept: dict[str, Any],
    new_part: Path,
    cached_rows: int,
    include_link_errors: bool,
    prices: dict[str, ModelPrice] | None,
) -> dict[str, Any]:
    """The kept aggregates with the tasks the rows of ``new_part`` touch aggregated again from
    all their rows (their earlier rows read from the cache's parts, in file order, then the
    new ones), by the cold report's SQL."""
    part = row_cache.quoted(new_part)
    with attempt_table.connection() as con:
        earlier = row_cache.load_task_rows(
            con, entry, 0, f"SELECT DISTINCT task_id FROM read_parquet('{part}')"
        )
        con.execute(
            f"INSERT INTO attempts SELECT 0, {row_cache.ROW_COLUMNS}, TRUE "
            f"FROM read_parquet('{part}')"
        )
        if prices:
            attempt_table.price_models(con, prices)
        result = attempt_table.aggregate(
            con, include_link_errors=include_link_errors, per_task_extras=True
        )
        per_task = row_cache.read_extras(entry, kept)
        touched = row_cache.per_task_extras(
            result.tokens, result.link_kinds, result.harness_kinds, 0
        )
        for (task_id,) in con.execute("SELECT task_id FROM task_aggs").fetchall():
            for what, table in per_task.items():
                if touched[what].get(task_id):
                    table[task_id] = touched[what][task_id]
                else:
                    table.pop(task_id, None)
        old = row_cache.quoted(entry.folder / kept["aggs"])
        con.execute(
            f"CREATE TEMP TABLE kept_aggs AS FROM read_parquet('{old}', {row_cache.NO_HIVE})"
        )
        # a touched task's first winning row: an earlier row's place among the cached rows,
        # or a new row's after all of them
        aggs_sql = f"""
            SELECT * FROM kept_aggs WHERE task_id NOT IN (SELECT task_id FROM task_aggs)
            UNION ALL
            SELECT n.* EXCLUDE (f) REPLACE (
                coalesce(p.pos, {cached_rows} + n.first_seen - {earlier}) AS first_seen)
            FROM task_aggs n LEFT JOIN cached_positions p ON p.ord = n.first_seen
        """
        return row_cache.write_aggs(con, new_part.parent, aggs_sql, per_task)
