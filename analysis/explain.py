"""Why a task wobbles: its passing and failing attempts side by side, step by step.

``explain_task`` reads every attempt of one task (or the ones asked for), builds each one's
trajectory (``analysis.trajectory``) and its actions, and says:

- which attempts passed and which failed (link and harness errors are listed apart: they
  are not the model's behaviour, so they are in neither group);
- for each pass/fail pair, where their actions first diverge;
- the steps where the groups differ most: at each step, the most common action of each
  group and how many of it did so ("step 1: passes call get_user_details 2/2; fails answer
  3/3");
- the link events of each group and the step they hit ("fails: 429 retried before step 1
  in 1/3");
- turns, tokens and latency per group (mean and median).

Only each attempt's final try is compared (its actions, steps, link events): an attempt whose
try ended on a retryable link error was run again from scratch, and the abandoned try's
actions are no part of what it did. Earlier tries are listed apart (``earlier_tries``), and
their link events are summed as "ended a try" / "in a discarded try". An attempt recorded
before calls said their try reads as one try and is named (``tries_unknown``).

Steps in sentences count the actions from 1; in JSON ``step`` is the 0-based index.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.analysis.sources import MANIFEST_FILE, SourceError
from driftdesk.analysis.trajectory import (
    Action,
    Divergence,
    Step,
    Trajectory,
    Try,
    action_sequence,
    described_pair,
    first_divergence,
    load_trajectory,
    task_calls,
    zero_copy_lines,
)
from driftdesk.rundir import ATTEMPTS_FILE
from driftdesk.text import plural

GROUPS = ("pass", "fail")
GROUP_NAMES = {"pass": "passes", "fail": "fails"}
ENDED = "(ended)"  # the label of a step a sequence did not reach
MAX_DIFFERENCES = 3  # sentences about the steps where the groups differ most


class UnknownTaskError(SourceError):
    """The run has no row for the task, or not for an attempt asked for (exit 2)."""


class NoTrajectoryError(LookupError):
    """The task's attempts exist, but none has a recording or a trajectory (exit 1)."""


@dataclass
class LinkEvent:
    kind: str  # "429", "timeout", "truncated", "model_mismatch"...
    before: int  # the 0-based index of the action it came before (= actions so far)
    retried: bool  # an answered call followed it
    status: int | None = None
    # Of an abandoned try: "ended" (its last failure, after which the try was run again) or
    # "during" (another failure of that try); None: of the final try.
    earlier: str | None = None
    absorbed: bool = False  # held at the proxy and sent again (--link-faults absorb)

    @property
    def phrase(self) -> str:
        if self.absorbed:
            return f"{self.kind} absorbed at the proxy before step {self.before + 1}"
        if self.earlier == "ended":
            return f"{self.kind} ended a try (run again from scratch)"
        if self.earlier is not None:
            return f"{self.kind} in a discarded try"
        verb = "retried" if self.retried else "not retried"
        if self.kind == "model_mismatch":
            verb = "(another model answered)"
        return f"{self.kind} {verb} before step {self.before + 1}"


@dataclass
class AttemptView:
    attempt: int
    outcome: str | None
    source: str | None  # None: no recording or trajectory
    actions: list[Action] = field(default_factory=list)
    events: list[LinkEvent] = field(default_factory=list)
    turns: int = 0
    tokens: int | None = None
    latency_ms: float | None = None
    problems: list[str] = field(default_factory=list)
    # The final try's steps (what ``actions`` are taken from), its number, the abandoned
    # tries before it, and whether the calls said their try (False: read as one try).
    steps: list[Step] = field(default_factory=list)
    try_number: int | None = None
    earlier_tries: list[Try] = field(default_factory=list)
    tries_known: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "outcome": self.outcome,
            "source": self.source,
            "try": self.try_number,
            "tries_recorded": self.tries_known,
            "actions": [a.to_json() for a in self.actions],
            "steps": [s.summary_json() for s in self.steps],
            "earlier_tries": [t.to_json() for t in self.earlier_tries],
            "link_events": [
                {
                    "kind": e.kind,
                    "before_step": e.before,
                    "retried": e.retried,
                    "status": e.status,
                    **({"earlier_try": e.earlier} if e.earlier else {}),
                    **({"absorbed": True} if e.absorbed else {}),
                }
                for e in self.events
            ],
            "turns": self.turns,
            "tokens": self.tokens,
            "latency_ms": self.latency_ms,
            "problems": self.problems,
        }


