"""CLI sub-commands for the analysis area: report, compare, tasks, plot, and results import.

Handlers import their core lazily (fast start) and only format what ``analysis`` computes.
Notices about skipped lines go to stderr so stdout stays machine-readable. The text forms of a
report and a comparison are ``cli.report_text``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.cli.errors import ANALYSIS_INPUT_ERRORS, guarded
from driftdesk.cli.page import add_options as add_page_options
from driftdesk.cli.report_text import cell, render_comparison, render_report_table
from driftdesk.cli.thresholds import at_least_one, k_rate, points, rate
from driftdesk.terminal import json_printable, printable, printable_path

if TYPE_CHECKING:
    from driftdesk.analysis.run_report import RunReport


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's sub-commands to the top-level parser."""
    p = sub.add_parser(
        "report",
        help="per-task volatility of one or more runs (pass^k, consistency gap, CIs)",
        description="Per-task volatility of runs. RUN is a run dir, an attempts.jsonl or a glob.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--format", default="table", choices=["table", "json", "csv", "parquet", "html"])
    p.add_argument("--out", help="write to this file (required for parquet and html)")
    add_page_options(p)
    _add_metric_options(p)
    p.add_argument("--group-by", default="task", choices=["task", "scenario"])
    p.add_argument("--sort", default="spread", choices=["spread", "success", "task"])
    p.add_argument("--top", type=int, help="list only the first N tasks (metrics use all)")
    p.add_argument(
        "--task-curves",
        action="store_true",
        help="json: add each task's pass^k and pass@k for k = 1..n",
    )
    p.set_defaults(func=guarded(cmd_report, ANALYSIS_INPUT_ERRORS))

    p = sub.add_parser(
        "compare",
        help="two runs, paired over the tasks both judged: deltas with CIs and p-values",
        description="Compare two runs over the tasks both judged: B − A, in the order given "
        "(B is 'after'). A warning says when A started later than B (an imported run starts "
        "when it was imported); --newer-as-b puts the later one as B.",
    )
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--format", default="table", choices=["table", "json", "html"])
    p.add_argument("--out", help="html: write the page to this file")
    add_page_options(p)
    p.add_argument(
        "--all-tasks",
        action="store_true",
        help="metrics over each whole run, and list tasks judged by one run only (the paired "
        "deltas stay over the shared tasks)",
    )
    p.add_argument(
        "--keep-order",
        action="store_true",
        help="keep RUN_A as A (the default; kept for older scripts)",
    )
    p.add_argument(
        "--newer-as-b",
        action="store_true",
        help="put the run that started later as B (by manifest started_at)",
    )
    _add_metric_options(p)
    p.set_defaults(func=guarded(cmd_compare, ANALYSIS_INPUT_ERRORS))

    p = sub.add_parser(
        "check",
        help="CI gate: exit 0 when every threshold holds, 1 otherwise",
        description="Check a run against thresholds (each printed with its value); exit 0 when "
        "all hold, 1 when one fails, 2 on bad input. A regression against --baseline fails "
        "only when the paired drop is larger than --max-regression and significant (p < 0.05 "
        "in a stratified permutation test over attempts: each task's attempts permuted between "
        "the runs, so every repeat counts; its 95 % CI comes from the same null).",
    )
    p.add_argument("run", metavar="RUN_DIR")
    p.add_argument(
        "--min-success", type=rate, metavar="RATE", help="run success rate (0..1, or 80%%)"
    )
    p.add_argument("--max-gap", type=points, metavar="PP", help="consistency gap, in pp (0..100)")
    p.add_argument(
        "--min-pass-hat-k",
        action="append",
        type=k_rate,
        metavar="K=RATE",
        help="pass^K at least RATE (repeatable)",
    )
    p.add_argument(
        "--task-min-success",
        type=rate,
        metavar="RATE",
        help="every task's success rate across its repeats at least RATE",
    )
    p.add_argument(
        "--max-link-error-rate", type=rate, metavar="RATE", help="0..1, or a percentage: 5%%"
    )
    p.add_argument("--baseline", metavar="RUN_DIR", help="compare with this run (paired)")
    p.add_argument(
        "--max-regression",
        type=points,
        default=0.0,
        metavar="PP",
        help="with --baseline: allowed drop in success, pp (0..100, default 0)",
    )
    _add_trend_options(p)
    p.add_argument("--format", default="table", choices=["table", "json"])
    _add_metric_options(p)
    p.set_defaults(func=guarded(cmd_check, ANALYSIS_INPUT_ERRORS))

    p = sub.add_parser("tasks", help="print task ids one a line (feed them to run --tasks)")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--volatile", action="store_true", help="tasks with both passes and fails")
    which.add_argument("--failed", action="store_true", help="tasks with at least one fail")
    p.set_defaults(func=guarded(cmd_tasks, ANALYSIS_INPUT_ERRORS))

    p = sub.add_parser("plot", help="pass^k curve and success histogram in the terminal")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--kind", default="both", choices=["pass-k", "histogram", "both"])
    p.add_argument("--width", type=int, default=72)
    p.add_argument("--height", type=int, default=18)
    _add_metric_options(p)
    p.set_defaults(func=guarded(cmd_plot, ANALYSIS_INPUT_ERRORS))


