"""Per-task volatility of one or many runs, aggregated by DuckDB over ``attempts.jsonl``.

Definitions (the numbers the CLI, the TUI and ``docs/report-json.md`` promise):

- The outcome is the truth. ``pass``/``fail`` are judged attempts; ``link_error`` and
  ``harness_error`` are not model behaviour and stay out of the model metrics unless
  ``include_link_errors`` is set, which counts them as failures.
- Several rows can exist for one (task_id, attempt) slot (a resume with ``--retry-link-errors``
  appends a new row): the last row in file order wins.
- Per task: n counted attempts, c passes; success = c / n; spread = max − min of the 0/1
  outcomes (1 when mixed); pass^k = C(c,k)/C(n,k) and pass@k = 1 − C(n−c,k)/C(n,k), k = 1..n.
- Per run (over tasks with at least ``min_runs`` counted attempts; the others are listed apart
  in ``tasks_below_min_runs``): success = mean task success; consistency gap (pp) = mean spread
  × 100; C_out = 1 − gap / 100; the pass^k / pass@k curve at k is the mean over the tasks with
  n ≥ k (``pass_k_tasks`` says how many), so a task with fewer attempts never drags a curve it
  cannot be measured on; 95 % bootstrap CIs resample tasks (seeded, reproducible).
- Scenarios (``group_by="scenario"``): TGC = mean task success (%), SGC = mean over scenarios of
  the minimum task success (%) — a scenario only passes when all its tasks pass — one decimal.

This module computes the report: ``RunReport`` and ``TaskStats`` (``analysis.run_report``, what
a report holds and its JSON) are filled in one place, ``assemble_report``, and written by
``write_report_json``; the definitions above and the code that computes each field are read
together.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeVar

from driftdesk.analysis.metrics import (
    bootstrap_ci95,
    pass_curves,
    resample_count,
    unequal_repeats,
)
from driftdesk.analysis.noise import noise_floor_from_sums
from driftdesk.analysis.run_reader import RunExtras, read_runs
from driftdesk.analysis.run_report import (
    GroupBy,
    PassKConvention,
    RunReport,
    ScenarioStats,
    TaskStats,
)
from driftdesk.analysis.sources import RunSource, resolve_sources

if TYPE_CHECKING:
    import duckdb

    from driftdesk.analysis.prices import ModelPrice

RESOURCES = ("latency", "tokens", "cost")
SortKey = Literal["spread", "success", "task"]
Source = Path | str
T = TypeVar("T")


def build_report(
    sources: Sequence[Source],
    *,
    min_runs: int = 1,
    include_link_errors: bool = False,
    group_by: GroupBy = "task",
    sort: SortKey = "spread",
    top: int | None = None,
    prices: dict[str, ModelPrice] | None = None,
    pass_k_convention: PassKConvention = "driftdesk",
) -> list[RunReport]:
    """One ``RunReport`` per attempts file found in ``sources`` (in order).

    A source is a run dir, an ``attempts.jsonl`` file, or a glob of either. All files are read
    by DuckDB once; aggregation happens in SQL. ``sort``/``top`` order and cut ``tasks`` only
    (run metrics always use every task). ``prices`` overrides the price table
    (default: ``analysis.prices.load_prices()``, which may raise ``PriceTableError``).
    Raises ``analysis.sources.SourceError`` for a source that names no run.
    """
    options = ReportOptions(
        min_runs, include_link_errors, group_by, sort, top, prices, pass_k_convention
    )
    return [report for _, report in _assembled(resolve_sources(sources), options)]


def build_reports_reading(
    runs: list[RunSource],
    read_tasks: Callable[[duckdb.DuckDBPyConnection], T],
    **options: Any,
) -> list[tuple[RunReport, T]]:
    """Each run's report without its task lists (``runs`` as ``resolve_sources`` finds them),
    with what ``read_tasks`` reads of its tasks (``task_report.task_rows``) while the run's
    connection is open: for a caller that needs a few facts of every task rather than every
    ``TaskStats`` (``compare`` of two 10M-row runs would otherwise hold 400,000 of them).
    ``options`` are ``build_report``'s."""
    settings = ReportOptions(**options)
    return [
        (report, read_tasks(con)) for con, report in _assembled(runs, settings, with_tasks=False)
    ]