@dataclass
class StepDifference:
    step: int  # 0-based
    top: dict[str, tuple[Action | str, int, int]]  # group -> (action or label, count, size)
    score: float

    @property
    def phrases(self) -> dict[str, str]:
        """Each group's most common action in words; two calls of the same tool by the
        arguments they differ in."""
        (a, _, _), (b, _, _) = self.top["pass"], self.top["fail"]
        if isinstance(a, Action) or isinstance(b, Action):
            left = a if isinstance(a, Action) else None
            right = b if isinstance(b, Action) else None
            shown = described_pair(left, right)
            return {
                "pass": shown[0] if left else _label_phrase(str(a)),
                "fail": shown[1] if right else _label_phrase(str(b)),
            }
        return {"pass": _label_phrase(a), "fail": _label_phrase(b)}

    @property
    def sentence(self) -> str:
        phrases = self.phrases
        parts = [
            f"{GROUP_NAMES[g]} {phrases[g]} {count}/{size}"
            for g, (_, count, size) in self.top.items()
        ]
        return f"step {self.step + 1}: " + "; ".join(parts)


@dataclass
class EventSummary:
    group: str
    phrase: str
    attempts: int
    of: int

    @property
    def sentence(self) -> str:
        group = GROUP_NAMES.get(self.group, f"{self.group} attempts")
        return f"{group}: {self.phrase} in {self.attempts}/{self.of}"


@dataclass
class TaskExplanation:
    run_dir: Path
    task_id: str
    text: bool
    views: list[AttemptView]
    groups: dict[str, list[int]]  # pass / fail -> attempts with a trajectory
    apart: list[AttemptView]  # link and harness errors
    without_trajectory: list[int]
    pairs: list[tuple[int, int, Divergence | None]]  # (pass, fail, where they diverge)
    differences: list[StepDifference]
    events: list[EventSummary]
    figures: dict[str, dict[str, dict[str, float | None]]]
    two: tuple[AttemptView, AttemptView] | None = None  # --attempts A B
    two_divergence: Divergence | None = None

    @property
    def tries_unknown(self) -> list[int]:
        """Attempts recorded before calls said their try: each read as one try."""
        return [v.attempt for v in self.views if v.source is not None and not v.tries_known]

    @property
    def tries_note(self) -> str | None:
        unknown = self.tries_unknown
        if not unknown:
            return None
        return (
            f"{plural(len(unknown), 'attempt')} ({_ranges(unknown)}) recorded before calls said "
            "their try: each reads as one try (a retried try's calls are mixed in)"
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run_dir": str(self.run_dir),
            "task_id": self.task_id,
            "text": self.text,
            "attempts": [v.to_json() for v in self.views],
            "groups": self.groups,
            "apart": [{"attempt": v.attempt, "outcome": v.outcome} for v in self.apart],
            "without_trajectory": self.without_trajectory,
            "tries_unknown": self.tries_unknown,
            "pair_divergences": [
                {
                    "pass": p,
                    "fail": f,
                    "step": d.step if d else None,
                    "pass_action": _action_json(d.a) if d else None,
                    "fail_action": _action_json(d.b) if d else None,
                }
                for p, f, d in self.pairs
            ],
            "differences": [
                {
                    "step": d.step,
                    **{
                        g: {
                            "action": top.to_json() if isinstance(top, Action) else top,
                            "shown": d.phrases[g],
                            "count": count,
                            "of": size,
                        }
                        for g, (top, count, size) in d.top.items()
                    },
                    "sentence": d.sentence,
                }
                for d in self.differences
            ],
            "link_events": [
                {
                    "group": e.group,
                    "event": e.phrase,
                    "attempts": e.attempts,
                    "of": e.of,
                    "sentence": e.sentence,
                }
                for e in self.events
            ],
            "figures": self.figures,
            "sentences": self.sentences(),
        }
        if self.two is not None:
            a, b = self.two
            d = self.two_divergence
            data["first_divergence"] = (
                None
                if d is None
                else {
                    "step": d.step,
                    "a": {"attempt": a.attempt, "action": _action_json(d.a)},
                    "b": {"attempt": b.attempt, "action": _action_json(d.b)},
                }
            )
        return data

    def sentences(self) -> list[str]:
        """The findings, one sentence each: divergences, differing steps, link events."""
        out: list[str] = []
        if self.two is not None:
            out.append(self.two_sentence())
        out.extend(self.pair_sentences())
        out.extend(d.sentence for d in self.differences)
        out.extend(e.sentence for e in self.events)
        return out

    def pair_sentences(self) -> list[str]:
        """Where pass/fail pairs first diverge, most often; how many took the same actions."""
        found = [d for _, _, d in self.pairs]
        out = []
        steps = Counter(d.step for d in found if d is not None)
        if steps:
            step, count = steps.most_common(1)[0]
            out.append(
                f"pass/fail pairs first diverge at step {step + 1} in {count}/{len(found)} pairs"
            )
        same = sum(1 for d in found if d is None)
        if same:
            out.append(f"{plural(same, 'pass/fail pair')} took the same actions")
        return out

    def two_sentence(self) -> str:
        assert self.two is not None
        a, b = self.two
        d = self.two_divergence
        if d is None:
            return f"attempts {a.attempt} and {b.attempt} took the same actions"
        left, right = described_pair(d.a, d.b)
        return (
            f"attempts {a.attempt} and {b.attempt} first diverge at step {d.step + 1}: "
            f"{a.attempt} {left}; {b.attempt} {right}"
        )


