"""A volatile task on the page: ``analysis.explain``'s findings and one pass beside one fail,
their final tries folded by step, the first divergence marked on both sides.

The pair shown is the first pass/fail pair that diverges at the step most pairs diverge at (the
step ``explain`` names first); with content dropped, the findings keep their step numbers and
action kinds ("call lookup", "answer") and lose the arguments and texts.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis.page.scrub import Scrubber

if TYPE_CHECKING:
    from driftdesk.analysis.explain import AttemptView, TaskExplanation
    from driftdesk.analysis.steps import Step
    from driftdesk.analysis.trajectory import Action, Divergence


def explained(
    run_dir: str,
    task_id: str,
    scrub: Scrubber,
    calls: dict[int, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The page's explanation of one task (``{"problem": …}`` when it has none); ``calls``:
    the task's calls, read with the other explained tasks' (``trajectory.calls_of_tasks``)."""
    from driftdesk.analysis.explain import NoTrajectoryError, explain_task
    from driftdesk.analysis.sources import SourceError

    try:
        e = explain_task(Path(run_dir), task_id, calls=calls)
    except (SourceError, NoTrajectoryError, OSError, ValueError) as exc:
        return {"problem": scrub.text(str(exc))}
    views = {v.attempt: v for v in e.views}
    sentences = _sentences(e, scrub.drop_content)
    differing = [s for s in sentences if s.startswith("step ")]
    data: dict[str, Any] = {
        "groups": e.groups,
        "apart": [[v.attempt, v.outcome] for v in e.apart],
        "without_trajectory": e.without_trajectory,
        "sentences": [scrub.text(s) for s in sentences],
        # the one line the list of wobbling tasks shows: the step where passes and fails differ
        # most, else where pairs part
        "finding": scrub.text(next(iter(differing), sentences[0] if sentences else "")),
        "pair": None,
    }
    chosen = _chosen_pair(e)
    if chosen is not None:
        p, f, d = chosen
        data["pair"] = {
            "pass": p,
            "fail": f,
            "action": None if d is None else d.step + 1,  # counted from 1, as explain says
            "pass_step": _step_of(d.a) if d else None,
            "fail_step": _step_of(d.b) if d else None,
            "pass_action": _action_words(d.a, scrub) if d else None,
            "fail_action": _action_words(d.b, scrub) if d else None,
            "pass_steps": _steps(views[p], scrub),
            "fail_steps": _steps(views[f], scrub),
            # tries a link error ended before the final one: said, never compared
            "pass_earlier": [scrub.text(t.summary) for t in views[p].earlier_tries],
            "fail_earlier": [scrub.text(t.summary) for t in views[f].earlier_tries],
        }
    return data


def _chosen_pair(e: TaskExplanation) -> tuple[int, int, Divergence | None] | None:
    if not e.pairs:
        return None
    steps = Counter(d.step for _, _, d in e.pairs if d is not None)
    if steps:
        step = steps.most_common(1)[0][0]
        return next(pair for pair in e.pairs if pair[2] is not None and pair[2].step == step)
    return e.pairs[0]


def _step_of(action: Action | None) -> int | None:
    return None if action is None else action.step


def _action_words(action: Action | None, scrub: Scrubber) -> str:
    if action is None:
        return "had ended"
    if scrub.drop_content:
        return action.label
    return scrub.text(action.shown())


def _sentences(e: TaskExplanation, drop_content: bool) -> list[str]:
    if not drop_content:
        return e.sentences()
    # Shapes only: which step, which kind of action, how many; no argument or text.
    out = e.pair_sentences()
    for d in e.differences:
        parts = []
        for group, (top, count, size) in d.top.items():
            label = top.label if hasattr(top, "label") else str(top)
            parts.append(f"{'passes' if group == 'pass' else 'fails'} {label} {count}/{size}")
        out.append(f"step {d.step + 1}: " + "; ".join(parts))
    out.extend(ev.sentence for ev in e.events)
    return out


def _steps(view: AttemptView, scrub: Scrubber) -> list[list[Any]]:
    """Each step of the attempt's final try: [kind, text, tool calls [[name, arguments]],
    tokens, latency ms]."""
    return [_step(step, scrub) for step in view.steps]


def _step(step: Step, scrub: Scrubber) -> list[Any]:
    # a link event's text is the error's words, not recorded content
    link = step.kind == "link_event"
    text = scrub.text(step.summary()) if link else scrub.content(step.text)
    calls = [[scrub.text(name), scrub.content(arguments)] for name, arguments in step.tool_calls]
    return [step.kind, text, calls, step.tokens, step.latency_ms]