@dataclass
class ReportOptions:
    min_runs: int = 1
    include_link_errors: bool = False
    group_by: GroupBy = "task"
    sort: SortKey = "spread"
    top: int | None = None
    prices: dict[str, ModelPrice] | None = None
    pass_k_convention: PassKConvention = "driftdesk"

    def loaded_prices(self) -> dict[str, ModelPrice]:
        """The price table given, else the user's (may raise ``PriceTableError``)."""
        if self.prices is None:
            from driftdesk.analysis.prices import load_prices

            self.prices = load_prices()
        return self.prices


def _assembled(
    runs: list[RunSource], options: ReportOptions, *, with_tasks: bool = True
) -> Iterator[tuple[duckdb.DuckDBPyConnection, RunReport]]:
    """Each run's report, with the connection its per-task table is in until the next one.

    One connection per run, closed before the next run is read: memory is bounded by the
    biggest run, not by the sum of them (``compare`` of two 10M-row runs)."""
    from driftdesk.analysis import attempt_table

    prices = options.loaded_prices()
    for run in runs:
        with attempt_table.connection() as con:
            pending: list[Callable[[], bool]] = []  # the run's cache, written meanwhile
            keep: tuple[Any, RunReport] | None = None  # intervals to keep once it is written
            try:
                (extras,) = read_runs(
                    con,
                    [run],
                    include_link_errors=options.include_link_errors,
                    prices=prices,
                    need_rows=False,
                    pending=pending,
                )
                kept_ci95 = extras.cached_ci95.get(str(options.min_runs))
                report = assemble_report(
                    con,
                    0,
                    run,
                    extras,
                    min_runs=options.min_runs,
                    include_link_errors=options.include_link_errors,
                    group_by=options.group_by,
                    sort=options.sort,
                    top=options.top,
                    prices=prices,
                    ci95=kept_ci95,
                    pass_k_convention=options.pass_k_convention,
                    with_tasks=with_tasks,
                )
                report.injection = _injection_of(run)
                report.link_faults = _link_faults_of(run)
                report.concurrency = _concurrency_of(run)
                if kept_ci95 is None and extras.cache_ref is not None:
                    keep = (extras.cache_ref, report)
                yield con, report
            finally:
                if all([wait() for wait in pending]) and keep is not None:
                    from driftdesk.analysis import row_cache

                    row_cache.keep_ci95(keep[0], options.min_runs, keep[1].ci95)


def _injection_of(run: RunSource) -> dict[str, Any] | None:
    """What became of a run's injected faults (``run --inject``; None: it injected none)."""
    if not run.manifest.get("injection") or run.run_dir is None:
        return None
    from driftdesk.analysis.injection_report import read_injection

    summary = read_injection(run.run_dir)
    return None if summary is None else summary.to_json()


def _link_faults_of(run: RunSource) -> dict[str, Any] | None:
    """What a run that absorbed link faults absorbed (None: it did not absorb)."""
    from driftdesk.analysis.link_faults_report import link_faults_mode, read_link_faults

    if link_faults_mode(run.manifest) != "absorb":
        return None
    return read_link_faults(run.run_dir, run.manifest)


def _concurrency_of(run: RunSource) -> dict[str, Any] | None:
    """How the run's concurrency ran (None: nothing recorded, an imported run)."""
    from driftdesk.analysis.concurrency_report import read_concurrency

    return read_concurrency(run.run_dir, run.manifest)


