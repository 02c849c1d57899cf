"""Foreign results -> a driftdesk run dir, so every report works on them.

Formats (``fmt``):

- ``jsonl``: one attempt per line. Task from ``--task-field`` or ``task_id``/``task``; outcome
  from ``outcome`` when it is one of ours, else success from ``--success-field`` or
  ``success``/``pass``/``passed``, else ``score``/``reward`` ≥ ``--score-threshold``; a row with
  an ``error_code`` and no verdict is a link error. Attempt from ``attempt``/``trial``, else
  numbered per task in file order. Tokens, latency, model when present.
- ``tau-bench``: the JSON list ``run.py`` saves (``task_id``, ``trial``, ``reward``, ``info``);
  success = reward within 1e-6 of 1, as tau-bench scores it. A record whose ``info`` carries an
  ``error`` (tau-bench stores the exception there, with reward 0) is a link error when the
  error looks like the network or the provider (status code, rate limit, timeout,
  connection), otherwise a harness error.
- ``tau2``: ``results.json`` with ``simulations`` (or, in the dir format, ``simulation_index``);
  ``reward_info.reward`` judged like tau-bench; ``termination_reason`` infrastructure_error
  becomes a link error and context_window_exceeded a harness error: tau2 keeps both out of its
  metric denominators, and so do we by default.
- ``appworld``: an evaluation JSON whose ``individual`` maps task id -> ``{success, …}``; one
  attempt per task; scenario id = the task id before its last ``_``.

Bad records are reported (line number for JSONL, 1-based record number for JSON lists) and
skipped; good ones are never dropped. A reward or score of NaN or ±Infinity (Python's json
reads them) makes a record bad: it is named, never judged nor written. Two records of one
(task, trial) in a tau-bench or tau2 document: the last is kept, as a report keeps the last row
of a slot, and the other is named with it. The run dir is built in a hidden temp folder and renamed
into place, so an interrupted import leaves nothing half-written.

This module owns the import as a whole: refusing a second import of the same content, staging
and writing the run dir (rows, trajectories, manifest), inspect_ai logs' hand-off. The format
readers themselves are ``analysis.import_formats``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.analysis.import_formats import (
    Attempt,
    Format,
    ResultsImportError,
    attempt_row,
    detect_format,
    dig,
    from_appworld,
    from_tau2,
    from_tau_bench,
    generic_attempt,
    last_of_each_slot,
    no_usable_records,
    number_attempts,
    number_rows,
)
from driftdesk.analysis.sources import row_problem
from driftdesk.rundir import (
    ATTEMPTS_FILE,
    MANIFEST_FILE,
    free_run_dir,
    import_run_id_base,
    read_manifest,
    write_manifest,
)


@dataclass
class ImportResult:
    run_dir: Path
    format: str
    attempts: int
    tasks: int
    problems: list[str] = field(default_factory=list)
    published: dict[str, Any] = field(default_factory=dict)  # numbers the source file states
    zero_copy: bool = False  # the run reads its rows from the source file (analysis.zero_copy)
    notes: list[str] = field(default_factory=list)  # warnings that skipped nothing
    # Harbor: a job (or folder of jobs) gives one run per agent, model and dataset
    more: list[ImportResult] = field(default_factory=list)


def _refuse_a_second_import(
    path: Path, content_sha256: str, options: list[Any], out: Path, run_id: str | None
) -> str:
    """The import's key; raises when the same content, read the same way, was imported into
    ``out`` before (a second import would only make a "-2" copy) and no --run-id was given."""
    import_key = hashlib.sha256((content_sha256 + json.dumps(options)).encode()).hexdigest()
    earlier = _imported_before(out, import_key)
    if earlier is not None and run_id is None:
        raise ResultsImportError(
            f"{path} was imported before, as {earlier} (same content); nothing was written. "
            "Give it a --run-id to import it again anyway."
        )
    return import_key


def _imported_before(out: Path, import_key: str) -> Path | None:
    """The run dir under ``out`` already imported from this content with these options."""
    if not out.is_dir():
        return None
    for manifest_path in out.glob(f"*/{MANIFEST_FILE}"):
        try:
            source = read_manifest(manifest_path.parent).get("imported_from")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(source, dict) and source.get("import_key") == import_key:
            return manifest_path.parent
    return None


def import_results(
    path: Path,
    *,
    fmt: Format = "auto",
    task_field: str | None = None,
    success_field: str | None = None,
    score_threshold: float | None = None,
    out: Path = Path("runs"),
    run_id: str | None = None,
    copy: bool = False,
    max_member_mb: int | None = None,
    merge: bool = False,
) -> ImportResult:
    """Read ``path`` in ``fmt`` and write ``out/<run_id>/{manifest.json,attempts.jsonl}``.

    Generic JSON lines are imported zero-copy unless ``copy``: every line is checked, but the
    run dir holds only the manifest, which links the source (``analysis.zero_copy``).
    ``max_member_mb``: an inspect ``.eval`` member decompressing past it is refused."""
    # Harbor first: the inspect check opens every JSON file of a folder (2,000 trajectories)
    if fmt == "harbor" or (fmt == "auto" and path.is_dir() and _harbor_jobs(path)):
        return _import_harbor(path, out, run_id, merge, copy)
    if fmt == "inspect" or (fmt == "auto" and _inspect_log(path)):
        # inspect_ai logs: analysis/inspect_logs.py (its own threshold when none was given)
        return _import_inspect(path, out, run_id, score_threshold, max_member_mb)
    if score_threshold is None:
        score_threshold = 1.0
    if not path.is_file():
        raise ResultsImportError(f"{path}: no such file")
    options = [fmt, task_field, success_field, score_threshold]
    if fmt == "jsonl" or (fmt == "auto" and path.suffix.lower() in (".jsonl", ".ndjson")):
        return _import_jsonl(
            path, task_field, success_field, score_threshold, out, run_id, options, copy
        )
    raw = path.read_bytes()
    fmt_found, document = detect_format(path, raw, fmt)
    if fmt_found == "jsonl":
        return _import_jsonl(
            path, task_field, success_field, score_threshold, out, run_id, options, copy
        )
    content_sha = hashlib.sha256(raw).hexdigest()
    import_key = _refuse_a_second_import(path, content_sha, options, out, run_id)
    problems: list[str] = []
    published: dict[str, Any] = {}
    model: str | None = None
    if fmt_found == "tau-bench":
        attempts = list(from_tau_bench(document, problems))
    elif fmt_found == "tau2":
        model = dig(document, "info", "agent_info", "llm")
        attempts = list(from_tau2(document, problems, model if isinstance(model, str) else None))
    else:
        attempts = list(from_appworld(document, problems))
        aggregate = document.get("aggregate") if isinstance(document, dict) else None
        if isinstance(aggregate, dict):
            published = {k: v for k, v in aggregate.items() if isinstance(v, int | float)}
    if not attempts:
        raise no_usable_records(path, problems)
    number_attempts(attempts)
    attempts = last_of_each_slot(attempts, problems)
    # The last guard: whatever the format, no row a report would refuse is written.
    kept = []
    for a in attempts:
        problem = row_problem(attempt_row("", a))
        if problem:
            problems.append(f"task {a.task_id!r} attempt {a.attempt}: {problem}")
        else:
            kept.append(a)
    attempts = kept
    if not attempts:
        raise no_usable_records(path, problems)
    models = {a.model for a in attempts if a.model}
    if model is None and len(models) == 1:
        model = models.pop()

    written, run_dir = _write_run(
        path,
        lambda: content_sha,
        fmt_found,
        _attempts_writer(attempts, fmt_found),
        out,
        run_id,
        model,
        published,
        lambda _: len(problems),
        import_key,
    )
    return ImportResult(
        run_dir, fmt_found, written.records, len(written.tasks), problems, published
    )


def _import_jsonl(
    path: Path,
    task_field: str | None,
    success_field: str | None,
    threshold: float,
    out: Path,
    run_id: str | None,
    options: list[Any],
    copy: bool,
) -> ImportResult:
    """Generic JSON lines, mapped and checked by DuckDB (``analysis.jsonl_import``) and, with
    ``copy``, written into the run dir; the file is hashed on a thread meanwhile (hashlib
    releases the GIL). Without ``copy`` the manifest links the source (zero-copy)."""
    from concurrent.futures import ThreadPoolExecutor

    from driftdesk.analysis import jsonl_import, zero_copy

    def line_problem(obj: Any) -> str | None:
        if not isinstance(obj, dict):
            return f"expected an object, got {type(obj).__name__}"
        try:
            generic_attempt(obj, task_field, success_field, threshold)
        except ValueError as exc:
            return str(exc)
        return None

    result: list[jsonl_import.JsonlWritten] = []

    def write_rows(target: Path | None, final_id: str) -> _Written:
        if result:  # zero-copy: checked already, nothing to write
            return _Written(result[0].records, result[0].tasks, result[0].repeat)
        written = jsonl_import.write_attempts(
            path,
            target,
            final_id,
            task_field=task_field,
            success_field=success_field,
            threshold=threshold,
            line_problem=line_problem,
            number_attempts=number_rows,
            scan=scan,
        )
        result.append(written)
        if not written.records:
            raise no_usable_records(
                path, [f"line {p.line}: {p.reason}" for p in written.problems], fields=True
            )
        if target is not None:
            _keep_jsonl_trajectories(path, target.parent, task_field, success_field, threshold)
        return _Written(written.records, written.tasks, written.repeat)

    def link() -> dict[str, Any]:
        linked = zero_copy.link(
            path,
            sha256=scan.result().sha256,
            has_long_lines=scan.result().has_long_lines,
            task_field=task_field,
            success_field=success_field,
            score_threshold=threshold,
        )
        bad = [
            {"line": p.line, "reason": p.reason, "torn": p.torn}
            for p in result[0].problems[: zero_copy.MAX_RECORDED_BAD_LINES]
        ]
        return {zero_copy.MANIFEST_KEY: linked.to_json(), "bad_lines": bad}

    with ThreadPoolExecutor(max_workers=1) as pool:
        scan = pool.submit(jsonl_import.scan_source, path)
        if not copy:  # nothing to write: the check runs while the file is hashed
            write_rows(None, "")
        # Was this content, read the same way, imported here before? With --copy only the
        # (quick) hash is awaited before refusing; DuckDB's read starts once it is known.
        import_key = _refuse_a_second_import(path, scan.result().sha256, options, out, run_id)
        written, run_dir = _write_run(
            path,
            lambda: scan.result().sha256,
            "jsonl",
            write_rows,
            out,
            run_id,
            None,
            {},
            lambda _: len(result[0].problems),
            import_key,
            None if copy else link,
        )
    problems = [
        f"line {p.line}: {'torn last line: ' if p.torn else ''}{p.reason}"
        for p in result[0].problems
    ]
    return ImportResult(
        run_dir, "jsonl", written.records, len(written.tasks), problems, {}, zero_copy=not copy
    )


def _keep_jsonl_trajectories(
    path: Path, run_dir: Path, task_field: str | None, success_field: str | None, threshold: float
) -> None:
    """A copied JSON-lines import keeps the conversations its rows carry (``messages``,
    ``traj`` or ``trajectory``) as trajectory files. Only a file that mentions one of those
    fields is read again, line by line, and numbered as the rows were."""
    from driftdesk.analysis.sources import iter_bounded_lines, lines_containing
    from driftdesk.analysis.steps import (
        MESSAGE_FIELDS,
        trajectory_from_messages,
        write_trajectory,
    )

    mentioned = False
    for needle in (json.dumps(f).encode() for f in MESSAGE_FIELDS):
        with open(path, "rb") as fh:  # a block search, at C speed
            mentioned = mentioned or next(lines_containing(fh, needle), None) is not None
    if not mentioned:
        return
    attempts: list[Attempt] = []
    with open(path, "rb") as fh:
        for raw, _, _ in iter_bounded_lines(fh):
            try:
                obj = json.loads(raw)
                attempt = generic_attempt(obj, task_field, success_field, threshold)
            except (ValueError, TypeError, AttributeError):
                continue  # named by the import already
            attempt.messages = next(
                (obj[f] for f in MESSAGE_FIELDS if isinstance(obj.get(f), list)), None
            )
            attempts.append(attempt)
    number_attempts(attempts)
    for a in attempts:
        traj = trajectory_from_messages(a.task_id, a.attempt or 0, a.outcome, a.messages, "jsonl")
        if traj is not None:
            write_trajectory(run_dir, traj)


def _attempts_writer(
    attempts: list[Attempt], fmt: str, keep_messages: bool = True
) -> Callable[[Path, str], _Written]:
    """Writes ``attempts`` as the run's rows (one fsync for the file, not one per row), and
    each attempt's conversation as its trajectory file beside them."""

    def write_rows(target: Path, final_id: str) -> _Written:
        from driftdesk.analysis.steps import trajectory_from_messages, write_trajectory
        from driftdesk.fileio import JsonlAppender

        with JsonlAppender(target, fsync=False) as appender:
            for a in attempts:
                appender.append(attempt_row(final_id, a))
            appender.sync()
        for a in attempts if keep_messages else ():
            traj = trajectory_from_messages(a.task_id, a.attempt or 0, a.outcome, a.messages, fmt)
            if traj is not None:
                write_trajectory(target.parent, traj)
        tasks = list(dict.fromkeys(a.task_id for a in attempts))
        return _Written(len(attempts), tasks, max((a.attempt or 0) for a in attempts) + 1)

    return write_rows


