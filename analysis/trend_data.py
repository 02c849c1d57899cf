"""What ``driftdesk trend`` reads of each run, and the small cache that spares reading it again.

A run's trend figures come from its rows through the report's own reader
(``run_reader.read_runs``: the same row rules, the last row of a slot winning), plus the served
models and fingerprints of its ``calls.jsonl`` (the metering proxy's rows). They are kept as a
``RunAggregate``: per task (judged attempts, passes), the run's error counts, the sums behind
tokens per attempt, latency percentiles, served models and fingerprints, and what the manifest
says (start, suite, profile).

The cache (``CACHE_FILE`` in the run dir, or under the user's cache dir when the run dir is
not writable) holds one run's aggregate keyed by the identity of every file it was read from
(the rows, the calls and the manifest: ``cache_store.file_identity``, device, inode, size,
mtime and ctime; an edit that keeps the size and puts the mtime back changes the ctime) and
the code digest (``cache_store``).
Any of them changed, and the entry is dropped and read again. An entry is sealed
(``analysis.cache_seal``: its key line, the size and sha256 of the aggregate, the aggregate);
one that is not whole, not the one sealed, of another run's files or of the wrong types is
read again, never an error. Deleting it changes no figure.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis import cache_store
from driftdesk.analysis.cache_store import FileIdentity, file_identity
from driftdesk.rundir import ATTEMPTS_FILE, CALLS_FILE, MANIFEST_FILE, RunManifest

if TYPE_CHECKING:
    from driftdesk.analysis.sources import RunSource

CACHE_FILE = ".trend-aggregate.json"
CACHE = cache_store.declare(
    cache_store.Declared(
        name="trend-data",
        format=3,  # 3: the files' identity of the store
        what="trend figures",
        keys_on="the identity of the run's manifest, rows and calls files",
        user_part="trend/runs",  # a read-only run's, by its resolved path
        beside_run=CACHE_FILE,
        run_entries=lambda run_dir: [run_dir / CACHE_FILE, user_cache_file(run_dir)],
    )
)
# Runs are read into one DuckDB connection until their rows files hold this much (DuckDB
# spills past its memory limit; a batch bounds what one scan holds).
BATCH_BYTES = 128 << 20

# a file's identity (``cache_store.file_identity``), or None when it is absent
FileKey = FileIdentity | None


@dataclass
class RunAggregate:
    """One run's trend figures (all that ``analysis.trend`` needs; JSON-able)."""

    run_id: str
    run_dir: str
    started_at: str | None = None
    suite: str | None = None  # the suite's name (``manifest.suite.name``)
    suite_sha256: str | None = None
    suite_path: str | None = None
    profile: str | None = None
    model: str | None = None  # the model asked for
    status: str | None = None
    repeat: int | None = None
    # task -> [judged attempts, passes], tasks with at least one judged attempt, in file order
    tasks: dict[str, list[int]] = field(default_factory=dict)
    slots: int = 0  # winning rows (one per task × attempt)
    link_errors: int = 0
    harness_errors: int = 0
    skipped_lines: int = 0
    # total tokens of judged attempts: count, sum, sum of squares (mean and spread per attempt)
    tokens_n: int = 0
    tokens_sum: float = 0.0
    tokens_sq: float = 0.0
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    served_models: dict[str, int] = field(default_factory=dict)  # served model -> calls
    fingerprints: dict[str, int] = field(default_factory=dict)  # system_fingerprint -> calls
    # who made the run (``analysis.agent_identity``): agent kind, client and its version;
    # client_known False: a manifest from before runs named their client
    agent: str | None = None
    client: str | None = None
    client_version: str | None = None
    client_known: bool = False
    link_faults: str | None = None  # "absorb" | "retry" (--link-faults); None: an imported run

    @property
    def tokens_per_attempt(self) -> float | None:
        return self.tokens_sum / self.tokens_n if self.tokens_n else None

    @property
    def tokens_variance(self) -> float | None:
        """The sample variance of tokens per attempt (None below two attempts)."""
        if self.tokens_n < 2:
            return None
        mean = self.tokens_sum / self.tokens_n
        return max(0.0, (self.tokens_sq - self.tokens_n * mean * mean) / (self.tokens_n - 1))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunAggregate:
        return cls(**data)

    def well_formed(self) -> bool:
        """Every field of the type this module writes (a cached one is checked: a wrong type
        would fail deep in a trend, or show a wrong figure)."""

        def text(value: Any) -> bool:
            return value is None or isinstance(value, str)

        def count(value: Any) -> bool:
            return type(value) is int and value >= 0

        def number(value: Any) -> bool:
            return type(value) in (int, float)

        def cell_ok(cell: Any) -> bool:  # [judged, passes]
            return (
                isinstance(cell, list)
                and len(cell) == 2
                and count(cell[0])
                and count(cell[1])
                and cell[1] <= cell[0]
            )

        texts = (self.started_at, self.suite, self.suite_sha256, self.suite_path, self.profile,
                 self.model, self.status)  # fmt: skip
        counts = (self.slots, self.link_errors, self.harness_errors, self.skipped_lines,
                  self.tokens_n)  # fmt: skip
        return (
            isinstance(self.run_id, str)
            and isinstance(self.run_dir, str)
            and all(map(text, texts))
            and (self.repeat is None or type(self.repeat) is int)
            and isinstance(self.tasks, dict)
            and all(isinstance(task, str) and cell_ok(cell) for task, cell in self.tasks.items())
            and all(map(count, counts))
            and number(self.tokens_sum)
            and number(self.tokens_sq)
            and all(v is None or number(v) for v in (self.latency_p50_ms, self.latency_p95_ms))
            and all(
                isinstance(table, dict)
                and all(isinstance(k, str) and count(v) for k, v in table.items())
                for table in (self.served_models, self.fingerprints)
            )
        )


