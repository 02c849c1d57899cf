"""A run's typed rows and per-task aggregates kept beside it, so a report is fast the second time.

A finished run's rows never change, yet every report, workbench view, compare, check and trend
read and typed the whole JSONL again. The cache keeps, per run (``CACHE_FOLDER`` in the run dir,
or under the user's cache dir when the run dir is read-only or there is none):

- ``meta.json``: the source's identity (``cache_store.file_identity``: device, inode, size,
  mtime and ctime; for a zero-copy run also its import record), the bytes, records and lines covered, the skipped
  lines named (the first ``MAX_NAMED`` and the count), and the code version;
- ``rows-*.parquet``: the valid rows as ``attempt_table`` typed them, in file order (one part per
  read: the first, then one per append);
- ``aggs-*.parquet`` and ``extras-*.json`` per report options (link errors counted or not, the
  price table): ``task_aggs`` and the per-task token sums and error kinds, with the run's totals.

Parquet, not a DuckDB file: a DuckDB file takes an exclusive lock while written, so a report
and the workbench reading the same run at once would wait on or fail at each other; Parquet
parts are written once under new names and the meta is replaced atomically, so a reader sees
an old or a new cache, whole. Reading them back costs about as much (measured: see
``tests/benchmarks/bench_row_cache.py``), and they are a little smaller.

Written crash-safely and checked on read (``analysis.cache_seal``): every part, aggregates and
extras file is fsynced and its size and sha256 recorded in the meta before the meta naming it
is replaced (fsynced too), and the meta carries a digest of itself. A meta of the wrong shape
or types, or whose digest is not its own, and a file missing or of another size, is no cache;
a file is hashed before it is read (once per process while unchanged), and one that is not
the file sealed (torn by a power cut, another run's put in its place) makes the run read from
its JSONL and its cache written again, never an error.

The JSONL stays the truth: a source whose identity changed drops the cache, except an
append-only one (same device, inode and the bytes before the covered end unchanged), which is
extended from the byte offset it covered with the live view's code (``appended_lines``) and
its aggregates updated for the tasks the new lines touch. A cache written by other code (any
change to the analysis code or another DuckDB: the code digest of ``analysis.cache_store``) is
rebuilt, never read. Every failure
to write one is ignored: the report is read from the JSONL as before.

It stays above 600 lines because it is one folder layout: its meta's fields, their checks on
read, its writer (parts, aggregates, extras, each sealed) and its extension by appended lines
change together; cut apart, a field added to one half would be unchecked by the other.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis import cache_seal, cache_store
from driftdesk.analysis.cache_store import FileIdentity, file_identity, same_file, size_of

if TYPE_CHECKING:
    import duckdb

    from driftdesk.analysis.prices import ModelPrice
    from driftdesk.analysis.sources import RunSource

META_FILE = "meta.json"
CACHE_FOLDER = ".rows-cache"
CACHE = cache_store.declare(
    cache_store.Declared(
        name="rows",
        format=3,  # the layout of the folder (3: the store's file identity); the code
        # digest covers the SQL
        what="typed rows",
        keys_on="the identity of the run's rows file (extended when only appended to)",
        user_part="rows",  # a read-only run's, by its resolved path
        beside_run=CACHE_FOLDER,
        run_entries=lambda run_dir: run_folders(run_dir),
    )
)
LONG_ATTEMPT = 128  # a task with an attempt from here needs its rows (``load_aggs``)
EDGE_BYTES = 1 << 12  # the bytes before the covered end that must be unchanged to extend
MAX_NAMED = 1000  # skipped lines named per run (``volatility.MAX_NAMED_SKIPPED_LINES``)
STALE_PART_S = 60.0  # an unreferenced part this old is no writer's work in progress

# The typed columns kept (``attempt_table.CREATE_TABLE`` without ``f`` and ``valid``).
ROW_COLUMNS = (
    "task_id, scenario_id, attempt, outcome, error_code, prompt_tokens, completion_tokens, "
    "total_tokens, latency_ms, model, retries, model_mismatches, model_latency_ms, score"
)
# LZ4: 16 % less CPU to write than zstd (measured on 1M rows), a quarter larger; the
# cache is still about 0.04× the JSONL (``bench_row_cache``)
_PARQUET = "(FORMAT parquet, COMPRESSION lz4)"


def options_key(include_link_errors: bool, prices: dict[str, ModelPrice] | None) -> str:
    """The report options the aggregates depend on, as a file-name-safe digest."""
    priced = None if prices is None else sorted((m, asdict(p)) for m, p in prices.items())
    text = json.dumps([include_link_errors, priced], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Meta:
    version: str
    source: FileIdentity  # ``cache_store.file_identity`` when the cache was last written
    zero_copy: dict[str, Any] | None  # the import record a zero-copy run was read with
    offset: int  # bytes covered (whole lines of a plain attempts file)
    edge: str  # ``_edge``: the first and last ``EDGE_BYTES`` before ``offset``
    records: int  # records (non-blank lines) covered, valid or not
    lines: int | None  # physical lines covered (None: not counted yet)
    parts: list[str] = field(default_factory=list)
    part_rows: list[int] = field(default_factory=list)  # rows of each part
    part_seals: list[list[Any]] = field(default_factory=list)  # [size, sha256] of each part
    skipped_count: int = 0
    skipped: list[list[Any]] = field(default_factory=list)  # [line, reason, torn]
    # options key -> {"aggs": file, "extras": file, "aggs_seal": seal, "extras_seal": seal,
    #                 "long": tasks with an attempt from ``LONG_ATTEMPT``,
    #                 "tokens": [[model, p, c, t]], "link": [[kind, n]], "harness": [[kind, n]],
    #                 "ci95": {min_runs: {name: [low, high] | None}} (``keep_ci95``)}
    aggs: dict[str, dict[str, Any]] = field(default_factory=dict)
    digest: str = ""  # ``_meta_digest`` of the rest, set by ``save``

    @property
    def extendable(self) -> bool:
        return self.zero_copy is None


@dataclass
class Entry:
    """A run's cache, read and found valid for its source as it is now."""

    folder: Path
    meta: Meta
    tail: bool  # the source has bytes past ``offset`` (a line being written, torn)

    def part_paths(self) -> list[str]:
        return [str(self.folder / p) for p in self.meta.parts]


