"""An attempt's trajectory from wherever it was kept, and the actions two attempts compare by.

Sources, tried in this order for one (task, attempt) of a run dir:

1. the proxy's recording (``<attempt>.calls.jsonl.gz``, ``analysis.recording``);
2. the builtin agent's transcript (``<attempt>.transcript.json``);
3. the trajectory an import kept (``<attempt>.trajectory.json``, written by
   ``write_trajectory`` from tau-bench ``traj``, tau2 and inspect_ai ``messages``, or a
   JSON-lines row's ``messages``/``traj``/``trajectory``);
4. a Harbor import's trial folder (the row's ``harbor_trial``): its ATIF trajectory, read when
   asked (``analysis.harbor_trial_files.trial_steps``, ``analysis.atif``);
5. a zero-copy import's source line (``analysis.zero_copy``), read when asked.

A slot's calls each say their try (``try``, 1-based, in the recording's records and the
calls.jsonl rows; a call from before tries were kept reads as try 1): the trajectory's steps
are its final try's, the earlier tries are kept apart (``Trajectory.earlier_tries``), each with
its own steps and link events. Only the final try's actions are compared.

The run's ``calls.jsonl`` rows of the slot add the link events (a failed call, a cut stream,
another model answering) before the model turn they held up, and each model turn's tokens,
latency and served model (joined by ``call_index``); the outcome is the slot's last row.

The actions of a trajectory (``action_sequence``) are its tool calls in order (name and
canonical JSON arguments), then its final answer (the last model turn's text, whitespace
normalised); with ``text`` every model turn's free text is an action too. Two attempts first
diverge (``first_divergence``) at the first index where their actions differ, or where one
sequence has ended (that side's action is None).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.analysis.recording import RecordedCall, read_recording, recorded_steps
from driftdesk.analysis.sources import iter_bounded_lines, lines_containing
from driftdesk.analysis.steps import (
    MESSAGE_FIELDS,
    Step,
    Trajectory,
    Try,
    numbered,
    steps_from_messages,
    trajectory_from_messages,
    write_trajectory,
)
from driftdesk.rundir import (
    CALLS_FILE,
    RECORDING_SUFFIX,
    TRAJECTORY_SUFFIX,
    TRANSCRIPT_SUFFIX,
    attempt_file,
)

__all__ = [
    "MESSAGE_FIELDS",
    "Action",
    "Divergence",
    "RecordedCall",
    "Step",
    "Trajectory",
    "Try",
    "action_sequence",
    "calls_of_tasks",
    "described_pair",
    "first_divergence",
    "load_trajectory",
    "read_recording",
    "task_calls",
    "trajectory_from_messages",
    "trajectory_from_run",
    "write_trajectory",
]

SHOWN_WIDTH = 60


# --- actions and divergence ---------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    kind: str  # call | answer | say
    name: str  # the tool's name ("" for text)
    value: str  # canonical JSON arguments, or the normalised text
    step: int = field(default=0, compare=False)  # the step it came from

    @property
    def label(self) -> str:
        """What groups compare by: the tool's name, or the kind of text."""
        return f"call {self.name}" if self.kind == "call" else self.kind

    def shown(self, width: int = SHOWN_WIDTH) -> str:
        if self.kind == "call":
            arguments = self.value if len(self.value) <= width else self.value[: width - 1] + "…"
            return f"call {self.name}({arguments})"
        text = self.value if len(self.value) <= width else self.value[: width - 1] + "…"
        return f"{self.kind} {json.dumps(text, ensure_ascii=False)}"

    def to_json(self) -> dict[str, Any]:
        if self.kind == "call":
            return {"kind": "call", "name": self.name, "arguments": self.value}
        return {"kind": self.kind, "text": self.value}


def _normalised(text: str) -> str:
    return " ".join(text.split())


