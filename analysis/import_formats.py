"""The foreign formats an import reads: detection, one reader per format (generic JSON lines,
tau-bench, tau2, AppWorld) turning records into ``Attempt``s, the numbering of attempts and
the one-record-per-slot rule, and the row an attempt becomes. What each format means is in
``analysis.imports``'s docstring; staging and writing the run dir is there too."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from driftdesk.analysis.sources import OUTCOMES, field_problem
from driftdesk.secrets import redact
from driftdesk.text import article

Format = Literal["auto", "jsonl", "tau-bench", "tau2", "appworld", "inspect", "harbor"]
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
class Attempt:
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
    # more fields for its row, a format's own (Harbor: the trial folder, every reward key)
    extra: dict[str, Any] = field(default_factory=dict)


def number_rows(rows: list[tuple[str, int | None]]) -> list[int]:
    """The attempt numbers of (task, attempt or None) rows in file order, by the importer's
    rule (``number_attempts``)."""
    attempts = [Attempt(task, "pass", attempt) for task, attempt in rows]
    number_attempts(attempts)
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
    found: list[tuple[int, Attempt]] = []
    for number, obj in lines:
        if not isinstance(obj, dict):
            continue
        try:
            attempt = generic_attempt(obj, task_field, success_field, threshold)
        except ValueError:
            continue
        if attempt.task_id == task_id:
            found.append((number, attempt))
    number_attempts([a for _, a in found])
    for number, attempt in found:
        yield number, attempt_row(run_id, attempt)


# --- format detection -------------------------------------------------------------------


def detect_format(path: Path, raw: bytes, fmt: Format) -> tuple[str, Any]:
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


def generic_attempt(
    row: dict[str, Any], task_field: str | None, success_field: str | None, threshold: float
) -> Attempt:
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
    return Attempt(
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


def from_tau_bench(document: list[Any], problems: list[str]) -> Iterator[Attempt]:
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
        attempt = Attempt(
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


def from_tau2(
    document: dict[str, Any], problems: list[str], model: str | None
) -> Iterator[Attempt]:
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
            record.get("reward") if index_only else dig(record, "reward_info", "reward")
        )
        if reward is not None and not math.isfinite(reward):
            problems.append(f"record {number} (task {task_id}): reward is {reward}, not finite")
            continue
        trial = record.get("trial")
        attempt = Attempt(
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


def from_appworld(document: dict[str, Any], problems: list[str]) -> Iterator[Attempt]:
    for number, (task_id, record) in enumerate(document["individual"].items(), start=1):
        if not isinstance(record, dict) or not isinstance(record.get("success"), bool):
            problems.append(f"record {number} (task {task_id}): no boolean 'success'")
            continue
        scenario = task_id.rsplit("_", 1)[0] if "_" in task_id else task_id
        yield Attempt(
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


def number_attempts(attempts: list[Attempt]) -> None:
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


def last_of_each_slot(attempts: list[Attempt], problems: list[str]) -> list[Attempt]:
    """One record per (task, trial): the last in file order, as a report keeps the last row of
    a slot; each dropped record is named with the one kept (a rerun's results concatenated
    onto the first's give two rewards for one trial, and silently one of them was lost)."""
    slots: dict[tuple[str, int | None], list[Attempt]] = {}
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


def _verdict(a: Attempt) -> str:
    return a.outcome + (f", reward {a.score:g}" if a.score is not None else "")


def _first(row: dict[str, Any], names: Iterable[str | None]) -> Any:
    for name in names:
        if name and row.get(name) is not None:
            return row[name]
    return None


def dig(obj: Any, *keys: str) -> Any:
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


def attempt_row(run_id: str, a: Attempt) -> dict[str, Any]:
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
        **a.extra,
    }