def write_report_json(
    sources: Sequence[Source],
    out: TextIO,
    *,
    task_curves: bool = False,
    on_report: Callable[[RunReport], None] | None = None,
    **options: Any,
) -> list[RunReport]:
    """Write the report JSON of ``sources`` to ``out`` (what ``json.dumps`` of ``to_json()``
    would write, one run as the object, several as ``{"runs": [...]}``), streaming the tasks
    from DuckDB instead of building them in Python. ``options`` are ``build_report``'s.
    Returns the reports without their task lists; ``on_report`` sees each before its JSON is
    written (for warnings)."""
    runs = resolve_sources(sources)
    settings = ReportOptions(**options)
    settings.loaded_prices()  # a broken price table is refused before anything is written
    reports: list[RunReport] = []
    several = len(runs) != 1
    if several:
        out.write('{"runs":[')
    for con, report in _assembled(runs, settings, with_tasks=False):
        if on_report is not None:
            on_report(report)
        if reports:
            out.write(",")
        _write_run_json(
            con, report, out, task_curves=task_curves, sort=settings.sort, top=settings.top
        )
        reports.append(report)
    out.write("]}\n" if several else "\n")
    return reports


def _write_run_json(
    con: duckdb.DuckDBPyConnection,
    report: RunReport,
    out: TextIO,
    *,
    task_curves: bool,
    sort: SortKey,
    top: int | None,
) -> None:
    from driftdesk.analysis import task_report

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    for i, (key, value) in enumerate(report.to_json(task_curves=task_curves).items()):
        out.write(("{" if i == 0 else ",") + dumps(key) + ":")
        if key in ("tasks", "tasks_below_min_runs"):
            included = key == "tasks"
            out.write("[")
            for j, text in enumerate(
                task_report.task_json(
                    con,
                    included=included,
                    sort=sort if included else None,
                    top=top if included else None,
                    curves=task_curves,
                )
            ):
                out.write(text if j == 0 else "," + text)
            out.write("]")
        else:
            out.write(dumps(value))
    out.write("}")


def _apply_identity(report: RunReport, manifest: dict[str, Any]) -> None:
    """The agent that made the run, the rule that judged its checks, and the tasks whose
    checks mostly could not judge (read only when the run has a check_error)."""
    from driftdesk.analysis.agent_identity import agent_identity
    from driftdesk.analysis.check_rule import check_error_warnings, check_rule_of

    report.agent = agent_identity(manifest).to_json()
    rule, recorded = check_rule_of(manifest)
    report.check_rule = rule
    if "check_error" in report.harness_errors_by_kind:
        report.check_warnings = check_error_warnings(Path(report.source), rule, recorded)


