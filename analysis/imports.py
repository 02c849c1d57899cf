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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from driftdesk.analysis.sources import (
    OUTCOMES,
    field_problem,
    row_problem,
)
from driftdesk.rundir import (
    ATTEMPTS_FILE,
    MANIFEST_FILE,
    free_run_dir,
    import_run_id_base,
    read_manifest,
    write_manifest,
)
from driftdesk.secrets import redact
from driftdesk.text import article

Format = Literal["auto", "jsonl", "tau-bench", "tau2", "appworld"]
FORMATS = ("jsonl", "tau-bench", "tau2", "appworld")
REWARD_TOLERANCE = 1e-6
TASK_FIELDS = ("task_id", "task")
SUCCESS_FIELDS = ("success", "pass", "passed")
SCORE_FIELDS = ("score", "reward")
ATTEMPT_FIELDS = ("attempt", "trial")
TAU2_LINK_ERRORS = {"infrastructure_error"}
TAU2_HARNESS_ERRORS = {"context_window_exceeded"}


class ResultsImportError(ValueError):
    """The file cannot be imported at all (unreadable, unknown format, no usable record)."""


# What a generic JSON-lines record is read by, and how to name other fields.
FIELDS_HINT = (
    "name the fields with --task-field NAME and --success-field NAME (read by default: the task "
    f"from {' or '.join(TASK_FIELDS)}; the verdict from outcome, {', '.join(SUCCESS_FIELDS)}, "
    f"else {' or '.join(SCORE_FIELDS)} ≥ --score-threshold, 1.0 by default)"
)
SHOWN_PROBLEMS = 3


def no_usable_records(path: Path, problems: list[str], fields: bool = False) -> ResultsImportError:
    """Nothing to import: how many records were bad, why (the first few), and, for generic
    records, which fields were looked for and how to name others."""
    if problems:
        shown = "; ".join(problems[:SHOWN_PROBLEMS])
        more = len(problems) - SHOWN_PROBLEMS
        detail = f" ({len(problems)} bad records: {shown}" + (f"; {more} more" if more > 0 else "")
        detail += ")"
    else:
        detail = " (the file holds none)"
    hint = f"; {FIELDS_HINT}" if fields else ""
    return ResultsImportError(f"{path}: no usable records{detail}{hint}")


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


@dataclass
class _Attempt:
    task_id: str
    outcome: str
    attempt: int | None = None
    scenario_id: str | None = None
    score: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    latency_ms: float | None = None
    model: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    retries: int = 0
    messages: Any = None  # the attempt's conversation, kept as its trajectory (analysis.trajectory)
    record: int | None = None  # its number in the source document, to name it


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
) -> ImportResult:
    """Read ``path`` in ``fmt`` and write ``out/<run_id>/{manifest.json,attempts.jsonl}``.

    Generic JSON lines are imported zero-copy unless ``copy``: every line is checked, but the
    run dir holds only the manifest, which links the source (``analysis.zero_copy``).
    ``max_member_mb``: an inspect ``.eval`` member decompressing past it is refused."""
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
    fmt_found, document = _detect(path, raw, fmt)
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
        attempts = list(_from_tau_bench(document, problems))
    elif fmt_found == "tau2":
        model = _dig(document, "info", "agent_info", "llm")
        attempts = list(_from_tau2(document, problems, model if isinstance(model, str) else None))
    else:
        attempts = list(_from_appworld(document, problems))
        aggregate = document.get("aggregate") if isinstance(document, dict) else None
        if isinstance(aggregate, dict):
            published = {k: v for k, v in aggregate.items() if isinstance(v, int | float)}
    if not attempts:
        raise no_usable_records(path, problems)
    _number_attempts(attempts)
    attempts = _last_of_each_slot(attempts, problems)
    # The last guard: whatever the format, no row a report would refuse is written.
    kept = []
    for a in attempts:
        problem = row_problem(_row("", a))
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
            _generic_attempt(obj, task_field, success_field, threshold)
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
    attempts: list[_Attempt] = []
    with open(path, "rb") as fh:
        for raw, _, _ in iter_bounded_lines(fh):
            try:
                obj = json.loads(raw)
                attempt = _generic_attempt(obj, task_field, success_field, threshold)
            except (ValueError, TypeError, AttributeError):
                continue  # named by the import already
            attempt.messages = next(
                (obj[f] for f in MESSAGE_FIELDS if isinstance(obj.get(f), list)), None
            )
            attempts.append(attempt)
    _number_attempts(attempts)
    for a in attempts:
        traj = trajectory_from_messages(a.task_id, a.attempt or 0, a.outcome, a.messages, "jsonl")
        if traj is not None:
            write_trajectory(run_dir, traj)