def folders(run: RunSource) -> list[Path]:
    """Where a run's cache may be: beside the run, then under the user's cache dir."""
    place = run.run_dir if run.run_dir is not None else run.attempts_path
    digest = hashlib.sha256(str(place.resolve()).encode("utf-8", "surrogatepass")).hexdigest()
    user = CACHE.place() / digest[:32]
    return [run.run_dir / CACHE_FOLDER, user] if run.run_dir is not None else [user]


def run_folders(run_dir: Path) -> list[Path]:
    """``folders`` of a run dir, from its path alone."""
    from driftdesk.analysis.sources import RunSource
    from driftdesk.rundir import ATTEMPTS_FILE

    return folders(RunSource(run_dir / ATTEMPTS_FILE, run_dir, {}))


def _read_meta(folder: Path) -> Meta | None:
    """The folder's meta if it is whole, of this code, and of the right shape and types."""
    try:
        data = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != CACHE.version():
        return None
    if data.get("digest") != _meta_digest(data) or not _well_formed(data):
        return None
    try:
        return Meta(**data)
    except TypeError:
        return None


def _meta_digest(data: dict[str, Any]) -> str:
    """sha256 of a meta's fields but its digest, in a canonical form."""
    fields = {k: v for k, v in data.items() if k != "digest"}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _int(value: Any) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _named(value: Any, prefix: str, suffix: str) -> bool:
    """A file name this module writes (never a path: nothing outside the folder is read)."""
    if not isinstance(value, str) or not (value.startswith(prefix) and value.endswith(suffix)):
        return False
    middle = value[len(prefix) : len(value) - len(suffix)]
    return len(middle) == 32 and all(c in "0123456789abcdef" for c in middle)


