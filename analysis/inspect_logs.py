"""inspect_ai's logs as driftdesk attempts: one attempt per sample × epoch.

Read with inspect_ai's own reader (``.eval`` is a zip of zstd members that the standard
library cannot open), which needs the optional extra ``driftdesk[inspect]``. Used by
``driftdesk import --format inspect`` and by the inspect harness (``run --agent inspect``).

Mapping of one sample:

- ``task_id`` = the sample id (``<task>/<id>`` when the logs hold several tasks), ``attempt`` =
  epoch - 1, ``scenario_id`` = the task name.
- Outcome from the first scorer's value: ``C`` → pass; ``I``, ``P``, ``N`` → fail; a number (or
  bool) passes when it is ≥ ``PASS_THRESHOLD`` (0.5). ``score`` is that value as a float.
- A sample error → ``link_error`` when it names the provider or the link (an HTTP status,
  which becomes the ``error_code``; a rate limit; a timeout; a dropped or cut connection),
  else ``harness_error`` (``harness_crash``). An unscored sample without error is a
  ``harness_error`` (``no_result``).
- ``limit`` = the limit that stopped the sample (``time``, ``token``, ``message``…) or null; the
  sample is still judged by its score.
- Tokens from the sample's ``model_usage`` (summed over models); ``retries`` = the retries its
  model events report plus its retried errors (``error_retries``); ``latency_ms`` = its
  ``total_time``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample

INSPECT_EXTRA = "pip install 'driftdesk[inspect]'"
PASS_THRESHOLD = 0.5
_LETTER_GRADES = {"C": True, "I": False, "P": False, "N": False}
_HTTP_STATUS = re.compile(
    r"(?:error code|status(?: code)?|http(?: status)?)\W{0,3}([1-5]\d\d)\b", re.IGNORECASE
)
# Exception names and phrases of the openai / anthropic / httpx clients that mean the link.
_LINK_PHRASES = (
    ("insufficient_quota", "insufficient_quota"),
    ("ratelimiterror", "429"),
    ("rate limit", "429"),
    ("timeout", "timeout"),
    ("timed out", "timeout"),
    ("incomplete chunked read", "truncated"),
    ("peer closed connection", "truncated"),
    ("remoteprotocolerror", "truncated"),
    ("apiconnectionerror", "connection"),
    ("connection error", "connection"),
    ("connecterror", "connection"),
    ("connection refused", "connection"),
)


class InspectMissing(RuntimeError):
    """inspect-ai is not installed (it is the optional extra ``driftdesk[inspect]``)."""


def require_inspect() -> None:
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        raise InspectMissing(
            f"reading inspect_ai logs needs inspect-ai: {INSPECT_EXTRA} (or pip install inspect-ai)"
        ) from None


def looks_like_inspect_log(path: Path) -> bool:
    """An inspect log file (``.eval`` zip, or ``.json`` whose head names an eval), or a
    folder holding some."""
    if path.is_dir():
        return any(looks_like_inspect_log(p) for p in _candidates(path))
    suffix = path.suffix.lower()
    try:
        with open(path, "rb") as fh:
            head = fh.read(2048)
    except OSError:
        return False
    if suffix == ".eval":
        return head.startswith(b"PK\x03\x04")
    return (
        suffix == ".json"
        and head.lstrip().startswith(b"{")
        and b'"version"' in head
        and b'"eval"' in head
    )


def _candidates(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".eval", ".json"))


def classify_error(message: str) -> tuple[str, str]:
    """``(outcome, error_code)`` of a sample's error text."""
    lowered = message.lower()
    for phrase, code in _LINK_PHRASES[:2]:
        if phrase in lowered:
            return "link_error", code
    status = _HTTP_STATUS.search(message)
    if status:
        return "link_error", status.group(1)
    for phrase, code in _LINK_PHRASES[2:]:
        if phrase in lowered:
            return "link_error", code
    return "harness_error", "harness_crash"


def judge_value(value: Any) -> tuple[bool, float] | None:
    """``(passed, score)`` of a scorer's value, or None when it cannot be judged."""
    if isinstance(value, str):
        grade = value.strip().upper()
        if grade in _LETTER_GRADES:
            passed = _LETTER_GRADES[grade]
            return passed, 1.0 if passed else (0.5 if grade == "P" else 0.0)
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool):
        return value, float(value)
    if isinstance(value, int | float):
        return float(value) >= PASS_THRESHOLD, float(value)
    return None