def number_rows(rows: list[tuple[str, int | None]]) -> list[int]:
    """The attempt numbers of (task, attempt or None) rows in file order, by the importer's
    rule (``_number_attempts``)."""
    attempts = [_Attempt(task, "pass", attempt) for task, attempt in rows]
    _number_attempts(attempts)
    return [a.attempt or 0 for a in attempts]


def generic_task_rows(
    lines: list[tuple[int, Any]],
    task_id: str,
    *,
    run_id: str,
    task_field: str | None,
    success_field: str | None,
    threshold: float,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row in our schema) of ``task_id``'s good rows among parsed generic
    ``lines``, numbered as the import numbers them (per task, in file order)."""
    found: list[tuple[int, _Attempt]] = []
    for number, obj in lines:
        if not isinstance(obj, dict):
            continue
        try:
            attempt = _generic_attempt(obj, task_field, success_field, threshold)
        except ValueError:
            continue
        if attempt.task_id == task_id:
            found.append((number, attempt))
    _number_attempts([a for _, a in found])
    for number, attempt in found:
        yield number, _row(run_id, attempt)


def _attempts_writer(attempts: list[_Attempt], fmt: str) -> Callable[[Path, str], _Written]:
    """Writes ``attempts`` as the run's rows (one fsync for the file, not one per row), and
    each attempt's conversation as its trajectory file beside them."""

    def write_rows(target: Path, final_id: str) -> _Written:
        from driftdesk.analysis.steps import trajectory_from_messages, write_trajectory
        from driftdesk.fileio import JsonlAppender

        with JsonlAppender(target, fsync=False) as appender:
            for a in attempts:
                appender.append(_row(final_id, a))
            appender.sync()
        for a in attempts:
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


# --- format detection -------------------------------------------------------------------


def _detect(path: Path, raw: bytes, fmt: Format) -> tuple[str, Any]:
    if fmt == "jsonl":
        return "jsonl", None
    if fmt == "auto" and path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl", None
    try:
        document = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if fmt == "auto" and _looks_like_jsonl(raw):
            return "jsonl", None
        raise ResultsImportError(
            f"{path}: not valid JSON ({exc}); for JSON lines use --format jsonl"
        ) from exc
    if fmt != "auto":
        _check_shape(path, fmt, document)
        return fmt, document
    if isinstance(document, dict) and ("simulations" in document or "simulation_index" in document):
        return "tau2", document
    if isinstance(document, dict) and isinstance(document.get("individual"), dict):
        return "appworld", document
    if isinstance(document, list) and any(
        isinstance(r, dict) and "reward" in r and "task_id" in r for r in document
    ):
        return "tau-bench", document
    if isinstance(document, dict) and any(f in document for f in TASK_FIELDS):
        return "jsonl", None  # a one-line JSONL file
    raise ResultsImportError(
        f"{path}: cannot tell the format (expected a tau-bench list, a tau2 results.json, an "
        "AppWorld evaluation or JSON lines); pass --format"
    )