def source_keys(run_dir: Path, manifest: dict[str, Any]) -> list[FileKey]:
    """The identity (``cache_store.file_identity``) of every file a run's aggregate is read
    from."""
    rows = run_dir / ATTEMPTS_FILE
    if manifest.get("imported_from"):  # a zero-copy import reads its rows where they are
        from driftdesk.analysis.sources import RunSource
        from driftdesk.analysis.zero_copy import rows_path

        rows = rows_path(RunSource(rows, run_dir, manifest))
    return [
        file_identity(run_dir / MANIFEST_FILE),
        file_identity(rows),
        file_identity(run_dir / CALLS_FILE),
    ]


def user_cache_file(run_dir: Path) -> Path:
    """Where a read-only run's cache entry goes: the user's cache dir, by the run dir's
    resolved path."""
    return CACHE.entry_file(str(run_dir.resolve()))


def cached(run_dir: Path, keys: list[FileKey]) -> RunAggregate | None:
    """The cached aggregate of ``run_dir`` if one was read from files with exactly ``keys``,
    whole and of the right types."""
    for path in (run_dir / CACHE_FILE, user_cache_file(run_dir)):
        payload = CACHE.load(path, keys)
        if payload is None:
            continue  # none, stale or not ours to trust: read again, replaced below
        try:
            aggregate = RunAggregate.from_json(json.loads(payload))
        except (ValueError, TypeError):
            continue
        if aggregate.well_formed():
            return aggregate
    return None


def store(run_dir: Path, keys: list[FileKey], aggregate: RunAggregate) -> None:
    """Keep ``aggregate`` beside the run, else under the user's cache dir (a read-only run
    dir); neither writable, it is read again next time."""
    # its fields as they are (JSON already; ``asdict`` deep-copies 500 tasks' lists)
    payload = json.dumps(vars(aggregate), ensure_ascii=False, separators=(",", ":"))
    data = payload.encode("utf-8", "surrogatepass")
    if not CACHE.store(run_dir / CACHE_FILE, keys, data, prune=False):
        CACHE.store(user_cache_file(run_dir), keys, data, prune=False)


def aggregates(
    run_dirs: Sequence[Path],
    *,
    manifests: Sequence[dict[str, Any]] | None = None,
) -> list[RunAggregate]:
    """The aggregate of each run dir (in order): from the cache where its files are unchanged,
    else read (in batches, one DuckDB connection per batch) and cached. ``manifests``: the
    run dirs' manifests, if the caller has read them."""
    from driftdesk.analysis.run_success import pooled_success, remember_successes
    from driftdesk.analysis.sources import manifest_or_empty

    found: dict[int, RunAggregate] = {}
    to_read: list[tuple[int, Path, dict[str, Any], list[FileKey]]] = []
    for index, run_dir in enumerate(run_dirs):
        manifest = manifest_or_empty(run_dir) if manifests is None else manifests[index]
        keys = source_keys(run_dir, manifest)
        hit = cached(run_dir, keys)
        if hit is not None:
            found[index] = hit
        else:
            to_read.append((index, run_dir, manifest, keys))
    for batch in _batches(to_read):
        started = time.monotonic()
        read = read_aggregates([(run_dir, manifest) for _, run_dir, manifest, _ in batch])
        for (index, run_dir, _, keys), aggregate in zip(batch, read, strict=True):
            found[index] = aggregate
            store(run_dir, keys, aggregate)
        # the runs list's success of each run, read from the same rows
        remember_successes(
            ((run_dir, _rows_key(keys), pooled_success((p, n) for n, p in agg.tasks.values()))
             for (_, run_dir, _, keys), agg in zip(batch, read, strict=True)),
            started,
        )  # fmt: skip
    return [found[i] for i in range(len(run_dirs))]