def action_sequence(traj: Trajectory, text: bool = False) -> list[Action]:
    """The tool calls in order, then the final answer; with ``text`` each model turn's free
    text (before its calls) too."""
    turns = traj.model_turns
    last = turns[-1] if turns else None
    actions: list[Action] = []
    for step in turns:
        said = _normalised(step.text)
        if text and step is not last and said:
            actions.append(Action("say", "", said, step.index))
        actions.extend(Action("call", name, args, step.index) for name, args in step.tool_calls)
    answer = _normalised(last.text) if last is not None else ""
    if last is not None and answer:
        actions.append(Action("answer", "", answer, last.index))
    return actions


def described_pair(a: Action | None, b: Action | None) -> tuple[str, str]:
    """Two differing actions as words that show their difference: calls of the same tool
    name the arguments that differ ("call f with id 2"), as their start may be the same
    beyond any width; an ended sequence "had ended"."""
    if a is not None and b is not None and a.kind == b.kind == "call" and a.name == b.name:
        changes = _changed_arguments(a.value, b.value)
        if changes is not None:
            left, right = (", ".join(f"{k} {v}" for k, v in side) for side in changes)
            return f"call {a.name} with {left}", f"call {b.name} with {right}"
    return (
        "had ended" if a is None else a.shown(),
        "had ended" if b is None else b.shown(),
    )


def _changed_arguments(
    a: str, b: str, limit: int = 3, width: int = 40
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]] | None:
    try:
        left, right = json.loads(a), json.loads(b)
    except ValueError:
        return None
    if not isinstance(left, dict) or not isinstance(right, dict):
        return None
    keys = [k for k in sorted(set(left) | set(right)) if left.get(k, ...) != right.get(k, ...)]

    def value(side: dict[str, Any], key: str) -> str:
        if key not in side:
            return "(none)"
        text = json.dumps(side[key], ensure_ascii=False, separators=(",", ":"))
        return text if len(text) <= width else text[: width - 1] + "…"

    more = [("…", f"{len(keys) - limit} more")] if len(keys) > limit else []
    return (
        [(k, value(left, k)) for k in keys[:limit]] + more,
        [(k, value(right, k)) for k in keys[:limit]] + more,
    )


@dataclass
class Divergence:
    step: int  # 0-based index into the action sequences
    a: Action | None  # None: that sequence had ended
    b: Action | None


def first_divergence(
    a: Trajectory | Sequence[Action], b: Trajectory | Sequence[Action], *, text: bool = False
) -> Divergence | None:
    """Where two attempts' actions first differ (None: the same actions throughout)."""
    left = action_sequence(a, text) if isinstance(a, Trajectory) else a
    right = action_sequence(b, text) if isinstance(b, Trajectory) else b
    for index in range(max(len(left), len(right))):
        x = left[index] if index < len(left) else None
        y = right[index] if index < len(right) else None
        if x != y:
            return Divergence(index, x, y)
    return None


# --- the run's calls: link events and per-turn figures ------------------------------------


def task_calls(run_dir: Path | str, task_id: str) -> dict[int, list[dict[str, Any]]]:
    """The calls.jsonl rows of one task, by attempt, in file order: one block search of the
    file for the task id, only the lines that mention it parsed (bad lines skipped)."""
    path = Path(run_dir) / CALLS_FILE
    found: dict[int, list[dict[str, Any]]] = {}
    if not path.exists():
        return found
    needle = json.dumps(task_id, ensure_ascii=False)[1:-1].encode("utf-8")
    with open(path, "rb") as fh:
        for _, raw in lines_containing(fh, needle):
            _add_call(raw, {task_id: found})
    return found


def calls_of_tasks(
    run_dir: Path | str, task_ids: Sequence[str]
) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """``task_calls`` of many tasks in one read of calls.jsonl (a page explains 200 tasks:
    200 block searches of a 29 MB file took 10 s, one read takes under one)."""
    found: dict[str, dict[int, list[dict[str, Any]]]] = {t: {} for t in task_ids}
    path = Path(run_dir) / CALLS_FILE
    if not path.exists():
        return found
    with open(path, "rb") as fh:
        for raw, _, _ in iter_bounded_lines(fh):
            _add_call(raw, found)
    return found