def _looks_like_jsonl(raw: bytes) -> bool:
    first = raw.lstrip().split(b"\n", 1)[0]
    try:
        return isinstance(json.loads(first), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def _check_shape(path: Path, fmt: str, document: Any) -> None:
    ok = {
        "tau-bench": isinstance(document, list),
        "tau2": isinstance(document, dict)
        and ("simulations" in document or "simulation_index" in document),
        "appworld": isinstance(document, dict) and isinstance(document.get("individual"), dict),
    }[fmt]
    if not ok:
        expected = {
            "tau-bench": "a JSON list of results",
            "tau2": "an object with 'simulations'",
            "appworld": "an object with 'individual'",
        }[fmt]
        raise ResultsImportError(f"{path}: not {article(fmt)} file: expected {expected}")


# --- readers ----------------------------------------------------------------------------


def _generic_attempt(
    row: dict[str, Any], task_field: str | None, success_field: str | None, threshold: float
) -> _Attempt:
    task_id = _first(row, (task_field,) if task_field else TASK_FIELDS)
    if task_id is None or task_id == "":
        wanted = repr(task_field) if task_field else " or ".join(TASK_FIELDS)
        raise ValueError(f"no task id ({wanted})")
    error_code = row.get("error_code")
    outcome = row.get("outcome") if row.get("outcome") in OUTCOMES else None
    score = _number(_first(row, SCORE_FIELDS))
    if score is not None and not math.isfinite(score):
        raise ValueError(f"score is {score}, not finite")
    if outcome is None:
        verdict = _first(row, (success_field,) if success_field else SUCCESS_FIELDS)
        if isinstance(verdict, bool):
            outcome = "pass" if verdict else "fail"
        elif isinstance(verdict, int | float) and verdict in (0, 1):
            outcome = "pass" if verdict == 1 else "fail"
        elif verdict is not None:
            raise ValueError(f"success field is not a boolean: {verdict!r}")
        elif score is not None and not success_field:
            outcome = "pass" if score >= threshold else "fail"
        elif error_code is not None:
            outcome = "link_error"
        elif success_field:
            # Named by the user: a record without it is not judged by its score instead.
            raise ValueError(f"no {success_field!r} (the --success-field)")
        else:
            raise ValueError(
                f"no verdict ({' or '.join(('outcome', *SUCCESS_FIELDS, *SCORE_FIELDS))} "
                "or error_code)"
            )
    usage: dict[str, Any] = row["usage"] if isinstance(row.get("usage"), dict) else {}
    attempt = _first(row, ATTEMPT_FIELDS)
    counts = {
        name: row[name] if row.get(name) is not None else usage.get(name)
        for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    latency = row.get("latency_ms")
    # The row rules a report reads by: a row that breaks them is refused here, never written.
    for name, value in (*counts.items(), ("latency_ms", latency)):
        problem = field_problem(name, value)
        if problem:
            raise ValueError(problem)
    if attempt is not None:
        problem = field_problem("attempt", attempt)
        if problem:
            raise ValueError(problem)
        attempt = int(str(attempt).strip())
    return _Attempt(
        task_id=str(task_id),
        outcome=outcome,
        attempt=attempt,
        scenario_id=_str_or_none(row.get("scenario_id")),
        score=score,
        error_code=_str_or_none(error_code),
        error_message=_str_or_none(row.get("error_message")),
        prompt_tokens=_count(counts["prompt_tokens"]),
        completion_tokens=_count(counts["completion_tokens"]),
        total_tokens=_count(counts["total_tokens"]),
        latency_ms=None if latency is None else float(latency),
        model=_str_or_none(row.get("model")),
        started_at=_str_or_none(row.get("started_at")),
        ended_at=_str_or_none(row.get("ended_at")),
    )


def _from_tau_bench(document: list[Any], problems: list[str]) -> Iterator[_Attempt]:
    for number, record in enumerate(document, start=1):
        if not isinstance(record, dict):
            problems.append(f"record {number}: expected an object, got {type(record).__name__}")
            continue
        task_id = record.get("task_id")
        reward = _number(record.get("reward"))
        if task_id is None or isinstance(task_id, bool):
            problems.append(f"record {number}: no task_id")
            continue
        if reward is None:
            problems.append(f"record {number} (task {task_id}): reward is not a number")
            continue
        if not math.isfinite(reward):  # NaN / Infinity, which Python's json reads
            problems.append(f"record {number} (task {task_id}): reward is {reward}, not finite")
            continue
        info: dict[str, Any] = record["info"] if isinstance(record.get("info"), dict) else {}
        trial = record.get("trial")
        attempt = _Attempt(
            task_id=str(task_id),
            outcome="pass" if abs(reward - 1.0) <= REWARD_TOLERANCE else "fail",
            attempt=trial if isinstance(trial, int) and not isinstance(trial, bool) else None,
            score=reward,
            messages=record.get("traj"),
            record=number,
        )
        error = info.get("error")
        if error:
            code = _classify_error(str(error))
            attempt.outcome = "harness_error" if code == "harness_crash" else "link_error"
            attempt.error_code = code
            # Masked before the cut, so no key is left half-visible at the 300th character.
            attempt.error_message = redact(str(error).splitlines()[0])[:300] if str(error) else None
        yield attempt


def _from_tau2(
    document: dict[str, Any], problems: list[str], model: str | None
) -> Iterator[_Attempt]:
    records = document.get("simulations") or []
    index_only = not records and isinstance(document.get("simulation_index"), list)
    if index_only:
        records = document["simulation_index"]
    if not isinstance(records, list):
        problems.append("simulations: expected a list")
        return
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            problems.append(f"record {number}: expected an object, got {type(record).__name__}")
            continue
        task_id = record.get("task_id")
        if task_id is None or task_id == "":
            problems.append(f"record {number}: no task_id")
            continue
        reason = record.get("termination_reason")
        reward = _number(
            record.get("reward") if index_only else _dig(record, "reward_info", "reward")
        )
        if reward is not None and not math.isfinite(reward):
            problems.append(f"record {number} (task {task_id}): reward is {reward}, not finite")
            continue
        trial = record.get("trial")
        attempt = _Attempt(
            task_id=str(task_id),
            outcome="fail",
            attempt=trial if isinstance(trial, int) and not isinstance(trial, bool) else None,
            score=reward,
            record=number,
            latency_ms=_seconds_to_ms(record.get("duration")),
            model=model,
            started_at=_str_or_none(record.get("start_time")),
            ended_at=_str_or_none(record.get("end_time")),
            messages=record.get("messages"),
        )
        if reason in TAU2_LINK_ERRORS or reason in TAU2_HARNESS_ERRORS:
            attempt.outcome = "link_error" if reason in TAU2_LINK_ERRORS else "harness_error"
            attempt.error_code = str(reason)
        elif reward is None:
            problems.append(f"record {number} (task {task_id}): no reward_info.reward")
            continue
        else:
            attempt.outcome = "pass" if abs(reward - 1.0) <= REWARD_TOLERANCE else "fail"
        prompt, completion = _tau2_usage(record.get("messages"))
        if prompt or completion:
            attempt.prompt_tokens, attempt.completion_tokens = prompt, completion
            attempt.total_tokens = prompt + completion
        yield attempt


def _tau2_usage(messages: Any) -> tuple[int, int]:
    prompt = completion = 0
    if isinstance(messages, list):
        for message in messages:
            usage = message.get("usage") if isinstance(message, dict) else None
            if (
                isinstance(message, dict)
                and message.get("role") == "assistant"
                and isinstance(usage, dict)
            ):
                prompt += _int(usage.get("prompt_tokens")) or 0
                completion += _int(usage.get("completion_tokens")) or 0
    return prompt, completion


def _from_appworld(document: dict[str, Any], problems: list[str]) -> Iterator[_Attempt]:
    for number, (task_id, record) in enumerate(document["individual"].items(), start=1):
        if not isinstance(record, dict) or not isinstance(record.get("success"), bool):
            problems.append(f"record {number} (task {task_id}): no boolean 'success'")
            continue
        scenario = task_id.rsplit("_", 1)[0] if "_" in task_id else task_id
        yield _Attempt(
            task_id=task_id,
            outcome="pass" if record["success"] else "fail",
            attempt=0,
            scenario_id=scenario,
        )


# --- helpers ----------------------------------------------------------------------------

_STATUS = re.compile(r"\b(4\d\d|5\d\d)\b")


def _classify_error(text: str) -> str:
    lowered = text.lower()
    if "insufficient_quota" in lowered:
        return "insufficient_quota"
    if "ratelimit" in lowered or "rate limit" in lowered:
        return "429"
    match = _STATUS.search(text)
    if match:
        return match.group(1)
    if "timeout" in lowered or "timed out" in lowered:
        return "timeout"
    if "connection" in lowered:
        return "connection"
    return "harness_crash"


def _number_attempts(attempts: list[_Attempt]) -> None:
    """Attempts without a number get the next free one of their task, in file order."""
    used: dict[str, set[int]] = {}
    for a in attempts:
        if a.attempt is not None:
            used.setdefault(a.task_id, set()).add(a.attempt)
    next_free: dict[str, int] = {}
    for a in attempts:
        if a.attempt is None:
            taken = used.setdefault(a.task_id, set())
            candidate = next_free.get(a.task_id, 0)
            while candidate in taken:
                candidate += 1
            a.attempt = candidate
            taken.add(candidate)
            next_free[a.task_id] = candidate + 1


def _last_of_each_slot(attempts: list[_Attempt], problems: list[str]) -> list[_Attempt]:
    """One record per (task, trial): the last in file order, as a report keeps the last row of
    a slot; each dropped record is named with the one kept (a rerun's results concatenated
    onto the first's give two rewards for one trial, and silently one of them was lost)."""
    slots: dict[tuple[str, int | None], list[_Attempt]] = {}
    for a in attempts:
        slots.setdefault((a.task_id, a.attempt), []).append(a)
    for (task_id, trial), records in slots.items():
        if len(records) > 1:
            kept = records[-1]
            for dropped in records[:-1]:
                problems.append(
                    f"record {dropped.record} (task {task_id}, trial {trial}, {_verdict(dropped)})"
                    f": same task and trial as record {kept.record} ({_verdict(kept)}), "
                    "which is kept (the last one, as a report keeps the last row of a slot)"
                )
    return [a for a in attempts if slots[(a.task_id, a.attempt)][-1] is a]


def _verdict(a: _Attempt) -> str:
    return a.outcome + (f", reward {a.score:g}" if a.score is not None else "")


def _first(row: dict[str, Any], names: Iterable[str | None]) -> Any:
    for name in names:
        if name and row.get(name) is not None:
            return row[name]
    return None


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    """A count that passed ``field_problem``: an int, or a string of digits."""
    return None if value is None else int(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _seconds_to_ms(value: Any) -> float | None:
    seconds = _number(value)
    return None if seconds is None else seconds * 1000.0


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
) -> tuple[_Written, Path]:
    """Build the run dir in a hidden staging folder (``write_rows`` writes its attempts file,
    given the run id) and rename it into place: an interrupted import leaves nothing."""
    # Imported here: the report path imports this module for its error type only.
    import shutil
    from datetime import UTC, datetime

    from driftdesk import __version__

    base = import_run_id_base(fmt, source.stem, datetime.now(UTC), run_id)
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
                "name": f"import:{fmt}",
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
            "started_at": datetime.now(UTC).isoformat(),
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
            },
        }
        write_manifest(staging, manifest, mode=0o644)
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written, final


def _row(run_id: str, a: _Attempt) -> dict[str, Any]:
    judged = a.outcome in ("pass", "fail")
    return {
        "run_id": run_id,
        "task_id": a.task_id,
        "scenario_id": a.scenario_id,
        "attempt": a.attempt,
        "outcome": a.outcome,
        "success": (a.outcome == "pass") if judged else None,
        "score": a.score,
        "error_code": a.error_code,
        # Foreign error texts may quote a key (an echoed 401): masked like ours.
        "error_message": redact(a.error_message) if a.error_message else None,
        "retries": a.retries,
        "calls": None,
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": a.completion_tokens,
        "total_tokens": a.total_tokens,
        "latency_ms": a.latency_ms,
        "started_at": a.started_at,
        "ended_at": a.ended_at,
        "model": a.model,
        "base_url": None,
    }


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
    fields = set(_Attempt.__dataclass_fields__)
    attempts = [
        _Attempt(**{k: v for k, v in asdict(a).items() if k in fields}) for a in logs.attempts
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