def _pairs(value: Any, width: int, check: Callable[[list[Any]], bool]) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, list) and len(item) == width and check(item) for item in value
    )


def _well_formed(data: dict[str, Any]) -> bool:
    """Every field of a meta of the types this module writes (a cache written by hand, or by
    a bug, is no cache: read as one, a wrong type fails deep in a report)."""
    source = data.get("source")
    parts, rows, seals = data.get("parts"), data.get("part_rows"), data.get("part_seals")
    ok = (
        cache_store.is_identity(source)
        and (data.get("zero_copy") is None or isinstance(data["zero_copy"], dict))
        and _int(data.get("offset"))
        and isinstance(data.get("edge"), str)
        and _int(data.get("records"))
        and (data.get("lines") is None or _int(data["lines"]))
        and isinstance(parts, list)
        and all(_named(p, "rows-", ".parquet") for p in parts)
        and isinstance(rows, list)
        and len(rows) == len(parts)
        and all(_int(r) for r in rows)
        and isinstance(seals, list)
        and len(seals) == len(parts)
        and all(cache_seal.is_seal(s) for s in seals)
        and _int(data.get("skipped_count"))
        and _pairs(data.get("skipped"), 3, _skipped_line)
        and isinstance(data.get("aggs"), dict)
    )
    return ok and all(
        isinstance(key, str) and _well_formed_aggs(aggs) for key, aggs in data["aggs"].items()
    )


def _skipped_line(item: list[Any]) -> bool:
    return _int(item[0]) and isinstance(item[1], str) and isinstance(item[2], bool)


def _interval(ci: Any) -> bool:
    return ci is None or (isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci)))


def _well_formed_aggs(aggs: Any) -> bool:
    def kinds(item: list[Any]) -> bool:
        return (item[0] is None or isinstance(item[0], str)) and _number(item[1])

    def tokens(item: list[Any]) -> bool:
        return (item[0] is None or isinstance(item[0], str)) and all(map(_number, item[1:]))

    ci95 = aggs.get("ci95", {}) if isinstance(aggs, dict) else None
    return (
        isinstance(aggs, dict)
        and _named(aggs.get("aggs"), "aggs-", ".parquet")
        and _named(aggs.get("extras"), "extras-", ".json")
        and cache_seal.is_seal(aggs.get("aggs_seal"))
        and cache_seal.is_seal(aggs.get("extras_seal"))
        and _int(aggs.get("long"))
        and _pairs(aggs.get("tokens"), 4, tokens)
        and _pairs(aggs.get("link"), 2, kinds)
        and _pairs(aggs.get("harness"), 2, kinds)
        and isinstance(ci95, dict)
        and all(
            isinstance(by_name, dict)
            and all(isinstance(name, str) and _interval(ci) for name, ci in by_name.items())
            for by_name in ci95.values()
        )
    )


def _sizes_match(folder: Path, meta: Meta) -> bool:
    """Every file the meta names is there, of the size sealed (a cheap first check: the
    digests are checked before each file is read)."""
    sealed = list(zip(meta.parts, meta.part_seals, strict=True))
    for aggs in meta.aggs.values():
        sealed += [(aggs["aggs"], aggs["aggs_seal"]), (aggs["extras"], aggs["extras_seal"])]
    try:
        return all((folder / name).stat().st_size == seal[0] for name, seal in sealed)
    except OSError:
        return False


def _check_parts(entry: Entry) -> None:
    """Raise ``ValueError`` unless every part is the one sealed (the caller reads the run
    from its JSONL instead)."""
    for name, seal in zip(entry.meta.parts, entry.meta.part_seals, strict=False):
        if not cache_seal.matches(entry.folder / name, seal):
            raise ValueError(f"{entry.folder / name}: not the part the cache sealed")


def _edge(path: Path, offset: int) -> str:
    """sha256 of the first and the last ``EDGE_BYTES`` before ``offset``."""
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read(min(offset, EDGE_BYTES)))
        fh.seek(max(0, offset - EDGE_BYTES))
        digest.update(fh.read(min(offset, EDGE_BYTES)))
    return digest.hexdigest()