def _rows_key(keys: list[FileKey]) -> FileKey:
    """The identity of a run's rows from ``source_keys``' (manifest, rows, calls)."""
    return keys[1]


def _batches(
    to_read: list[tuple[int, Path, dict[str, Any], list[FileKey]]],
) -> Iterator[list[tuple[int, Path, dict[str, Any], list[FileKey]]]]:
    """``to_read`` in runs of consecutive entries whose rows files hold ``BATCH_BYTES``."""
    batch: list[tuple[int, Path, dict[str, Any], list[FileKey]]] = []
    size = 0
    for entry in to_read:
        rows_size = (_rows_key(entry[3]) or [0, 0, 0])[2]
        if batch and size + rows_size > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(entry)
        size += rows_size
    if batch:
        yield batch


def read_aggregates(runs: Sequence[tuple[Path, dict[str, Any]]]) -> list[RunAggregate]:
    """Read the aggregates of ``runs`` ((run dir, manifest)) from their files: the rows by the
    report's row rules and per-task SQL (``analysis.attempt_table``), the calls by their two
    columns.

    A run's own attempts.jsonl is read with all the others in one scan, and no row cache is
    written for it: the aggregate kept here is all a trend reads again, and a statement and a
    cache per run cost four times the scan over a history of small runs. A zero-copy import
    reads its rows where they are, through the report's reader (``run_reader.read_runs``)."""
    from driftdesk.analysis import attempt_table
    from driftdesk.analysis.sources import RunSource
    from driftdesk.analysis.zero_copy import linked_source

    sources = [RunSource(d / ATTEMPTS_FILE, d, m) for d, m in runs]
    result = [_from_manifest(source) for source in sources]
    imported = [i for i, s in enumerate(sources) if linked_source(s.manifest) is not None]
    own = sorted(set(range(len(sources))) - set(imported))
    with attempt_table.connection() as con:
        if own:
            _load_own_rows(con, [sources[i] for i in own], [result[i] for i in own])
        _read_calls(con, [run_dir / CALLS_FILE for run_dir, _ in runs], result)
    if imported:  # the report's reader numbers its runs' rows from a table of its own
        with attempt_table.connection() as con:
            _load_by_report_reader(
                con, [sources[i] for i in imported], part := [result[i] for i in imported]
            )
            _collect(con, part, "task_aggs")
    return result


def _load_own_rows(con: Any, sources: Sequence[RunSource], result: list[RunAggregate]) -> None:
    """Every run's attempts.jsonl in one scan (``f``: the run's place in ``sources``), then the
    report's per-task aggregates (``task_aggs``); an invalid row is a skipped line."""
    from driftdesk.analysis import attempt_table

    present = [(f, s.attempts_path) for f, s in enumerate(sources) if s.attempts_path.is_file()]
    attempt_table.load_files(con, present)
    for f, bad in con.execute(
        "SELECT f, count(*) FROM attempts WHERE NOT valid GROUP BY f"
    ).fetchall():
        result[f].skipped_lines = int(bad)
    _collect(con, result, attempt_table.task_counts(con))


def _load_by_report_reader(
    con: Any, sources: Sequence[RunSource], result: list[RunAggregate]
) -> None:
    from driftdesk.analysis.run_reader import read_runs

    extras = read_runs(con, sources, include_link_errors=False)
    for aggregate, extra in zip(result, extras, strict=True):
        aggregate.skipped_lines = extra.skipped_line_count