def _action_json(action: Action | None) -> dict[str, Any] | None:
    return None if action is None else action.to_json()


def _label_phrase(label: str) -> str:
    return "had ended" if label == ENDED else label


def explain_task(
    run_dir: Path | str,
    task_id: str,
    attempts: Sequence[int] | None = None,
    text: bool = False,
    calls: dict[int, list[dict[str, Any]]] | None = None,
) -> TaskExplanation:
    """The explanation of one task of a run (see the module doc). Raises ``SourceError`` for
    a path that is not a run dir, ``UnknownTaskError`` for a task or attempt the run has no
    row for, and ``NoTrajectoryError`` when no attempt kept a recording or a trajectory.
    ``calls``: the task's calls (``trajectory.calls_of_tasks``), when read with others'."""
    from driftdesk.analysis.attempts import task_attempts

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SourceError(f"{run_dir}: no such run dir")
    if not (run_dir / ATTEMPTS_FILE).exists() and not (run_dir / MANIFEST_FILE).exists():
        raise SourceError(f"{run_dir}: not a run dir (no {ATTEMPTS_FILE} or {MANIFEST_FILE})")
    rows = {r["attempt"]: r for r in task_attempts(run_dir, task_id) if not r["superseded"]}
    if not rows:
        raise UnknownTaskError(f"{run_dir}: no attempt of task {task_id!r} in this run")
    wanted = sorted(rows) if attempts is None else list(dict.fromkeys(attempts))
    missing = [a for a in wanted if a not in rows]
    if missing:
        raise UnknownTaskError(
            f"task {task_id!r} has no attempt {', '.join(map(str, missing))} "
            f"(its attempts: {_ranges(sorted(rows))})"
        )
    calls = task_calls(run_dir, task_id) if calls is None else calls
    lines = zero_copy_lines(run_dir, task_id)  # empty unless the rows live in a source file
    views = []
    for attempt in wanted:
        traj = load_trajectory(
            run_dir,
            task_id,
            attempt,
            row=rows[attempt],
            calls=calls.get(attempt, []),
            source_lines=lines,
        )
        views.append(_view(attempt, rows[attempt], traj, text))
    if all(v.source is None for v in views):
        raise NoTrajectoryError(
            f"task {task_id!r}: no attempt has a recording or a trajectory (a run keeps them "
            "when its proxy records calls or its agent writes a transcript; an import, when "
            "its file holds the conversations)"
        )
    return _explain(run_dir, task_id, views, text, two=len(wanted) == 2 and attempts is not None)


def _ranges(numbers: list[int]) -> str:
    if not numbers:
        return "none"
    spans: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(spans)


def _view(attempt: int, row: dict[str, Any], traj: Trajectory | None, text: bool) -> AttemptView:
    outcome = row.get("outcome")
    if traj is None:
        return AttemptView(attempt, outcome, None)
    actions = action_sequence(traj, text)
    events = _earlier_events(traj.earlier_tries)
    position = 0  # actions before the current step
    for step in traj.steps:
        while position < len(actions) and actions[position].step < step.index:
            position += 1
        if step.kind == "link_event":
            status = step.detail.get("status")
            events.append(
                LinkEvent(
                    str(step.detail.get("kind")),
                    position,
                    bool(step.detail.get("retried")),
                    status if isinstance(status, int) else None,
                    absorbed=bool(step.detail.get("absorbed")),
                )
            )
    return AttemptView(
        attempt,
        outcome,
        traj.source,
        actions,
        events,
        turns=len(traj.model_turns),
        tokens=traj.tokens,
        latency_ms=traj.latency_ms,
        problems=traj.problems,
        steps=traj.steps,
        try_number=traj.try_number,
        earlier_tries=traj.earlier_tries,
        tries_known=traj.tries_known,
    )