def find(run: RunSource, rows_path: Path, linked: dict[str, Any] | None) -> Entry | None:
    """The run's cache if it holds the start of ``rows_path`` as it is now: the whole file
    unchanged, or (a plain attempts file) the bytes before its covered end unchanged."""
    now = file_identity(rows_path)
    if now is None or not cache_store.enabled():
        return None
    for folder in folders(run):
        meta = _read_meta(folder)
        if meta is None or meta.zero_copy != linked or not _sizes_match(folder, meta):
            continue
        was = meta.source
        if was == now:
            return Entry(folder, meta, tail=size_of(now) > meta.offset)
        # grown, the start and the end of what was covered unchanged: appended to
        grown = same_file(was, now) and meta.extendable and size_of(now) > size_of(was)
        if grown and _edge(rows_path, meta.offset) == meta.edge:
            return Entry(folder, meta, tail=size_of(now) > meta.offset)
    return None


# -- reading ---------------------------------------------------------------------------------


# A run under a folder named like ``k=v`` would have DuckDB add a column ``k`` to every part
# read (its Hive partitions, guessed from the path): never.
NO_HIVE = "hive_partitioning = false"


def load_rows(con: duckdb.DuckDBPyConnection, entry: Entry, f: int) -> int:
    """Append the cached rows to ``attempts`` as run ``f``, in file order; the count."""
    if not entry.meta.parts:
        return 0
    _check_parts(entry)
    row = con.execute(  # a plain scan keeps the parts' order
        f"INSERT INTO attempts SELECT $f, {ROW_COLUMNS}, TRUE FROM read_parquet($parts, {NO_HIVE})",
        {"f": f, "parts": entry.part_paths()},
    ).fetchone()
    return int(row[0]) if row else 0