@dataclass
class _Written:
    records: int
    tasks: list[str]  # in order of first appearance
    repeat: int


def _write_run(
    source: Path,
    sha256: Callable[[], str],
    fmt: str,
    write_rows: Callable[[Path, str], _Written],
    out: Path,
    run_id: str | None,
    model: str | None,
    published: dict[str, Any],
    skipped: Callable[[_Written], int],
    import_key: str,
    linked: Callable[[], dict[str, Any]] | None = None,
    *,
    stem: str | None = None,
    suite_name: str | None = None,
    started_at: str | None = None,
    source_facts: dict[str, Any] | None = None,
) -> tuple[_Written, Path]:
    """Build the run dir in a hidden staging folder (``write_rows`` writes its attempts file,
    given the run id) and rename it into place: an interrupted import leaves nothing."""
    # Imported here: the report path imports this module for its error type only.
    import shutil
    from datetime import UTC, datetime

    from driftdesk import __version__

    base = import_run_id_base(fmt, stem or source.stem, datetime.now(UTC), run_id)
    out.mkdir(parents=True, exist_ok=True)
    final = free_run_dir(out, base)
    staging = out / f".{final.name}.importing-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        written = write_rows(staging / ATTEMPTS_FILE, final.name)
        manifest = {
            "run_id": final.name,
            "profile": None,
            "protocol": None,
            "base_url": None,
            "model": model,
            "suite": {
                "path": str(source.resolve()),
                "name": suite_name or f"import:{fmt}",
                "sha256": sha256(),
            },
            "repeat": written.repeat,
            "concurrency": None,
            "timeout_seconds": None,
            "agent": f"import:{fmt}",
            "command": None,
            "seed": None,
            "tasks": written.tasks,
            "driftdesk_version": __version__,
            "started_at": started_at or datetime.now(UTC).isoformat(),
            "ended_at": datetime.now(UTC).isoformat(),
            "status": "completed",
            "imported_from": {
                "path": str(source.resolve()),
                "import_key": import_key,
                "format": fmt,
                "records": written.records,
                "skipped": skipped(written),
                "published": published,
                # zero-copy: the source file the rows are read from (analysis.zero_copy)
                **(linked() if linked is not None else {}),
                **(source_facts or {}),  # a format's own figures (Harbor: "harbor")
            },
        }
        write_manifest(staging, manifest, mode=0o644)
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written, final