def _add_call(raw: bytes, found: dict[str, dict[int, list[dict[str, Any]]]]) -> None:
    """File the call row on line ``raw`` under its task (one of ``found``'s) and attempt; a
    bad line, another kind of row or another task's is left out."""
    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return
    if not row_is_call(row):
        return
    task, attempt = row.get("task_id"), row.get("attempt")
    if isinstance(task, str) and task in found and isinstance(attempt, int):
        found[task].setdefault(attempt, []).append(row)


def row_is_call(row: Any) -> bool:
    return isinstance(row, dict) and isinstance(row.get("call_index"), int)


def _failed(row: dict[str, Any]) -> bool:
    status = row.get("status")
    return bool(row.get("error_kind")) or not isinstance(status, int) or status >= 400


def _event_kind(row: dict[str, Any]) -> str:
    if row.get("error_kind"):
        return str(row["error_kind"])
    if _failed(row):
        return str(row.get("status") or "no answer")
    if row.get("model_mismatch"):
        return "model_mismatch"
    return "injected_" + str(row.get("injected"))  # an injected fault the call survived (slow)


def _with_link_events(steps: list[Step], calls: list[dict[str, Any]]) -> list[Step]:
    """``steps`` with each model turn's figures from its call row, and a link-event step
    before the model turn of the next successful call after each failed call (at the end
    when none followed); a model mismatch goes before its own turn."""
    by_index = {row["call_index"]: row for row in calls if row_is_call(row)}
    turns = [s for s in steps if s.kind == "model"]
    if turns and all(s.call_index is None for s in turns):  # a transcript: align by order
        answered = sorted(i for i, row in by_index.items() if not _failed(row))
        # A transcript is the last try's: align with the last answered calls.
        for turn, index in zip(reversed(turns), reversed(answered), strict=False):
            turn.call_index = index
    for turn in turns:
        row = by_index.get(turn.call_index) if turn.call_index is not None else None
        if row is not None:
            turn.tokens = _call_tokens(row) if turn.tokens is None else turn.tokens
            turn.latency_ms = _number(row.get("latency_ms"))
            turn.served_model = row.get("served_model") or None
    turn_indexes = sorted(s.call_index for s in turns if s.call_index is not None)
    before: dict[int | None, list[Step]] = {}  # call_index of the turn -> events before it
    for index in sorted(by_index):
        row = by_index[index]
        if not (_failed(row) or row.get("model_mismatch") or row.get("injected")):
            continue
        if _failed(row):
            target = next((i for i in turn_indexes if i > index), None)
        else:
            target = index if index in turn_indexes else None
        before.setdefault(target, []).append(_event_step(row, retried=target is not None))
    if not before:
        return steps
    out: list[Step] = []
    for step in steps:
        if step.kind == "model" and step.call_index in before:
            out.extend(before.pop(step.call_index))
        out.append(step)
    for events in before.values():  # no later answered call, or a turn not in the steps
        out.extend(events)
    return numbered(out)


def _event_step(row: dict[str, Any], *, retried: bool) -> Step:
    kind = _event_kind(row)
    detail: dict[str, Any] = {"kind": kind, "status": row.get("status"), "retried": retried}
    if row.get("model_mismatch"):
        detail["requested_model"] = row.get("requested_model")
    text = f"{kind} (status {row.get('status') if row.get('status') is not None else '-'})"
    if kind == "model_mismatch":
        text = f"answered by {row.get('served_model')}, not {row.get('requested_model')}"
    if row.get("absorbed"):  # --link-faults absorb: held at the proxy, the agent never saw it
        detail["absorbed"] = True
        detail["wait_s"] = _number(row.get("wait_s"))
        text = f"{kind} absorbed, waited {detail['wait_s'] or 0:.1f} s"
    if row.get("injected"):  # run --inject: the fault is driftdesk's, put in at the proxy
        detail["injected"] = str(row["injected"])
        text = f"injected {row['injected']} → {text}"
    return Step(
        "link_event",
        0,
        text,
        tokens=_call_tokens(row),
        latency_ms=_number(row.get("latency_ms")),
        served_model=row.get("served_model") or None,
        call_index=row.get("call_index"),
        detail=detail,
    )


