"""``driftdesk trend``: the runs of one suite over time, flagged where something moved; and the
``check --trend`` conditions (a nightly CI job fails on the newest run's flags).

The figures and flags are ``analysis.trend``'s; this module finds the runs and formats.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from driftdesk.cli.page import add_options as add_page_options
from driftdesk.cli.thresholds import points
from driftdesk.terminal import json_printable, printable

if TYPE_CHECKING:
    from driftdesk.analysis.gate import Condition
    from driftdesk.analysis.trend import Trend

TASKS_SHOWN = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trend",
        help="the runs of one suite over time: success, gap, errors, served models, flags",
        description="The runs of one suite in start order: success (95 %% CI over tasks), "
        "consistency gap, link and harness errors, served models and fingerprints, tokens per "
        "attempt, latency p50/p95, and per task its success in each run. A run is flagged "
        "against the one before it: regression / improvement (the paired test of check "
        "--baseline), served_model_changed, fingerprint_changed, link_errors_up, "
        "tokens_changed (>= 10 %% and > 3 standard errors), client_changed (the agent's client "
        "or its version), agent_changed (--agent all only). One series per agent kind: Claude "
        "Code and Codex runs of a suite are two trends.",
    )
    p.add_argument(
        "run_dirs",
        nargs="*",
        metavar="RUN_DIR",
        help="run dirs, or folders of them (default: --runs, else ./runs)",
    )
    p.add_argument(
        "--runs", type=Path, action="append", metavar="DIR", help="a folder of runs (repeatable)"
    )
    p.add_argument("--suite", metavar="NAME_OR_FILE", help="the suite (default: the newest run's)")
    p.add_argument("--profile", metavar="P", help="only runs of this profile")
    p.add_argument("--last", type=_positive, metavar="N", help="only the newest N runs")
    p.add_argument(
        "--agent",
        metavar="KIND",
        help="the agent kind of the series (builtin, command, claude-code, codex, inspect; "
        "default: the newest run's); all: every kind mixed, a change flagged agent_changed",
    )
    p.add_argument(
        "--max-regression",
        type=points,
        default=0.0,
        metavar="PP",
        help="a drop (or rise) in success must exceed this many pp to flag, as check's",
    )
    p.add_argument("--tasks", type=_positive, default=TASKS_SHOWN, metavar="N",
                   help=f"flip strips shown, most flipped first (default {TASKS_SHOWN})")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the whole trend as JSON")
    p.add_argument(
        "--format", default="table", choices=["table", "json", "html"], help="json: as --json"
    )
    p.add_argument("--out", help="html: write the page to this file")
    add_page_options(p)
    p.set_defaults(func=cmd_trend)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def flag_list(text: str) -> list[str]:
    """``--trend-flags``: comma-separated flag names."""
    from driftdesk.analysis.trend import FLAGS

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FLAGS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown flag {', '.join(unknown) or '(none given)'}: use {', '.join(FLAGS)}"
        )
    return names


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Each path a run dir or a folder of them; in order, each run once."""
    from driftdesk.analysis.trend import run_dirs_under

    found: dict[Path, Path] = {}
    for path in paths:
        for run_dir in run_dirs_under(path):
            found.setdefault(run_dir.resolve(), run_dir)
    return list(found.values())


def cmd_trend(args: argparse.Namespace) -> int:
    from driftdesk.analysis.trend import TrendError, build_trend, trend_json
    from driftdesk.cli import page
    from driftdesk.paths import runs_dir

    if page.needs_out(args):
        return 2
    as_json = args.json or args.format in ("json", "html")
    paths = [Path(p) for p in args.run_dirs] + list(args.runs or [])
    try:
        run_dirs = find_run_dirs(paths or [runs_dir()])
        make = trend_json if as_json else build_trend
        made = make(
            run_dirs,
            suite=args.suite,
            profile=args.profile,
            last=args.last,
            allowed_pp=args.max_regression,
            agent=args.agent,
        )
        if args.format == "html":
            import json

            from driftdesk.analysis.page.build import trend_page

            page.write(trend_page(json.loads(str(made)), page.options(args)), args.out)
        elif isinstance(made, str):  # a kept trend's JSON as it was kept (nothing rebuilt)
            sys.stdout.write(json_printable(made) + "\n")
        else:
            sys.stdout.write(printable(render_trend(made, args.tasks)))
    except TrendError as exc:
        print(printable(f"driftdesk: {exc}"), file=sys.stderr)
        return 2
    return 0


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}"


def _cell(text: str) -> str:
    return printable(text, keep_newlines=False)


