"""inspect_ai's logs as driftdesk attempts: one attempt per sample × epoch.

Read with inspect_ai's own reader (``.eval`` is a zip of zstd members that the standard
library cannot open), which needs the optional extra ``driftdesk[inspect]``. Used by
``driftdesk import --format inspect`` and by the inspect harness (``run --agent inspect``).

Mapping of one sample:

- ``task_id`` = the sample id (``<task>/<id>`` when the logs hold several tasks), ``attempt`` =
  epoch - 1, ``scenario_id`` = the task name.
- ``score`` = the first scorer's value as inspect reads it (``C`` 1, ``P`` 0.5, ``I``/``N`` 0,
  numbers as they are); the outcome passes when the score is ≥ the threshold the user chose
  (``--score-threshold``; ``PASS_THRESHOLD``, 0.5, when none was given).
- A sample error → ``link_error`` when it names the provider or the link (an HTTP status,
  which becomes the ``error_code``; a rate limit; a timeout; a dropped or cut connection),
  else ``harness_error`` (``harness_crash``). An unscored sample without error is a
  ``harness_error`` (``no_result``).
- ``limit`` = the limit that stopped the sample (``time``, ``token``, ``message``…) or null; the
  sample is still judged by its score.
- Tokens from the sample's ``model_usage`` (summed over models); ``retries`` = the retries its
  model events report plus its retried errors (``error_retries``); ``latency_ms`` = its
  ``total_time``.

Refused as a whole (nothing imported, one line naming what): a log yielding two samples of one
(id, epoch) — a row per slot would silently keep one of them — and a ``.eval`` member that
decompresses past ``max_member_mb`` (a zip bomb: each member is decompressed as a stream and
counted before inspect_ai reads any of it; the sizes its headers state are not trusted).
"""

from __future__ import annotations

import copy
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

INSPECT_EXTRA = "pip install 'driftdesk[inspect]'"
PASS_THRESHOLD = 0.5
# A member of a .eval (a sample, the header) that decompresses past this is refused: inspect
# reads a member whole, so this bounds the import's memory (``--max-member-mb``).
DEFAULT_MAX_MEMBER_MB = 512
_ZIP_ZSTANDARD = 93  # the zip method number of zstd, as inspect writes its members
_CHUNK = 1 << 16  # decompressed a chunk at a time
SHOWN_DUPLICATES = 3
_GRADE_SCORES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_WORD_SCORES = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
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


def judge_value(value: Any, threshold: float = PASS_THRESHOLD) -> tuple[bool, float] | None:
    """``(passed, score)`` of a scorer's value, or None when it cannot be judged. The score is
    inspect's own reading of the value (its ``value_to_float``: ``C`` 1, ``P`` 0.5, ``I`` and
    ``N`` 0, yes/true 1, no/false 0, numbers as they are); it passes at ≥ ``threshold``."""
    if isinstance(value, str):
        text = value.strip()
        if text.upper() in _GRADE_SCORES:
            score = _GRADE_SCORES[text.upper()]
        elif text.lower() in _WORD_SCORES:
            score = _WORD_SCORES[text.lower()]
        else:
            try:
                score = float(text)
            except ValueError:
                return None
    elif isinstance(value, bool | int | float):
        score = float(value)
    else:
        return None
    if score != score:  # NaN: no judgement
        return None
    return score >= threshold, score


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
    sample: EvalSample,
    *,
    task: str | None,
    model: str | None,
    several_tasks: bool = False,
    threshold: float = PASS_THRESHOLD,
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
        judged = judge_value(score.value, threshold)
        if judged is not None:
            passed, attempt.score = judged
            attempt.outcome = "pass" if passed else "fail"
            attempt.success = passed
            return attempt
    attempt.error_code = "no_result"
    attempt.error_message = "the sample has no score driftdesk can judge"
    return attempt


class InspectMixedModels(ValueError):
    """The logs hold more than one model: a run is one model's attempts."""


class InspectLogRefused(ValueError):
    """A log that is not imported as it is (one line naming why): two samples of one (id,
    epoch), or a member that decompresses past the bound."""


def _raw_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    """The member's compressed bytes as they are stored (decompressed by the caller, a chunk
    at a time; the stdlib's zstd patch would hand out whatever one read expands to)."""
    stored = copy.copy(info)
    stored.compress_type = zipfile.ZIP_STORED
    stored.file_size = info.compress_size
    stored.CRC = None  # type: ignore[assignment]  # the CRC is of the decompressed bytes
    return archive.open(stored)