@dataclass
class SampleAttempt:
    """One sample × epoch, in attempts.jsonl terms."""

    task_id: str
    attempt: int
    scenario_id: str | None
    outcome: str
    success: bool | None = None
    score: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    limit: str | None = None
    retries: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    latency_ms: float | None = None
    started_at: str | None = None
    ended_at: str | None = None
    model: str | None = None
    request_ids: set[str] = field(default_factory=set)  # provider ids of its model calls
    messages: list[dict[str, Any]] | None = None  # the sample's conversation, as plain dicts


def sample_task_id(sample_id: int | str, task: str | None, several_tasks: bool) -> str:
    return f"{task}/{sample_id}" if several_tasks and task else str(sample_id)


def sample_attempt(
    sample: EvalSample, *, task: str | None, model: str | None, several_tasks: bool = False
) -> SampleAttempt:
    """The attempt one finished sample of an inspect log stands for."""
    attempt = SampleAttempt(
        task_id=sample_task_id(sample.id, task, several_tasks),
        attempt=max(int(sample.epoch) - 1, 0),
        scenario_id=task,
        outcome="harness_error",
        model=model,
        started_at=sample.started_at,
        ended_at=sample.completed_at,
        latency_ms=round(sample.total_time * 1000, 3) if sample.total_time is not None else None,
        limit=str(sample.limit.type) if sample.limit is not None else None,
        messages=[m.model_dump(mode="json", exclude_none=True) for m in sample.messages],
    )
    usage = list(sample.model_usage.values())
    if usage:
        attempt.prompt_tokens = sum(u.input_tokens for u in usage)
        attempt.completion_tokens = sum(u.output_tokens for u in usage)
        attempt.total_tokens = sum(u.total_tokens for u in usage)
    attempt.retries = len(sample.error_retries or [])
    for event in sample.events:
        if getattr(event, "event", None) != "model":
            continue
        attempt.retries += int(getattr(event, "retries", None) or 0)
        for request_id in getattr(event, "request_ids", None) or []:
            attempt.request_ids.add(request_id.id)
    if sample.error is not None:
        attempt.outcome, attempt.error_code = classify_error(sample.error.message)
        attempt.error_message = sample.error.message[:2000]
        return attempt
    for score in (sample.scores or {}).values():
        judged = judge_value(score.value)
        if judged is not None:
            passed, attempt.score = judged
            attempt.outcome = "pass" if passed else "fail"
            attempt.success = passed
            return attempt
    attempt.error_code = "no_result"
    attempt.error_message = "the sample has no score driftdesk can judge"
    return attempt


@dataclass
class InspectLogs:
    attempts: list[SampleAttempt]
    problems: list[str]
    model: str | None
    files: list[Path]


def read_inspect_logs(path: Path) -> InspectLogs:
    """Every sample × epoch of the logs at ``path`` (a file or a folder). An ``eval-retry``
    log redoes samples of an earlier one: per (task, sample, epoch) the latest log wins."""
    require_inspect()
    from inspect_ai.log import read_eval_log, read_eval_log_samples

    files = _candidates(path) if path.is_dir() else [path]
    problems: list[str] = []
    headers = []
    for file in files:
        try:
            header = read_eval_log(str(file), header_only=True)
        except Exception as exc:  # a foreign .json in the folder, a torn file...
            if path.is_dir() and file.suffix.lower() == ".json":
                continue  # not every JSON beside the logs is one
            problems.append(f"{file}: not a readable inspect log ({type(exc).__name__}: {exc})")
            continue
        if header.status != "success":
            problems.append(
                f"{file}: the eval ended with status {header.status!r}; "
                "its finished samples are imported"
            )
        headers.append((header.eval.created, str(file), header))
    headers.sort(key=lambda item: (item[0], item[1]))  # oldest first: later logs win
    several = len({h.eval.task for _, _, h in headers}) > 1
    chosen: dict[tuple[str, str, int], SampleAttempt] = {}
    models = {h.eval.model for _, _, h in headers}
    for _, location, header in headers:
        try:
            for sample in read_eval_log_samples(location, all_samples_required=False):
                attempt = sample_attempt(
                    sample, task=header.eval.task, model=header.eval.model, several_tasks=several
                )
                chosen[(header.eval.task, str(sample.id), sample.epoch)] = attempt
        except Exception as exc:
            problems.append(f"{location}: samples unreadable ({type(exc).__name__}: {exc})")
    return InspectLogs(
        list(chosen.values()), problems, models.pop() if len(models) == 1 else None, files
    )