def _import_harbor(
    path: Path, out: Path, run_id: str | None, merge: bool, copy: bool
) -> ImportResult:
    """Harbor jobs (``analysis.harbor_import``): one run dir per job and key, or per key with
    ``merge``; the first run is the result, the others its ``more``. Rows are written, the
    trajectories read in place unless ``copy``."""
    import functools

    from driftdesk.analysis.harbor_import import copy_trajectories, prepare

    problems: list[str] = []
    results: list[ImportResult] = []
    for run in prepare(path, run_id=run_id, merge=merge, problems=problems):
        import_key = _refuse_a_second_import(path, run.digest, run.options, out, run_id)
        writer = _attempts_writer(run.attempts, "harbor", keep_messages=False)

        def write_rows(
            target: Path, final_id: str, writer: Any = writer, run: Any = run
        ) -> _Written:
            written = writer(target, final_id)
            if copy:
                copy_trajectories(target.parent, run.attempts, problems)
            return written

        digest: Callable[[], str] = functools.partial(str, run.digest)
        written, run_dir = _write_run(
            path,
            digest,
            "harbor",
            write_rows,
            out,
            run_id,
            run.model,
            {},
            lambda _: 0,
            import_key,
            stem=run.stem,
            suite_name=run.suite_name,
            started_at=run.started_at,
            source_facts={"harbor": run.facts, "copied_trajectories": copy},
        )
        results.append(ImportResult(run_dir, "harbor", written.records, len(written.tasks), [], {}))
    first = results[0]
    first.problems, first.more = problems, results[1:]
    return first