def assemble_report(
    con: duckdb.DuckDBPyConnection,
    f: int,
    run: RunSource,
    extras: RunExtras,
    *,
    min_runs: int,
    include_link_errors: bool,
    group_by: GroupBy,
    sort: SortKey,
    top: int | None,
    prices: dict[str, ModelPrice],
    ci95: dict[str, list[float] | None] | None = None,
    pass_k_convention: PassKConvention = "driftdesk",
    with_tasks: bool = True,
    stats_cache: dict[str, TaskStats] | None = None,
    changed: list[str] | None = None,
    changed_rows: str = "attempts",
) -> RunReport:
    """Turn run ``f``'s per-task aggregates (``task_aggs`` in ``con``) into its report (shared
    by cold and live reports; the per-task arithmetic is SQL, ``analysis.task_report``).

    ``ci95`` reuses intervals computed earlier (the live view refreshes them less often).
    Without ``with_tasks`` the report's task lists stay empty (``write_report_json`` streams
    them from ``task_stats`` instead). ``stats_cache`` (task id -> TaskStats, kept by the
    caller) with ``changed`` (the tasks whose rows changed since the cache was filled; None:
    all) rebuilds only those tasks' stats; only the order is read for the others.
    ``changed_rows``: see ``task_report.prepare``.
    """
    from driftdesk.analysis import task_report, zero_copy
    from driftdesk.analysis.prices import price_for

    report = RunReport(
        run_id=run.run_id,
        source=str(zero_copy.rows_path(run)),
        run_dir=None if run.run_dir is None else str(run.run_dir),
        model=run.manifest.get("model") if isinstance(run.manifest.get("model"), str) else None,
        status=run.manifest.get("status") if isinstance(run.manifest.get("status"), str) else None,
        group_by=group_by,
        include_link_errors=include_link_errors,
        min_runs=min_runs,
        pass_k_convention=pass_k_convention,
    )
    started, repeat = run.manifest.get("started_at"), run.manifest.get("repeat")
    report.started_at = started if isinstance(started, str) else None
    report.repeat = repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else None
    report.models = sorted(m for m in extras.tokens_by_model if m)
    adaptive = run.manifest.get("adaptive")
    report.adaptive = adaptive if isinstance(adaptive, dict) else None
    imported = run.manifest.get("imported_from")
    if isinstance(imported, dict) and isinstance(imported.get("harbor"), dict):
        report.harbor = imported["harbor"]
    tasks = run.manifest.get("tasks")
    missing = task_report.prepare(
        con,
        f,
        [str(t) for t in tasks] if isinstance(tasks, list) else [],
        repeat if isinstance(repeat, int) and isinstance(tasks, list) else None,
        include_link_errors=include_link_errors,
        min_runs=min_runs,
        # the cache and task_stats were filled together, on this connection, the last time
        changed=changed if stats_cache else None,
        changed_rows=changed_rows,
    )
    report.missing_slots = [{"task_id": t, "attempt": a} for t, a in missing]
    totals = task_report.run_totals(con)
    report.tasks_judged = totals["included"]
    report.attempts_judged = totals["attempts_judged"]
    report.link_errors = totals["link_errors"]
    report.harness_errors = totals["harness_errors"]
    report.link_errors_by_kind = dict(extras.link_errors_by_kind)
    report.harness_errors_by_kind = _merge_counts(extras.harness_errors_by_kind)  # most first
    _apply_identity(report, run.manifest)
    slots = totals["slots"]
    report.link_error_rate = report.link_errors / slots if slots else None
    report.retries = totals["retries"]
    report.model_mismatches = totals["model_mismatches"]
    not_judged = _merge_counts(extras.link_errors_by_kind, extras.harness_errors_by_kind)
    if include_link_errors:
        report.errors_counted_as_failures = not_judged
    else:
        report.removed_from_denominator = not_judged

    if totals["included"]:
        sums = task_report.run_sums(con)
        count = totals["included"]
        report.success_rate = sums["success"] / count
        report.consistency_gap_pp = sums["spread"] / count * 100
        report.all_agree_rate = 1 - report.consistency_gap_pp / 100
        report.c_out = _mean(*sums["c_out"])
        report.c_out_tasks = sums["c_out"][1]
        report.resource_consistency = {
            name: _mean(*sums[name]) for name in (*RESOURCES, "resource")
        }
        report.noise_floor = noise_floor_from_sums(*sums["noise"])
        report.attempt_success_rate = totals["included_passes"] / report.attempts_judged
        report.mean_score, report.score_tasks, report.partial_scores = task_report.score_figures(
            con
        )
        report.pass_hat_k, report.pass_at_k, report.pass_k_tasks = _run_curves(
            sums["pairs"], pass_k_convention, report.repeat
        )
        report.unequal_repeats = unequal_repeats(sums["pairs"])
        report.ci_resamples = resample_count(count)
        report.ci95 = ci95 if ci95 is not None else bootstrap_ci95(task_report.ci_columns(con))
    else:
        report.ci95 = {"success_rate": None, "consistency_gap_pp": None}
        report.empty_reason = _empty_reason(totals, report, include_link_errors)

    _apply_tokens_and_cost(report, extras, prices, price_for)
    if group_by == "scenario":
        _apply_scenarios(report, task_report.scenarios(con) if totals["included"] else [])
    report.tasks_total = totals["included"]
    if with_tasks and stats_cache is not None:
        if changed is None:
            stats_cache.clear()
        for row in task_report.task_rows(con, included=True, sort=None, top=None, only=changed):
            stats_cache[row[0]] = TaskStats(*row)
        if changed is None:
            for row in task_report.task_rows(con, included=False, sort=None, top=None):
                stats_cache[row[0]] = TaskStats(*row)
        report.tasks = [
            stats_cache[t] for t in task_report.task_order(con, included=True, sort=sort, top=top)
        ]
        report.tasks_below_min_runs = [
            stats_cache[t] for t in task_report.task_order(con, included=False, sort=None, top=None)
        ]
    elif with_tasks:
        report.tasks = [
            TaskStats(*row) for row in task_report.task_rows(con, included=True, sort=sort, top=top)
        ]
        report.tasks_below_min_runs = [
            TaskStats(*row)
            for row in task_report.task_rows(con, included=False, sort=None, top=None)
        ]
    report.skipped_lines = list(extras.skipped_lines)
    report.skipped_line_count = extras.skipped_line_count
    return report