def _earlier_events(tries: list[Try]) -> list[LinkEvent]:
    """The link events of abandoned tries: the one that ended each, and any before it."""
    events = []
    for attempt_try in tries:
        found = [s for s in attempt_try.steps if s.kind == "link_event"]
        for position, step in enumerate(found):
            status = step.detail.get("status")
            ended = position == len(found) - 1 and not step.detail.get("retried")
            events.append(
                LinkEvent(
                    str(step.detail.get("kind")),
                    0,
                    bool(step.detail.get("retried")),
                    status if isinstance(status, int) else None,
                    earlier="ended" if ended else "during",
                )
            )
    return events


def _explain(
    run_dir: Path, task_id: str, views: list[AttemptView], text: bool, *, two: bool
) -> TaskExplanation:
    having = [v for v in views if v.source is not None]
    groups = {g: [v for v in having if v.outcome == g] for g in GROUPS}
    apart = [v for v in views if v.outcome not in GROUPS]
    pairs = [
        (p.attempt, f.attempt, first_divergence(p.actions, f.actions))
        for p in groups["pass"]
        for f in groups["fail"]
    ]
    explanation = TaskExplanation(
        run_dir=run_dir,
        task_id=task_id,
        text=text,
        views=views,
        groups={g: [v.attempt for v in members] for g, members in groups.items()},
        apart=apart,
        without_trajectory=[v.attempt for v in views if v.source is None],
        pairs=pairs,
        differences=_differences(groups),
        events=_event_summaries(groups, [v for v in apart if v.source is not None]),
        figures={g: _figures(members) for g, members in groups.items()},
    )
    if two:
        a, b = views
        explanation.two = (a, b)
        explanation.two_divergence = first_divergence(a.actions, b.actions)
    return explanation


def _differences(groups: dict[str, list[AttemptView]]) -> list[StepDifference]:
    """The steps where the most common action of one group is rarest in the other: compared
    by kind and tool name first ("call get_user_details", "answer"), and where those agree,
    by the whole action (the arguments or the text)."""
    if not all(groups[g] for g in GROUPS):
        return []
    longest = max(len(v.actions) for g in GROUPS for v in groups[g])
    sizes = {g: len(groups[g]) for g in GROUPS}
    found = []
    for step in range(longest):
        for key in (_label_at, _whole_at):
            counts: dict[str, Counter[Any]] = {
                g: Counter(key(v, step) for v in groups[g]) for g in GROUPS
            }
            top = {g: _most_common(counts[g]) for g in GROUPS}
            if top["pass"][0] == top["fail"][0]:
                continue
            # How much more of each group's own top action it took than the other group did.
            score = max(
                counts[g][top[g][0]] / sizes[g] - counts[o][top[g][0]] / sizes[o]
                for g, o in (("pass", "fail"), ("fail", "pass"))
            )
            top_of = {g: (top[g][0], top[g][1], sizes[g]) for g in GROUPS}
            found.append(StepDifference(step, top_of, score))
            break
    chosen = sorted(found, key=lambda d: (-d.score, d.step))[:MAX_DIFFERENCES]
    return sorted(chosen, key=lambda d: d.step)


def _label_at(view: AttemptView, step: int) -> str:
    return view.actions[step].label if step < len(view.actions) else ENDED


def _whole_at(view: AttemptView, step: int) -> Action | str:
    return view.actions[step] if step < len(view.actions) else ENDED


def _most_common(counter: Counter[Any]) -> tuple[Any, int]:
    # Ties go to the first in sorted order: the same answer on every run.
    top = min(counter, key=lambda k: (-counter[k], k.shown() if isinstance(k, Action) else k))
    return top, counter[top]


def _event_summaries(
    groups: dict[str, list[AttemptView]], apart: list[AttemptView]
) -> list[EventSummary]:
    summaries = []
    by_outcome: dict[str, list[AttemptView]] = {}
    for view in apart:
        by_outcome.setdefault(str(view.outcome), []).append(view)
    for group, members in [*groups.items(), *by_outcome.items()]:
        seen: Counter[str] = Counter()
        for view in members:
            seen.update({e.phrase for e in view.events})  # once per attempt
        for phrase, count in sorted(seen.items(), key=lambda item: (-item[1], item[0])):
            summaries.append(EventSummary(group, phrase, count, len(members)))
    return summaries


def _figures(members: list[AttemptView]) -> dict[str, dict[str, float | None]]:
    def stats(values: list[float]) -> dict[str, float | None]:
        if not values:
            return {"mean": None, "median": None}
        return {"mean": statistics.fmean(values), "median": float(statistics.median(values))}

    return {
        "turns": stats([float(v.turns) for v in members]),
        "tokens": stats([float(v.tokens) for v in members if v.tokens is not None]),
        "latency_ms": stats([v.latency_ms for v in members if v.latency_ms is not None]),
    }