def load_task_rows(con: duckdb.DuckDBPyConnection, entry: Entry, f: int, tasks_from: str) -> int:
    """Append the cached rows of the tasks ``tasks_from`` selects to ``attempts`` as run
    ``f``, in file order, and fill ``cached_positions`` (the ``rowid`` of each, from the
    table's first row, and its place among all the cached rows: ``Meta.part_rows``); the
    count. The order is restored by sorting: a semi-join need not keep it."""
    _check_parts(entry)
    starts = [sum(entry.meta.part_rows[:i]) for i in range(len(entry.meta.parts))]
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE task_rows AS
        SELECT list_position($parts, filename) AS part, file_row_number AS r, {ROW_COLUMNS}
        FROM read_parquet($parts, filename = true, file_row_number = true, {NO_HIVE})
        WHERE task_id IN ({tasks_from})
        """,
        {"parts": entry.part_paths()},
    )
    row = con.execute(
        f"INSERT INTO attempts SELECT $f, {ROW_COLUMNS}, TRUE FROM task_rows ORDER BY part, r",
        {"f": f},
    ).fetchone()
    con.execute(
        "CREATE OR REPLACE TEMP TABLE cached_positions AS "
        "SELECT row_number() OVER (ORDER BY part, r) - 1 AS ord, $starts[part] + r AS pos "
        "FROM task_rows",
        {"starts": starts},
    )
    con.execute("DROP TABLE task_rows")
    return int(row[0]) if row else 0


def cached_aggs(entry: Entry, key: str) -> dict[str, Any] | None:
    """The aggregates kept for options ``key`` when they cover the whole source and their
    file is the one sealed (with the parts, when ``load_aggs`` will read rows of them)."""
    if entry.tail:
        return None
    aggs = entry.meta.aggs.get(key)
    if aggs is None or not cache_seal.matches(entry.folder / aggs["aggs"], aggs["aggs_seal"]):
        return None
    if aggs["long"]:
        try:
            _check_parts(entry)
        except ValueError:
            return None
    return aggs


def load_aggs(con: duckdb.DuckDBPyConnection, entry: Entry, aggs: dict[str, Any], f: int) -> None:
    """Append the cached per-task aggregates to ``task_aggs`` as run ``f``; the rows of tasks
    whose missing slots need their rows (an attempt from 128 on: ``task_report.prepare``) are
    loaded into ``attempts`` too."""
    con.execute(
        f"INSERT INTO task_aggs SELECT $f, * FROM read_parquet($path, {NO_HIVE})",
        {"f": f, "path": str(entry.folder / aggs["aggs"])},
    )
    long_tasks = (
        f"SELECT task_id FROM task_aggs WHERE f = {int(f)} AND max_attempt >= {LONG_ATTEMPT}"
    )
    if con.execute(f"SELECT count(*) FROM ({long_tasks})").fetchone() != (0,):
        load_task_rows(con, entry, f, long_tasks)


def run_extras(aggs: dict[str, Any]) -> tuple[dict[Any, tuple[int, int, int]], dict[str, int],
                                               dict[str, int]]:  # fmt: skip
    """(tokens by model, link-error kinds, harness-error kinds) kept with the aggregates."""
    tokens = {model: (int(p), int(c), int(t)) for model, p, c, t in aggs["tokens"]}
    return tokens, dict(aggs["link"]), dict(aggs["harness"])


def skipped_lines(entry: Entry) -> tuple[int, list[tuple[int, str, bool]]]:
    return entry.meta.skipped_count, [(int(n), str(r), bool(t)) for n, r, t in entry.meta.skipped]


# -- the bytes past the covered end (shared with the live view) -------------------------------


@dataclass
class Appended:
    path: Path  # a temporary copy of the complete new lines
    size: int  # their bytes
    lines: int


@contextlib.contextmanager
def appended_lines(
    source: Path, offset: int, *, complete: bool = True
) -> Iterator[Appended | None]:
    """The lines written to ``source`` after byte ``offset`` (a line boundary), copied to a
    temporary file for DuckDB to read: up to the last newline, or with ``complete=False`` all
    of them (a torn last line too). None when there are none."""
    with open(source, "rb") as fh:
        fh.seek(offset)
        chunk = fh.read()
    if complete:
        chunk = chunk[: chunk.rfind(b"\n") + 1]
    if not chunk:
        yield None
        return
    fd, name = tempfile.mkstemp(prefix="driftdesk-live-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(chunk)
        yield Appended(Path(name), len(chunk), chunk.count(b"\n"))
    finally:
        os.unlink(name)


def count_lines(path: Path, end: int) -> int:
    """Newlines in the first ``end`` bytes of ``path``, counted in blocks at C speed."""
    lines = 0
    with open(path, "rb") as fh:
        while end > 0:
            block = fh.read(min(1 << 24, end))
            if not block:
                break
            lines += block.count(b"\n")
            end -= len(block)
    return lines


def last_line_end(path: Path, size: int) -> int:
    """Offset just after the last newline in the first ``size`` bytes (0 if none)."""
    with open(path, "rb") as fh:
        position = size
        while position > 0:
            start = max(0, position - (1 << 16))
            fh.seek(start)
            last = fh.read(position - start).rfind(b"\n")
            if last >= 0:
                return start + last + 1
            position = start
    return 0


def lines_covered(entry: Entry, source: Path) -> int:
    if entry.meta.lines is None:
        entry.meta.lines = count_lines(source, entry.meta.offset)
    return entry.meta.lines


# -- writing ---------------------------------------------------------------------------------


@contextlib.contextmanager
def writable(run: RunSource, entry: Entry | None) -> Iterator[Path]:
    """A folder to write the run's cache in: its current one, else beside the run, else the
    user's cache dir; raises ``OSError`` when none can be written."""
    if not cache_store.enabled():
        raise OSError("caches are off (DRIFTDESK_NO_CACHE)")
    candidates = ([entry.folder] if entry else []) + folders(run)
    for folder in candidates:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            probe = folder / f".probe-{uuid.uuid4().hex}"
            probe.touch()
            probe.unlink()
        except OSError:
            continue
        yield folder
        return
    raise OSError("no writable place for the run's cache")