def _add_trend_options(p: argparse.ArgumentParser) -> None:
    from driftdesk.analysis.trend import GATING_FLAGS
    from driftdesk.cli.trend import flag_list

    g = p.add_argument_group("trend (a nightly job: driftdesk trend's flags on this run)")
    g.add_argument(
        "--trend",
        action="store_true",
        help="fail when this run carries a gating flag against the earlier runs of its suite",
    )
    g.add_argument(
        "--runs",
        type=Path,
        action="append",
        metavar="DIR",
        help="with --trend: the folder of earlier runs (repeatable; default: the run's folder)",
    )
    g.add_argument(
        "--trend-flags",
        type=flag_list,
        default=list(GATING_FLAGS),
        metavar="FLAG,…",
        help="the flags that fail (default regression,served_model_changed,link_errors_up,"
        "agent_changed; also improvement, fingerprint_changed, tokens_changed, client_changed)",
    )


def _add_metric_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--min-runs",
        type=at_least_one,
        default=1,
        help="tasks with fewer counted attempts are listed apart, not averaged",
    )
    p.add_argument(
        "--include-link-errors",
        action="store_true",
        help="count link and harness errors as failures (default: kept out of model metrics)",
    )
    p.add_argument(
        "--pass-k-convention",
        default="driftdesk",
        choices=["driftdesk", "tau2", "inspect", "harbor"],
        help="pass^k averaging: driftdesk (each k over the tasks run ≥ k times), tau2 "
        "(k capped at the smallest per-task trial count, every task averaged) or inspect "
        "(every task at every k, one run fewer than k times counting 0, as inspect_ai's "
        "at_least_k) or harbor (Harbor's pass@k: k = 2, 4, 8, … and 5, 10, … up to the "
        "fewest attempts of a task, every task averaged)",
    )


def _reports(args: argparse.Namespace, sources: Sequence[str], **extra: Any) -> list[RunReport]:
    from driftdesk.analysis.report import build_report

    reports = build_report(list(sources), **_run_options(args), **extra)
    for report in reports:
        _warn_skipped(report)
    return reports


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    """What decides a run's figures (``build_report``'s options the report, compare and the
    page share)."""
    return {
        "min_runs": args.min_runs,
        "include_link_errors": args.include_link_errors,
        "pass_k_convention": args.pass_k_convention,
    }


def _task_options(args: argparse.Namespace) -> dict[str, Any]:
    """How a report's tasks are grouped, ordered and cut."""
    return {"group_by": args.group_by, "sort": args.sort, "top": args.top}


def _warn(line: str) -> None:
    print(printable(f"warning: {line}"), file=sys.stderr)


