"""``driftdesk explain RUN TASK_ID``: why a task wobbles, from its attempts' trajectories.

Exit status: 0 with an explanation; 2 (one line on stderr) for a path that is not a run dir, a
task the run has no row for, or an attempt the task does not have; 1 (one line on stderr) when
the task's attempts kept no recording or trajectory to explain them by.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from driftdesk.terminal import json_printable, printable

if TYPE_CHECKING:
    from driftdesk.analysis.explain import AttemptView, TaskExplanation

MAX_SHOWN_ACTIONS = 6  # per attempt in the text output


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="why a task wobbles: where its passing and failing attempts part ways",
        description="Compare a task's attempts by their actions (tool calls in order, then "
        "the final answer): pass and fail groups, the steps where they differ most, where "
        "each pass/fail pair first diverges, link events and per-group turns, tokens and "
        "latency. Steps count the actions from 1 (0-based in --json). Exit 0; 2 for an "
        "unknown run, task or attempt; 1 when no attempt kept a recording or trajectory.",
    )
    p.add_argument("run", metavar="RUN", help="a run dir")
    p.add_argument("task_id", metavar="TASK_ID")
    p.add_argument(
        "--attempts",
        nargs="+",
        type=int,
        metavar="A",
        help="only these attempts; with two, where they first diverge (A B)",
    )
    p.add_argument("--json", action="store_true", help="the explanation as JSON")
    p.add_argument(
        "--text",
        action="store_true",
        help="count every model turn's free text as an action (not only the final answer)",
    )
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    from driftdesk.analysis.explain import NoTrajectoryError, explain_task
    from driftdesk.analysis.sources import SourceError

    try:
        explanation = explain_task(args.run, args.task_id, attempts=args.attempts, text=args.text)
    except SourceError as exc:  # an unknown run, task or attempt
        print(printable(f"driftdesk: {exc}", keep_newlines=False), file=sys.stderr)
        return 2
    except NoTrajectoryError as exc:
        print(printable(f"driftdesk: {exc}", keep_newlines=False), file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(
            json_printable(json.dumps(explanation.to_json(), ensure_ascii=False)) + "\n"
        )
    else:
        sys.stdout.write(printable(render_explanation(explanation)))
    return 0


def render_explanation(e: TaskExplanation) -> str:
    from driftdesk.analysis.trajectory import described_pair

    lines = [f"task {e.task_id} in {e.run_dir}", "  " + _groups_line(e)]
    if e.text:
        lines.append("  actions: tool calls and every model turn's text")
    lines.append("  (steps count the actions from 1; each attempt's final try)")
    if e.tries_note:
        lines.append(f"  note: {e.tries_note}")
    if e.two is not None:
        lines += ["", *_two_lines(e)]
    if e.differences:
        lines += ["", "where the groups differ most:"]
        lines += [f"  {d.sentence}" for d in e.differences]
    divergence = e.pair_sentences()
    if divergence:
        lines += ["", "pass/fail pairs:"] + [f"  {s}" for s in divergence]
        example = next(((p, f, d) for p, f, d in e.pairs if d is not None), None)
        if example is not None:
            p, f, d = example
            assert d is not None
            left, right = described_pair(d.a, d.b)
            lines.append(f"  e.g. at step {d.step + 1}: pass {p} {left}; fail {f} {right}")
    if e.events:
        lines += ["", "link events:"] + [f"  {ev.sentence}" for ev in e.events]
    figures = [g for g in ("pass", "fail") if e.groups[g]]
    if figures:
        lines += ["", "per group (mean / median):"]
        for group in figures:
            figure = e.figures[group]
            lines.append(
                f"  {'passes' if group == 'pass' else 'fails':<7} "
                f"turns {_pair(figure['turns'], '.1f')}  "
                f"tokens {_pair(figure['tokens'], ',.0f')}  "
                f"latency {_pair(figure['latency_ms'], ',.0f')} ms"
            )
    lines += ["", "attempts:"]
    for view in e.views:
        # Abandoned tries folded above the attempt's line: never compared, only named.
        lines += [f"      {t.summary}" for t in view.earlier_tries]
        lines.append(f"  {_attempt_line(view)}")
    return "\n".join(lines) + "\n"


def _groups_line(e: TaskExplanation) -> str:
    parts = [
        f"{len(e.groups[g])} {g} ({', '.join(map(str, e.groups[g]))})" if e.groups[g] else f"0 {g}"
        for g in ("pass", "fail")
    ]
    if e.apart:
        shown = ", ".join(f"{v.attempt} {v.outcome}" for v in e.apart)
        parts.append(f"apart: {shown}")
    if e.without_trajectory:
        parts.append(f"no trajectory: {', '.join(map(str, e.without_trajectory))}")
    return "; ".join(parts)


def _two_lines(e: TaskExplanation) -> list[str]:
    assert e.two is not None
    a = e.two[0]
    lines = [e.two_sentence()]
    d = e.two_divergence
    if d is not None and d.step:
        shared = a.actions[: d.step]
        lines.append(f"  both before it: {' → '.join(x.shown(40) for x in shared[-3:])}")
    return lines


def _pair(stats: dict[str, float | None], fmt: str) -> str:
    if stats["mean"] is None or stats["median"] is None:
        return "-"
    return f"{format(stats['mean'], fmt)} / {format(stats['median'], fmt)}"


def _attempt_line(v: AttemptView) -> str:
    head = f"{v.attempt:>3} {v.outcome!s:<13}"
    if v.source is None:
        return f"{head} (no recording or trajectory)"
    shown = [a.shown(40) for a in v.actions[:MAX_SHOWN_ACTIONS]]
    if len(v.actions) > MAX_SHOWN_ACTIONS:
        shown.append(f"… {len(v.actions) - MAX_SHOWN_ACTIONS} more")
    events = f"  [{'; '.join(ev.phrase for ev in v.events)}]" if v.events else ""
    return f"{head} {v.source:<10} {' → '.join(shown) or '(no actions)'}{events}"