def write_part(con: duckdb.DuckDBPyConnection, meta: Meta, folder: Path, rows_sql: str,
               **params: Any) -> None:  # fmt: skip
    """Write the rows ``rows_sql`` selects (``ROW_COLUMNS``, in order) as a new part of
    ``meta``."""
    name = f"rows-{uuid.uuid4().hex}.parquet"
    row = con.execute(f"COPY ({rows_sql}) TO '{quoted(folder / name)}' {_PARQUET}", params)
    written = row.fetchone()
    seal = _sealed_durable(folder / name)
    meta.parts.append(name)
    meta.part_rows.append(int(written[0]) if written else 0)
    meta.part_seals.append(seal)


def _sealed_durable(path: Path) -> list[Any]:
    """The seal of a file just written, once it is on disk (before a meta names it)."""
    from driftdesk.fileio import fsync_file

    seal = cache_seal.file_seal(path)
    fsync_file(path)
    return seal


class Background:
    """``work`` done with a second connection to ``con``'s database, in a thread, so that
    writing a run's cache (encoding a million rows takes about a third of a second) overlaps
    the report made meanwhile, mostly Python on the other core. It sees the database's tables,
    not ``con``'s TEMP ones. ``wait`` before ``con`` closes."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, work: Callable[[duckdb.DuckDBPyConnection], None]
    ) -> None:
        self._cursor = con.cursor()
        self._failed = False
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
        try:
            work(self._cursor)
        except Exception:  # derived data, best effort: the report goes on without it
            self._failed = True  # a part half written is named by no meta: ``save`` removes it
        finally:
            self._cursor.close()

    def wait(self) -> bool:
        """Whether ``work`` was done."""
        try:
            self._thread.join()
        except BaseException:  # interrupted: the connection must still outlive the work
            self._thread.join()
            raise
        return not self._failed


def write_aggs(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    aggs_sql: str,
    per_task: dict[str, dict[str, dict[Any, Any]]],
    name: str | None = None,
) -> dict[str, Any]:
    """Write one run's per-task aggregates (``aggs_sql``: ``task_aggs``'s columns but ``f``,
    ``first_seen`` the place of the task's first winning row among the cached rows) and
    per-task extras, named after ``name`` (default: a new one); their record for
    ``Meta.aggs``."""
    name = name or uuid.uuid4().hex
    aggs, extras = aggs_file(name), f"extras-{name}.json"
    con.execute(f"COPY ({aggs_sql}) TO '{quoted(folder / aggs)}' {_PARQUET}")
    row = con.execute(
        f"SELECT count(*) FROM read_parquet('{quoted(folder / aggs)}') "
        f"WHERE max_attempt >= {LONG_ATTEMPT}"
    ).fetchone()
    tokens, link, harness = totals(per_task)
    text = json.dumps(
        {
            what: {task: [[k, v] for k, v in sums.items()] for task, sums in table.items()}
            for what, table in per_task.items()
        },
        separators=(",", ":"),
    )
    (folder / extras).write_text(text, encoding="utf-8")
    return {
        "aggs": aggs,
        "extras": extras,
        "aggs_seal": _sealed_durable(folder / aggs),
        "extras_seal": _sealed_durable(folder / extras),
        "long": int(row[0]) if row else 0,
        "tokens": [[m, *sums] for m, sums in tokens.items()],
        "link": list(link.items()),
        "harness": list(harness.items()),
    }


def aggs_file(name: str) -> str:
    return f"aggs-{name}.parquet"


def read_extras(entry: Entry, aggs: dict[str, Any]) -> dict[str, dict[str, dict[Any, Any]]]:
    """The per-task extras kept with ``aggs`` (``per_task_extras``'s shape), read to merge new
    rows into the kept aggregates; ``ValueError`` when the extras or the aggregates file is
    not the one sealed (both are read)."""
    for name, seal in ((aggs["aggs"], aggs["aggs_seal"]), (aggs["extras"], aggs["extras_seal"])):
        if not cache_seal.matches(entry.folder / name, seal):
            raise ValueError(f"{entry.folder / name}: not the file the cache sealed")
    path = entry.folder / aggs["extras"]
    data = json.loads(path.read_text(encoding="utf-8"))
    try:
        return {
            what: {
                task: {k: tuple(v) if what == "tokens" else v for k, v in pairs}
                for task, pairs in table.items()
            }
            for what, table in data.items()
        }
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not extras: {exc}") from exc


def totals(
    per_task: dict[str, dict[str, dict[Any, Any]]],
) -> tuple[dict[Any, tuple[int, int, int]], dict[str, int], dict[str, int]]:
    """The run's token sums by model and error kinds (most first, then by name, as the cold
    report's SQL orders them) from the per-task ones."""
    tokens: dict[Any, tuple[int, int, int]] = {}
    for sums in per_task["tokens"].values():
        for model, (p, c, t) in sums.items():
            old = tokens.get(model, (0, 0, 0))
            tokens[model] = (old[0] + p, old[1] + c, old[2] + t)
    kinds: list[dict[str, int]] = []
    for what in ("link", "harness"):
        counts: dict[str, int] = {}
        for sums in per_task[what].values():
            for kind, n in sums.items():
                counts[kind] = counts.get(kind, 0) + n
        kinds.append(dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))
    return tokens, kinds[0], kinds[1]