def _merge_counts(*counts: dict[str, int]) -> dict[str, int]:
    merged: dict[str, int] = defaultdict(int)
    for table in counts:
        for kind, count in table.items():
            merged[kind] += count
    return dict(sorted(merged.items(), key=lambda item: (-item[1], item[0])))


def _empty_reason(totals: dict[str, int], report: RunReport, include_link_errors: bool) -> str:
    """One sentence saying why no task has a success rate (the table would be empty)."""
    slots = totals["slots"]
    if not totals["tasks"]:
        return "the run has no tasks and no attempts yet"
    if slots == 0:
        return "no attempt has been recorded yet"
    if totals["judged"] == 0 and not include_link_errors:
        kinds = ", ".join(f"{k}: {v}" for k, v in report.removed_from_denominator.items())
        if report.harness_errors == slots:
            return (
                f"every attempt ({slots}) was a harness error ({kinds}): the harness broke "
                "before anything was judged (not the model, not the link); its message is in "
                "each attempt's row and log"
            )
        return (
            f"every attempt ({slots}) was a link or harness error ({kinds}), so none was "
            "judged; check the provider with `driftdesk doctor`, or pass "
            "--include-link-errors to count them as failures"
        )
    return f"no task has --min-runs {report.min_runs} counted attempts (most: {totals['max_n']})"


def _mean(total: float | None, count: int) -> float | None:
    return total / count if count and total is not None else None


def _run_curves(
    pairs: list[tuple[int, int, int]],
    convention: PassKConvention = "driftdesk",
    repeat: int | None = None,
) -> tuple[dict[int, float], dict[int, float], dict[int, int]]:
    """The run's pass^k / pass@k curves and the tasks averaged at each k.

    "driftdesk": at each k, the mean over the tasks with n ≥ k. "tau2" (tau2-bench's
    ``get_metrics_df``): k runs to the smallest per-task count (and never past ``repeat``,
    tau2's num_trials), and every task is averaged at every k. "inspect": k runs to the largest
    count and every task is averaged at every k, one with n < k counting 0 there (inspect_ai's
    ``at_least_k`` over its scored samples). ``pairs``: (n, passes, tasks)."""
    max_n = max(n for n, _, _ in pairs)
    if convention == "harbor":
        return _harbor_curves(pairs)
    if convention == "tau2":
        max_n = min(n for n, _, _ in pairs)
        if repeat is not None:
            max_n = min(max_n, repeat)
    hat_sum = [0.0] * max_n
    at_sum = [0.0] * max_n
    count = [0] * max_n
    for n, c, times in pairs:
        hat, at = pass_curves(n, c)
        for k in range(min(n, max_n)):
            hat_sum[k] += hat[k] * times
            at_sum[k] += at[k] * times
            count[k] += times
        if convention == "inspect":
            for k in range(n, max_n):  # too few attempts for k: a 0 in inspect's mean
                count[k] += times
    return (
        {k + 1: hat_sum[k] / count[k] for k in range(max_n)},
        {k + 1: at_sum[k] / count[k] for k in range(max_n)},
        {k + 1: count[k] for k in range(max_n)},
    )