def _decompressed_chunks(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's content, at most ``_CHUNK`` bytes at a time, whatever its compression
    ratio (a run of zeros expands ~30,000 times in zstd: one unbounded read is a bomb)."""
    if info.compress_type == zipfile.ZIP_STORED:
        with archive.open(info) as stream:  # its size is its size on disk
            while chunk := stream.read(_CHUNK):
                yield chunk
    elif info.compress_type == _ZIP_ZSTANDARD:
        import zstandard

        with (
            _raw_member(archive, info) as raw,
            zstandard.ZstdDecompressor().stream_reader(
                raw, read_size=_CHUNK, read_across_frames=True
            ) as reader,
        ):
            while chunk := reader.read(_CHUNK):
                yield chunk
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        with _raw_member(archive, info) as raw:
            while not inflater.eof:
                data = inflater.unconsumed_tail or raw.read(_CHUNK)
                if not data:
                    break
                if chunk := inflater.decompress(data, _CHUNK):
                    yield chunk
    else:
        raise InspectLogRefused(
            f"member {info.filename} is compressed with zip method {info.compress_type}, which "
            "inspect never writes (zstd or deflate): not read"
        )


def check_member_sizes(location: str, max_member_mb: int) -> None:
    """Refuse the ``.eval`` at ``location`` when a member decompresses past ``max_member_mb``
    MiB (counted as a stream, a chunk in memory at a time). A member that cannot be
    decompressed, or a file that is no zip, is left for inspect_ai's reader to report."""
    limit = max_member_mb << 20
    try:
        archive = zipfile.ZipFile(location)
    except (OSError, zipfile.BadZipFile):
        return
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            size = info.file_size  # what the headers say: refused at once when over
            if size <= limit:
                size = 0
                try:
                    for chunk in _decompressed_chunks(archive, info):
                        size += len(chunk)
                        if size > limit:
                            break
                except InspectLogRefused as exc:
                    raise InspectLogRefused(f"{location}: {exc}") from None
                except Exception:  # a broken member: inspect's reader says what is wrong
                    continue
            if size > limit:
                raise InspectLogRefused(
                    f"{location}: member {info.filename} decompresses to more than "
                    f"{max_member_mb} MiB (the bound of --max-member-mb): not imported "
                    "(a zip bomb, or raise the bound)"
                )


@dataclass
class InspectLogs:
    attempts: list[SampleAttempt]
    problems: list[str]  # files or samples that could not be read
    model: str | None
    files: list[Path]
    notes: list[str] = field(default_factory=list)  # what the import did about an eval's status
    # the metrics inspect states in the latest log of each task (its own mean, accuracy...),
    # "<scorer>/<metric>" ("<task>/<scorer>/<metric>" when the logs hold several tasks)
    published: dict[str, float] = field(default_factory=dict)


def _samples_of(location: str) -> Iterator[EvalSample]:
    """Every sample of one log, whatever its header says. A ``.json`` log is one document,
    read in full: older versions wrote no ``sample_ids`` in its header, which the streaming
    reader needs. An ``.eval`` is read sample by sample from its own list of samples (not
    epochs 1…``config.epochs``: an older header may name no epochs), in full if that fails."""
    from inspect_ai.log import read_eval_log, read_eval_log_sample, read_eval_log_sample_summaries

    if not location.lower().endswith(".json"):
        try:
            slots = [(s.id, s.epoch) for s in read_eval_log_sample_summaries(location)]
        except Exception:  # the full read below says what is wrong, if anything
            pass
        else:
            for sample_id, epoch in slots:  # one at a time: a log may hold thousands
                yield read_eval_log_sample(location, id=sample_id, epoch=epoch)
            return
    yield from read_eval_log(location).samples or []


def _planned_slots(header: EvalLog) -> list[tuple[str, int]]:
    """The (sample id, epoch) pairs the eval set out to run, when its header names them."""
    ids = header.eval.dataset.sample_ids or []
    epochs = header.eval.config.epochs or 1
    return [(str(i), epoch) for i in ids for epoch in range(1, epochs + 1)]


def _duplicates_refused(location: str, twice: list[tuple[str, int]]) -> InspectLogRefused:
    shown = ", ".join(
        f"sample {sample_id!r} epoch {epoch}" for sample_id, epoch in twice[:SHOWN_DUPLICATES]
    )
    more = len(twice) - SHOWN_DUPLICATES
    return InspectLogRefused(
        f"{location}: two samples of one id and epoch ({shown} twice"
        + (f"; {more} more" if more > 0 else "")
        + "): a log holds one sample per id and epoch, so which one counts is unknown; "
        "nothing was imported"
    )


def read_inspect_logs(
    path: Path, *, threshold: float = PASS_THRESHOLD, max_member_mb: int = DEFAULT_MAX_MEMBER_MB
) -> InspectLogs:
    """Every sample × epoch of the logs at ``path`` (a file or a folder). An ``eval-retry``
    log redoes samples of an earlier one: per (task, sample, epoch) the latest log wins. An
    eval that ended before all its samples finished (status ``error``, ``cancelled``) gives
    its unfinished samples ``eval_error`` rows, as ``run --agent inspect`` does, unless a
    later log finished them. Logs of more than one model are refused (a run is one model),
    as is a log with two samples of one (id, epoch) or a member past ``max_member_mb`` MiB
    decompressed (``InspectLogRefused``)."""
    require_inspect()
    from inspect_ai.log import read_eval_log

    if max_member_mb < 1:
        raise InspectLogRefused(f"--max-member-mb is at least 1 (MiB), not {max_member_mb}")
    files = _candidates(path) if path.is_dir() else [path]
    problems: list[str] = []
    notes: list[str] = []
    headers = []
    for file in files:
        if file.suffix.lower() != ".json":
            check_member_sizes(str(file), max_member_mb)  # before inspect reads any of it
        try:
            header = read_eval_log(str(file), header_only=True)
        except Exception as exc:  # a foreign .json in the folder, a torn file...
            if path.is_dir() and file.suffix.lower() == ".json":
                continue  # not every JSON beside the logs is one
            problems.append(f"{file}: not a readable inspect log ({type(exc).__name__}: {exc})")
            continue
        headers.append((header.eval.created, str(file), header))
    models = sorted({h.eval.model for _, _, h in headers})
    if len(models) > 1:
        raise InspectMixedModels(
            f"{path}: the logs hold {len(models)} models ({', '.join(models)}); a run is one "
            "model's attempts: import each model's logs on its own (one folder each)"
        )
    headers.sort(key=lambda item: (item[0], item[1]))  # oldest first: later logs win
    several = len({h.eval.task for _, _, h in headers}) > 1
    chosen: dict[tuple[str, str, int], SampleAttempt] = {}
    unfinished: dict[tuple[str, str, int], tuple[EvalLog, str]] = {}
    for _, location, header in headers:
        task, model = header.eval.task, header.eval.model
        seen: set[tuple[str, int]] = set()  # this log's slots (a later log may redo them)
        twice: list[tuple[str, int]] = []
        try:
            for sample in _samples_of(location):
                slot = (str(sample.id), sample.epoch)
                if slot in seen:
                    twice.append(slot)
                    continue
                seen.add(slot)
                attempt = sample_attempt(
                    sample, task=task, model=model, several_tasks=several, threshold=threshold
                )
                chosen[(task, slot[0], slot[1])] = attempt
        except Exception as exc:
            problems.append(f"{location}: samples unreadable ({type(exc).__name__}: {exc})")
        if twice:
            raise _duplicates_refused(location, twice)
        if header.status != "success":
            for sample_id, epoch in _planned_slots(header):
                unfinished[(task, sample_id, epoch)] = (header, location)
    errored: dict[str, int] = {}
    for key, (header, location) in unfinished.items():
        if key in chosen:
            continue
        task, sample_id, epoch = key
        reason = header.error.message if header.error is not None else "no error recorded"
        chosen[key] = SampleAttempt(
            task_id=sample_task_id(sample_id, task, several),
            attempt=epoch - 1,
            scenario_id=task,
            outcome="harness_error",
            error_code="eval_error",
            error_message=f"inspect's eval ended ({header.status}) before this sample "
            f"finished: {reason}"[:2000],
            model=header.eval.model,
        )
        errored[location] = errored.get(location, 0) + 1
    for _, location, header in headers:
        if header.status != "success":
            rest = errored.get(location, 0)
            notes.append(
                f"{location}: the eval ended with status {header.status!r}; its finished "
                "samples are imported"
                + (f", its {rest} unfinished as eval_error rows" if rest else "")
            )
    published: dict[str, float] = {}
    for _, _, header in headers:  # oldest first: a later log of the task replaces its figures
        if header.results is None:
            continue
        prefix = f"{header.eval.task}/" if several else ""
        for stale in [k for k in published if k.startswith(prefix)]:
            del published[stale]
        for scored in header.results.scores:
            for metric in scored.metrics.values():
                if isinstance(metric.value, int | float):
                    published[f"{prefix}{scored.name}/{metric.name}"] = float(metric.value)
    run_model = models[0] if models else None
    return InspectLogs(list(chosen.values()), problems, run_model, files, notes, published)