def _warn_skipped(report: RunReport) -> None:
    from driftdesk.analysis.report_cache import skipped_warnings

    for line in skipped_warnings(report):
        _warn(line)


def cmd_report(args: argparse.Namespace) -> int:
    if args.format == "parquet" and not args.out:
        print("driftdesk: --format parquet needs --out FILE", file=sys.stderr)
        return 2
    if args.format == "json":
        return _report_json(args)
    if args.format == "html":
        return _report_html(args)
    reports = _reports(args, args.runs, **_task_options(args))
    if args.format == "parquet":
        from driftdesk.analysis.export import write_parquet

        write_parquet(reports, Path(args.out))
        print(f"wrote {printable_path(args.out)}", file=sys.stderr)
        return 0
    if args.format == "csv":
        from driftdesk.analysis.export import tasks_csv

        text = tasks_csv(reports)
    else:
        # Task ids and error kinds come from files: shown, their control characters are inert.
        text = printable("\n".join(render_report_table(r) for r in reports))
    _emit(text, args.out)
    return 0


def _report_json(args: argparse.Namespace) -> int:
    """The report JSON, its tasks streamed from DuckDB as they are written (no task list is
    built in Python; big runs have hundreds of thousands of tasks), or printed as kept for
    runs reported before and unchanged since (``analysis.report_cache``)."""
    import io

    from driftdesk.analysis.report_cache import write_json

    out: Any = io.StringIO() if args.out else sys.stdout
    write_json(
        list(args.runs),
        out,
        warn=_warn,
        task_curves=args.task_curves,
        **_run_options(args),
        **_task_options(args),
    )
    if args.out:
        _emit(out.getvalue(), args.out)
    return 0


def _report_html(args: argparse.Namespace) -> int:
    from driftdesk.analysis.page.build import report_page
    from driftdesk.cli import page

    if page.needs_out(args):
        return 2
    html = report_page(
        list(args.runs),
        page.options(args),
        _warn,
        **_run_options(args),
        **_task_options(args),
    )
    page.write(html, args.out)
    return 0


def _emit(text: str, out: str | None) -> None:
    if out:
        from driftdesk.fileio import atomic_write_text

        atomic_write_text(out, text, mode=0o644)
    else:
        sys.stdout.write(text)


def cmd_compare(args: argparse.Namespace) -> int:
    from driftdesk.analysis.compare import compare_runs
    from driftdesk.cli import page

    if page.needs_out(args):
        return 2
    comparison = compare_runs(
        args.run_a,
        args.run_b,
        all_tasks=args.all_tasks,
        newer_as_b=args.newer_as_b and not args.keep_order,
        **_run_options(args),
    )
    for report in (
        (comparison.b, comparison.a) if comparison.swapped else (comparison.a, comparison.b)
    ):
        _warn_skipped(report)  # in the order the runs were given
    if args.format == "html":
        from driftdesk.analysis.page.build import compare_page

        page.write(compare_page(comparison, page.options(args)), args.out)
    elif args.format == "json":
        sys.stdout.write(
            json_printable(json.dumps(comparison.to_json(), ensure_ascii=False)) + "\n"
        )
    else:
        sys.stdout.write(printable(render_comparison(comparison)))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from driftdesk.analysis.gate import check_run

    thresholds = (
        args.min_success,
        args.max_gap,
        args.min_pass_hat_k,
        args.task_min_success,
        args.max_link_error_rate,
        args.baseline,
    )
    if all(t is None for t in thresholds) and not args.trend:
        print("driftdesk: check needs at least one condition (see --help)", file=sys.stderr)
        return 2
    sources = [args.run] + ([args.baseline] if args.baseline else [])
    reports = _reports(args, sources, sort="task")
    result = check_run(
        reports[0],
        min_success=args.min_success,
        max_gap=args.max_gap,
        min_pass_hat_k=args.min_pass_hat_k,
        task_min_success=args.task_min_success,
        max_link_error_rate=args.max_link_error_rate,
        baseline=reports[-1] if args.baseline else None,
        max_regression_pp=args.max_regression,
    )
    if args.trend:
        from driftdesk.cli.trend import trend_conditions

        result.conditions.extend(trend_conditions(args))
    if args.format == "json":
        sys.stdout.write(json_printable(json.dumps(result.to_json(), ensure_ascii=False)) + "\n")
    else:
        lines = [f"check {cell(result.run_id)}"]
        names = [cell(c.name) for c in result.conditions]
        width = max(len(name) for name in names)
        for c, name in zip(result.conditions, names, strict=True):
            lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {name:<{width}}  {cell(c.detail)}")
        failed = sum(1 for c in result.conditions if not c.passed)
        lines.append(
            "result: PASS"
            if result.passed
            else f"result: FAIL ({failed} of {len(result.conditions)} conditions failed)"
        )
        sys.stdout.write("\n".join(lines) + "\n")
    return 0 if result.passed else 1