def per_task_extras(
    tokens: dict[tuple[Any, ...], tuple[int, int, int]],
    link: dict[tuple[Any, ...], int],
    harness: dict[tuple[Any, ...], int],
    f: int,
) -> dict[str, dict[str, dict[Any, Any]]]:
    """``attempt_table.aggregate``'s per-task extras ((f, task, key) -> value) of run ``f``."""
    out: dict[str, dict[str, dict[Any, Any]]] = {"tokens": {}, "link": {}, "harness": {}}
    for what, table in (("tokens", tokens), ("link", link), ("harness", harness)):
        for (run, task, key), value in table.items():
            if run == f:
                out[what].setdefault(task, {})[key] = value
    return out


def save(folder: Path, meta: Meta) -> None:
    """Replace the meta atomically and durably (the files it names were fsynced when
    written: ``_sealed_durable``; their names now too), then remove the files it no longer
    names once they are old enough to be no other writer's work in progress."""
    from driftdesk.fileio import atomic_write_text, fsync_dir

    data = asdict(meta)
    meta.digest = data["digest"] = _meta_digest(data)
    fsync_dir(folder)
    atomic_write_text(folder / META_FILE, json.dumps(data, separators=(",", ":")))
    named = {META_FILE, *meta.parts}
    for aggs in meta.aggs.values():
        named.update((aggs["aggs"], aggs["extras"]))
    now = time.time()
    for path in folder.iterdir():
        if path.name in named or path.name.startswith("."):
            continue
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > STALE_PART_S:
                path.unlink()


@dataclass(frozen=True)
class CiRef:
    """The aggregates a report was made from, in a run's cache (``keep_ci95``)."""

    folder: Path
    key: str
    aggs: str  # the aggregates' file


def keep_ci95(ref: CiRef, min_runs: int, ci95: dict[str, Any]) -> None:
    """Keep a report's bootstrap intervals with the aggregates they were drawn from (seeded:
    a function of them, ``include_link_errors`` and ``min_runs``); best effort."""
    meta = _read_meta(ref.folder)
    kept = None if meta is None else meta.aggs.get(ref.key)
    if meta is None or kept is None or kept["aggs"] != ref.aggs:
        return  # replaced meanwhile
    kept.setdefault("ci95", {})[str(min_runs)] = ci95
    with contextlib.suppress(OSError):
        save(ref.folder, meta)


def new_meta(rows_path: Path, linked: dict[str, Any] | None, identity: FileIdentity) -> Meta:
    return Meta(CACHE.version(), identity, linked, 0, _edge(rows_path, 0), 0, 0)


def covered(meta: Meta, rows_path: Path, identity: FileIdentity, offset: int) -> None:
    """Record that the cache now holds the source up to ``offset`` as it is (``identity``)."""
    meta.source, meta.offset = identity, offset
    meta.edge = _edge(rows_path, offset)


def quoted(path: Path) -> str:
    return str(path).replace("'", "''")