def render_trend(trend: Trend, tasks_shown: int = TASKS_SHOWN) -> str:
    from driftdesk.analysis.trend import ALL_AGENTS, run_identity, strip_cell

    runs = trend.runs
    series = "all agents, mixed" if trend.agent == ALL_AGENTS else f"agent {trend.agent or '?'}"
    lines = [f"suite {_cell(trend.suite or '?')}: {len(runs)} runs, oldest first; {_cell(series)}"]
    lines.extend(f"  note: {_cell(n)}" for n in trend.notes)
    width = max([3, *(len(_cell(r.run_id)) for r in runs)])
    agents = [_cell(run_identity(r.run).label) for r in runs]
    agent_width = max([5, *(len(a) for a in agents)])
    lines.append(
        f"  {'#':>3}  {'RUN':<{width}}  {'STARTED':<19}  {'SUCCESS %':>9}  {'95% CI':>11}  "
        f"{'GAP PP':>6}  {'LINK':>4}  {'HARN':>4}  {'TOK/ATT':>7}  {'P50 MS':>7}  "
        f"{'P95 MS':>7}  {'AGENT':<{agent_width}}  SERVED  FLAGS"
    )
    for i, r in enumerate(runs, start=1):
        run = r.run
        ci = "" if not r.success_ci95 else f"{_pct(r.success_ci95[0])}–{_pct(r.success_ci95[1])}"
        served = ",".join(sorted(run.served_models)) or "?"
        lines.append(
            f"  {i:>3}  {_cell(run.run_id):<{width}}  {(run.started_at or '?')[:19]:<19}  "
            f"{_pct(r.success_rate):>9}  {ci:>11}  "
            f"{'—' if r.consistency_gap_pp is None else f'{r.consistency_gap_pp:.1f}':>6}  "
            f"{run.link_errors:>4}  {run.harness_errors:>4}  "
            f"{_num(run.tokens_per_attempt):>7}  {_num(run.latency_p50_ms):>7}  "
            f"{_num(run.latency_p95_ms):>7}  {agents[i - 1]:<{agent_width}}  {_cell(served)}  "
            f"{' '.join(r.flag_names())}"
        )
    flagged = [(i, r) for i, r in enumerate(runs, start=1) if r.flags or r.notes]
    if flagged:
        lines.append("")
        lines.append("  flags and notes:")
        for i, r in flagged:
            for flag in r.flags:
                lines.append(f"  {i:>3} {flag.name}: {_cell(flag.evidence)}")
            for note in r.notes:
                lines.append(f"  {i:>3} note: {_cell(note)}")
    if trend.tasks:
        shown = trend.tasks[:tasks_shown]
        lines.append("")
        lines.append(
            f"  tasks, most flipped first ({len(shown)} of {len(trend.tasks)}; one column a "
            "run, oldest first: █ all passed, ▓ ≥ half, ░ some, · none, blank not judged)"
        )
        task_width = max(len(_cell(t.task_id)) for t in shown)
        for t in shown:
            strip = "".join(strip_cell(s) for s in t.success)
            lines.append(f"  {_cell(t.task_id):<{task_width}}  {strip}  flips {t.flips}")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def trend_conditions(args: argparse.Namespace) -> list[Condition]:
    """``check RUN --trend``: one condition per gating flag, on RUN against the runs of its
    suite in ``--runs`` (default: RUN's folder) that started before it."""
    from driftdesk.analysis.gate import Condition
    from driftdesk.analysis.trend import ALL_AGENTS, TrendError, build_trend, gating_flags

    run_dir = Path(args.run)
    folders = [Path(p) for p in (args.runs or [run_dir.resolve().parent])]
    try:
        history = find_run_dirs([*folders, run_dir])
        # every agent kind: a run made by another agent than the one before is flagged
        trend = build_trend(history, upto=run_dir, allowed_pp=args.max_regression, agent=ALL_AGENTS)
    except TrendError as exc:
        from driftdesk.analysis.sources import SourceError

        raise SourceError(str(exc)) from None
    current = trend.runs[-1]
    flags = {f.name: f for f in gating_flags(trend, current.run_id, args.trend_flags)}
    against = (
        f"vs {current.baseline}"
        if current.baseline
        else f"{len(trend.runs) - 1} earlier runs of suite {trend.suite or '?'}"
    )
    conditions = []
    for name in args.trend_flags:
        flag = flags.get(name)
        conditions.append(
            Condition(
                f"trend: no {name} flag",
                flag is None,
                None,
                flag.evidence if flag else f"not flagged ({against})",
            )
        )
    return conditions