def cmd_tasks(args: argparse.Namespace) -> int:
    from driftdesk.analysis.selection import select_task_ids
    from driftdesk.taskids import quote

    runs = [Path(r) for r in args.runs]
    # One id a line, quoted so that a newline, a comma or a control character in an id can
    # neither split it nor act on a terminal, and ``run --tasks`` reads it back.
    for task_id in select_task_ids(runs, "volatile" if args.volatile else "failed"):
        sys.stdout.write(quote(task_id) + "\n")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from driftdesk.analysis.plots import pass_hat_k_plot, success_histogram

    (report,) = _reports(args, [args.run])
    parts = []
    if args.kind in ("pass-k", "both"):
        parts.append(pass_hat_k_plot(report, args.width, args.height))
    if args.kind in ("histogram", "both"):
        parts.append(success_histogram(report, args.width, args.height))
    sys.stdout.write("\n".join(parts) + "\n")
    return 0


def cmd_import_results(args: argparse.Namespace) -> int:
    """``driftdesk import RESULTS [--format ...]``: foreign results -> a driftdesk run dir."""
    return guarded(_import_results, ANALYSIS_INPUT_ERRORS)(args)


def _import_results(args: argparse.Namespace) -> int:
    from driftdesk.analysis.imports import import_results
    from driftdesk.text import article, plural

    if args.relink:
        from driftdesk.analysis.zero_copy import relink

        linked = relink(Path(args.relink), Path(args.source))
        print(
            f"{printable_path(args.relink)} now reads its rows from {printable_path(linked.path)}"
        )
        return 0
    result = import_results(
        Path(args.source),
        fmt=args.format,
        task_field=args.task_field,
        success_field=args.success_field,
        score_threshold=args.score_threshold,
        out=Path(args.out),
        run_id=args.run_id,
        copy=args.copy,
        max_member_mb=args.max_member_mb,
        merge=getattr(args, "merge", False),
    )
    for problem in result.notes + result.problems:  # a note skipped nothing: not counted
        print(printable(f"warning: {args.source}: {problem}"), file=sys.stderr)
    print(
        f"imported {plural(result.attempts, 'attempt')} of {plural(result.tasks, 'task')} "
        + ("(Harbor) " if result.format == "harbor" else f"({article(result.format)} file) ")
        + f"into {printable_path(result.run_dir)}"
        + (f"; {plural(len(result.problems), 'record')} skipped" if result.problems else "")
    )
    for other in result.more:  # Harbor: the other runs of the jobs
        print(
            f"imported {plural(other.attempts, 'attempt')} of {plural(other.tasks, 'task')} "
            f"into {printable_path(other.run_dir)}"
        )
    if result.zero_copy:
        print(
            f"the run reads its rows from {printable_path(Path(args.source).resolve())} in place "
            "(zero-copy): "
            "keep that file there and unchanged, or import with --copy for a run dir that "
            "holds its own rows"
        )
    return 0