def _harbor_curves(
    pairs: list[tuple[int, int, int]],
) -> tuple[dict[int, float], dict[int, float], dict[int, int]]:
    """Harbor's convention (``utils/pass_at_k.py``): k at Harbor's values up to the fewest
    counted attempts of a task, every task averaged at every k."""
    from driftdesk.analysis.metrics import harbor_k_values

    tasks = sum(times for _, _, times in pairs)
    ks = harbor_k_values(min(n for n, _, _ in pairs))
    hat = {k: sum(pass_curves(n, c)[0][k - 1] * t for n, c, t in pairs) / tasks for k in ks}
    at = {k: sum(pass_curves(n, c)[1][k - 1] * t for n, c, t in pairs) / tasks for k in ks}
    return hat, at, dict.fromkeys(ks, tasks)


def _apply_tokens_and_cost(
    report: RunReport,
    extras: RunExtras,
    prices: dict[str, ModelPrice],
    price_for: Any,
) -> None:
    prompt = completion = total = 0
    cost = 0.0
    unpriced: list[str] = []
    for model, (p, c, t) in extras.tokens_by_model.items():
        prompt, completion, total = prompt + p, completion + c, total + t
        price = price_for(model, prices)
        if price is None:
            if p or c or t:
                unpriced.append(model or "(no model)")
            continue
        cost += price.cost(p, c)
    report.tokens = {"prompt": prompt, "completion": completion, "total": total}
    report.unpriced_models = sorted(unpriced)
    report.cost_usd = None if unpriced else cost


def _apply_scenarios(report: RunReport, groups: list[tuple[str, int, float, list[float]]]) -> None:
    """``groups``: (scenario, tasks, min success, task rates) from ``task_report.scenarios``."""
    report.scenarios = [
        ScenarioStats(sid, count, low, sum(rates) / len(rates)) for sid, count, low, rates in groups
    ]
    if groups:
        assert report.success_rate is not None
        report.task_goal_completion = round(report.success_rate * 100, 1)
        mins = [s.min_success_rate for s in report.scenarios]
        report.scenario_goal_completion = round(sum(mins) / len(mins) * 100, 1)


def pooled_task_outcomes(run_dirs: Sequence[Path]) -> dict[str, tuple[int, int]]:
    """task_id -> (passes, fails) pooled over runs (last row per slot wins), in task order."""
    runs = resolve_sources(list(run_dirs))
    from driftdesk.analysis import attempt_table

    with attempt_table.connection() as con:
        read_runs(con, runs, include_link_errors=False, need_rows=False)
        rows = con.execute(
            "SELECT f, task_id, passes, fails FROM task_aggs ORDER BY f, first_seen"
        ).fetchall()
    by_run: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for f, task_id, passes, fails in rows:
        by_run[f].append((task_id, passes, fails))
    pooled: dict[str, tuple[int, int]] = {}
    for index, run in enumerate(runs):
        order = {t: i for i, t in enumerate(run.manifest.get("tasks") or [])}
        # stable: tasks of the manifest in its order, then the others in file order
        for task_id, passes, fails in sorted(
            by_run[index], key=lambda r: order.get(r[0], len(order))
        ):
            before = pooled.get(task_id, (0, 0))
            pooled[task_id] = (before[0] + passes, before[1] + fails)
    return pooled