def _collect(con: Any, result: list[RunAggregate], per_task: str) -> None:
    """Each run's figures from its per-task rows (``per_task``: ``task_aggs``, or the SQL of
    ``attempt_table.task_counts``, which has the same columns) and the judged attempts'
    latencies: one row per run (its judged tasks as lists, in first-seen order), its sums
    done in DuckDB."""
    for f, ids, judged, passes, slots, links, harness, n_tok, tok_sum, tok_sq in con.execute(
        f"""
        SELECT f,
               list(task_id ORDER BY first_seen) FILTER (WHERE passes + fails > 0),
               list(passes + fails ORDER BY first_seen) FILTER (WHERE passes + fails > 0),
               list(passes ORDER BY first_seen) FILTER (WHERE passes + fails > 0),
               sum(slots), sum(link_errors), sum(harness_errors),
               sum(n_tokens) FILTER (WHERE n_tokens > 0),
               sum(tokens_sum) FILTER (WHERE n_tokens > 0),  -- DECIMAL: exact
               -- each task's sum of squares from its mean and population deviation (summed
               -- by ``math.fsum``: correctly rounded, so in no order of DuckDB's threads)
               list(n_tokens * (coalesce(tokens_std, 0) ^ 2
                                + (tokens_sum::DOUBLE / n_tokens) ^ 2))
                   FILTER (WHERE n_tokens > 0)
        FROM {per_task} GROUP BY f
        """
    ).fetchall():
        run = result[f]
        if ids:
            pairs = map(list, zip(judged, passes, strict=True))
            run.tasks.update(zip(map(str, ids), pairs, strict=True))
        run.slots += int(slots or 0)
        run.link_errors += int(links or 0)
        run.harness_errors += int(harness or 0)
        if n_tok:
            run.tokens_n += int(n_tok)
            run.tokens_sum += float(tok_sum)
            run.tokens_sq += math.fsum(tok_sq)
    for f, p50, p95 in con.execute(
        "SELECT f, quantile_cont(latency_ms, 0.5), quantile_cont(latency_ms, 0.95) "
        "FROM attempts WHERE valid AND outcome IN ('pass', 'fail') GROUP BY f"
    ).fetchall():
        result[f].latency_p50_ms = None if p50 is None else float(p50)
        result[f].latency_p95_ms = None if p95 is None else float(p95)


def _from_manifest(source: RunSource) -> RunAggregate:
    from driftdesk.analysis.agent_identity import agent_identity
    from driftdesk.analysis.link_faults_report import link_faults_mode

    manifest = RunManifest.from_json(source.manifest)
    who = agent_identity(source.manifest)
    return RunAggregate(
        run_id=source.run_id,
        run_dir=str(source.run_dir),
        started_at=manifest.started_at,
        suite=manifest.suite_name,
        suite_sha256=manifest.suite_sha256,
        suite_path=manifest.suite_path,
        profile=manifest.profile,
        model=manifest.model,
        status=manifest.status,
        repeat=manifest.repeat,
        agent=who.kind,
        client=who.client,
        client_version=who.version,
        client_known=who.recorded,
        link_faults=link_faults_mode(source.manifest),
    )


def _read_calls(con: Any, paths: list[Path], result: list[RunAggregate]) -> None:
    """Served models and fingerprints per run, counted over its calls.jsonl rows (a bad line
    is a row of NULLs to DuckDB: counted under no model, so left out)."""
    import duckdb

    present = [(i, p) for i, p in enumerate(paths) if p.is_file() and p.stat().st_size > 0]
    if not present:
        return
    index_of = {str(p): i for i, p in present}
    query = (
        "SELECT filename, served_model, system_fingerprint, count(*) FROM read_json($paths, "
        "format='newline_delimited', records=true, ignore_errors=true, filename=true, "
        "columns={'served_model': 'VARCHAR', 'system_fingerprint': 'VARCHAR'}) GROUP BY ALL"
    )
    try:
        rows = con.execute(query, {"paths": [str(p) for _, p in present]}).fetchall()
    except duckdb.Error:
        rows = []
        for _, path in present:  # one file DuckDB cannot read (a line over its limit): alone
            with contextlib.suppress(duckdb.Error):
                rows += con.execute(query, {"paths": [str(path)]}).fetchall()
    for filename, served, fingerprint, count in rows:
        run = result[index_of[str(filename)]]
        if served:
            run.served_models[served] = run.served_models.get(served, 0) + int(count)
        if fingerprint:
            run.fingerprints[fingerprint] = run.fingerprints.get(fingerprint, 0) + int(count)


def normal_ci95(values: Sequence[float]) -> list[float] | None:
    """mean ± 1.96 standard errors over ``values`` (the tasks: the unit a report's bootstrap
    resamples), clipped to 0..1; None below two values."""
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    half = 1.959964 * math.sqrt(variance / len(values))
    return [max(0.0, mean - half), min(1.0, mean + half)]