def _call_tokens(row: dict[str, Any]) -> int | None:
    total = row.get("total_tokens")
    if isinstance(total, int):
        return total
    parts = [row.get("prompt_tokens"), row.get("completion_tokens")]
    counted = [p for p in parts if isinstance(p, int)]
    return sum(counted) if counted else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# --- builders -----------------------------------------------------------------------------


def trajectory_from_run(
    run_dir: Path | str,
    task_id: str,
    attempt: int,
    *,
    row: dict[str, Any] | None = None,
    calls: list[dict[str, Any]] | None = None,
) -> Trajectory | None:
    """A live run's attempt from its recording, else from the builtin agent's transcript;
    None when the run kept neither. ``row`` (the slot's last attempts row) and ``calls``
    (its calls.jsonl rows) are read from the run when not given."""
    run_dir = Path(run_dir)
    recording = attempt_file(run_dir, task_id, attempt, RECORDING_SUFFIX)
    transcript = attempt_file(run_dir, task_id, attempt, TRANSCRIPT_SUFFIX)
    problems: list[str] = []
    if calls is None:
        calls = task_calls(run_dir, task_id).get(attempt, [])
    rows_by_try: dict[int, list[dict[str, Any]]] = {}
    for call_row in calls:
        rows_by_try.setdefault(try_of(call_row), []).append(call_row)
    steps_by_try: dict[int, list[Step]] = {}
    if recording.is_file():
        records, problems = read_recording(recording)
        for call in records:
            number = call.try_number or 1
            steps_by_try.setdefault(number, []).extend(
                recorded_steps(call, first=number not in steps_by_try)
            )
        tries_known = all(call.try_number is not None for call in records)
        source = "recording"
    elif transcript.is_file():
        try:
            messages = json.loads(transcript.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{transcript.name}: unreadable ({exc})")
            messages = []
        # A transcript is the final try's own conversation.
        final_of_rows = max(rows_by_try, default=1)
        steps_by_try[final_of_rows] = steps_from_messages(messages)
        tries_known = all(isinstance(c.get("try"), int) for c in calls)
        source = "transcript"
    else:
        return None
    if row is None:
        row = _last_row(run_dir, task_id, attempt)
    final = max([*steps_by_try, *rows_by_try], default=1)
    traj = _from_row(task_id, attempt, row, numbered(steps_by_try.get(final, [])), source)
    traj.steps = _with_link_events(traj.steps, rows_by_try.get(final, []))
    traj.try_number = final
    traj.tries_known = tries_known
    for number in sorted({*steps_by_try, *rows_by_try} - {final}):
        rows = rows_by_try.get(number, [])
        steps = _with_link_events(numbered(steps_by_try.get(number, [])), rows)
        traj.earlier_tries.append(Try(number, steps, _ended_by(rows), len(rows)))
    traj.problems = [
        f"{recording.name if source == 'recording' else transcript.name}: {p}" for p in problems
    ]
    return traj


def try_of(row: dict[str, Any]) -> int:
    """The try of a calls.jsonl row or a record (1-based; a row without one: try 1)."""
    number = row.get("try")
    return number if isinstance(number, int) and not isinstance(number, bool) else 1


def _ended_by(rows: list[dict[str, Any]]) -> str | None:
    """What ended an abandoned try: its last failed call ("429 at call 3")."""
    failed = [r for r in rows if _failed(r)]
    if not failed:
        return None
    last = failed[-1]
    return f"{_event_kind(last)} at call {last.get('call_index')}"


def load_trajectory(
    run_dir: Path | str,
    task_id: str,
    attempt: int,
    *,
    row: dict[str, Any] | None = None,
    calls: list[dict[str, Any]] | None = None,
    source_lines: dict[int, Any] | None = None,
) -> Trajectory | None:
    """The attempt's trajectory from the first source that has it (see the module doc);
    None when none does. ``source_lines`` (a zero-copy run's parsed source lines by line
    number) saves reading the source again for each attempt."""
    run_dir = Path(run_dir)
    traj = trajectory_from_run(run_dir, task_id, attempt, row=row, calls=calls)
    if traj is not None:
        return traj
    if row is None:
        row = _last_row(run_dir, task_id, attempt)
    kept = attempt_file(run_dir, task_id, attempt, TRAJECTORY_SUFFIX)
    if kept.is_file():
        try:
            stored = Trajectory.from_json(json.loads(kept.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, IndexError) as exc:
            empty = _from_row(task_id, attempt, row, [], "import")
            empty.problems.append(f"{kept.name}: unreadable ({exc})")
            return empty
        traj = _from_row(task_id, attempt, row, stored.steps, stored.source)
        traj.tokens = traj.tokens if traj.tokens is not None else stored.tokens
        traj.latency_ms = traj.latency_ms if traj.latency_ms is not None else stored.latency_ms
        return traj
    if row is not None and isinstance(row.get("harbor_trial"), str):
        # a Harbor import: the trial's ATIF trajectory, read in place (analysis.harbor_trial_files)
        from driftdesk.analysis.harbor_trial_files import trial_steps

        problems: list[str] = []
        steps = trial_steps(Path(row["harbor_trial"]), problems)
        if steps is None and not problems:
            return None
        traj = _from_row(task_id, attempt, row, steps or [], "harbor")
        traj.problems.extend(problems)
        return traj
    if row is not None and isinstance(row.get("line"), int):
        lines = source_lines if source_lines is not None else zero_copy_lines(run_dir, task_id)
        obj = lines.get(row["line"])
        messages = next(
            (
                obj[f]
                for f in MESSAGE_FIELDS
                if isinstance(obj, dict) and isinstance(obj.get(f), list)
            ),
            None,
        )
        if messages:
            return _from_row(task_id, attempt, row, steps_from_messages(messages), "jsonl")
    return None


def zero_copy_lines(run_dir: Path | str, task_id: str) -> dict[int, Any]:
    """A zero-copy run's source lines that mention ``task_id``, parsed, by line number
    (empty for a run that holds its own rows). The source is checked first, as every
    reader of the run does (a changed source is refused)."""
    from driftdesk.analysis import zero_copy
    from driftdesk.analysis.sources import manifest_or_empty

    linked = zero_copy.linked_source(manifest_or_empty(Path(run_dir)))
    if linked is None:
        return {}
    zero_copy.check(linked, str(run_dir))
    found: dict[int, Any] = {}
    needle = json.dumps(task_id, ensure_ascii=False)[1:-1].encode("utf-8")
    with open(linked.path, "rb") as fh:
        for number, raw in lines_containing(fh, needle):
            try:
                found[number] = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
    return found


def _last_row(run_dir: Path, task_id: str, attempt: int) -> dict[str, Any] | None:
    from driftdesk.analysis.attempts import task_attempts

    rows = [r for r in task_attempts(run_dir, task_id) if r["attempt"] == attempt]
    return rows[-1] if rows else None


def _from_row(
    task_id: str, attempt: int, row: dict[str, Any] | None, steps: list[Step], source: str
) -> Trajectory:
    row = row or {}
    tokens = row.get("total_tokens")
    if not isinstance(tokens, int):
        counted = [row.get(k) for k in ("prompt_tokens", "completion_tokens")]
        tokens = (
            sum(c for c in counted if isinstance(c, int))
            if any(isinstance(c, int) for c in counted)
            else None
        )
    return Trajectory(
        task_id,
        attempt,
        row.get("outcome"),
        steps,
        source,
        tokens=tokens,
        latency_ms=_number(row.get("latency_ms")),
    )