def _harbor_jobs(path: Path) -> bool:
    from driftdesk.analysis.harbor_jobs import looks_like_harbor

    return looks_like_harbor(path)


def _inspect_log(path: Path) -> bool:
    from driftdesk.analysis.inspect_logs import looks_like_inspect_log

    return looks_like_inspect_log(path)


def _import_inspect(
    path: Path,
    out: Path,
    run_id: str | None,
    threshold: float | None,
    max_member_mb: int | None = None,
) -> ImportResult:
    """inspect_ai logs (a ``.eval`` / ``.json`` file or a folder of them) -> a run dir; a
    score passes at ≥ ``threshold`` (inspect_logs.PASS_THRESHOLD when None)."""
    import hashlib
    from dataclasses import asdict

    from driftdesk.analysis.inspect_logs import (
        DEFAULT_MAX_MEMBER_MB,
        PASS_THRESHOLD,
        InspectLogRefused,
        InspectMissing,
        InspectMixedModels,
        read_inspect_logs,
    )

    if not path.exists():
        raise ResultsImportError(f"{path}: no such file or folder")
    threshold = PASS_THRESHOLD if threshold is None else threshold
    try:
        logs = read_inspect_logs(
            path,
            threshold=threshold,
            max_member_mb=DEFAULT_MAX_MEMBER_MB if max_member_mb is None else max_member_mb,
        )
    except (InspectMissing, InspectMixedModels, InspectLogRefused) as exc:
        raise ResultsImportError(str(exc)) from None
    if not logs.attempts:
        detail = "; ".join(logs.problems) or "no samples"
        raise ResultsImportError(f"{path}: no inspect samples to import ({detail})")
    fields = set(Attempt.__dataclass_fields__)
    attempts = [
        Attempt(**{k: v for k, v in asdict(a).items() if k in fields}) for a in logs.attempts
    ]
    if path.is_file():
        raw = path.read_bytes()
    else:  # a folder: its logs' hashes, in order, stand for it
        raw = b"".join(hashlib.sha256(f.read_bytes()).digest() for f in logs.files)
    content_sha = hashlib.sha256(raw).hexdigest()
    options: list[Any] = ["inspect"] if threshold == PASS_THRESHOLD else ["inspect", threshold]
    import_key = _refuse_a_second_import(path, content_sha, options, out, run_id)

    _, run_dir = _write_run(
        path,
        lambda: content_sha,
        "inspect",
        _attempts_writer(attempts, "inspect"),
        out,
        run_id,
        logs.model,
        dict(logs.published),  # inspect's own figures, beside the rows driftdesk reads
        lambda _: 0,
        import_key,
    )
    tasks = {a.task_id for a in attempts}
    return ImportResult(
        run_dir,
        "inspect",
        len(attempts),
        len(tasks),
        logs.problems,
        dict(logs.published),
        notes=logs.notes,
    )
