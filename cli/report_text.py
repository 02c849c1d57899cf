"""The text forms of the analysis commands' results: the human report table (summary, unequal
repeats, noise floor, injected faults, one line per task) and the A/B comparison, with the
cell formatting they share (every text from a file made one inert line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from driftdesk.terminal import printable

if TYPE_CHECKING:
    from driftdesk.analysis.compare import Comparison
    from driftdesk.analysis.run_report import RunReport


def cell(text: str) -> str:
    """Text from a file (a task id, a run id, an error kind) as one inert line: its control
    characters escaped, a newline in it never a new row."""
    return printable(text, keep_newlines=False)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "—" if value is None else format(value, fmt)


def _ci(ci: list[float] | None, scale: float = 1.0, fmt: str = ".1f") -> str:
    if not ci:
        return ""
    return f" [95% CI {ci[0] * scale:{fmt}}–{ci[1] * scale:{fmt}}]"


def _curve(curve: dict[int, float], limit: int = 8) -> str:
    keys = sorted(curve)
    if len(keys) > limit:
        # The first few k, then the last: where the curve starts and where it ends.
        keys = [*keys[: limit - 1], keys[-1]]
    return "  ".join(f"k={k} {curve[k]:.3f}" for k in keys)


def render_report_table(report: RunReport) -> str:
    """The human report: run summary, then one line per task."""
    from driftdesk.analysis.agent_identity import identity_label
    from driftdesk.text import tokens

    lines = [
        f"run {cell(report.run_id)}"
        + (f"  model {cell(report.model)}" if report.model else "")
        + (f"  agent {cell(identity_label(report.agent))}" if report.agent else "")
        + (f"  status {report.status}" if report.status else ""),
        f"  tasks judged {report.tasks_judged}  attempts judged {report.attempts_judged}"
        f"  link errors {report.link_errors}"
        + (
            " (" + ", ".join(f"{k}: {v}" for k, v in report.link_errors_by_kind.items()) + ")"
            if report.link_errors_by_kind
            else ""
        )
        + (
            f"  harness errors {report.harness_errors} ("
            + ", ".join(f"{k}: {v}" for k, v in report.harness_errors_by_kind.items())
            + ")"
            if report.harness_errors
            else ""
        )
        + ("  [link errors counted as failures]" if report.include_link_errors else "")
        + f"  retries {report.retries}  model mismatches {report.model_mismatches}",
        f"  success {_pct(report.success_rate)}{_ci(report.ci95.get('success_rate'), 100)}"
        + _mean_score(report)
        + f"  consistency gap {_num(report.consistency_gap_pp, '.1f')} pp"
        f"{_ci(report.ci95.get('consistency_gap_pp'))}",
        f"  C_out (HAL) {_num(report.c_out)} over {report.c_out_tasks} tasks with n ≥ 2"
        f"  all attempts agree {_pct(report.all_agree_rate)}"
        + "  C_res (HAL exp(−CV)) "
        + "  ".join(
            f"{name} {_num(report.resource_consistency.get(name))}"
            for name in ("latency", "tokens", "cost", "resource")
        ),
    ]
    if report.removed_from_denominator:
        lines.append(
            "  not in the success denominator: "
            + ", ".join(f"{k} {v}" for k, v in report.removed_from_denominator.items())
            + "  (--include-link-errors counts them as failures)"
        )
    if report.errors_counted_as_failures:
        lines.append(
            "  counted as failures: "
            + ", ".join(f"{k} {v}" for k, v in report.errors_counted_as_failures.items())
        )
    lines.extend(f"  warning: {cell(w)}" for w in report.check_warnings)
    if report.harbor is not None:
        from driftdesk.cli.harbor_text import harbor_lines

        lines.extend(cell(line) for line in harbor_lines(report.harbor))
    lines.extend(unequal_repeats_lines(report))
    lines.extend(noise_floor_lines(report))
    lines.extend(_injection_lines(report))
    if report.link_faults is not None:
        from driftdesk.analysis.link_faults_report import summary_line

        lines.append("  " + cell(summary_line(report.link_faults)))
    if report.concurrency is not None:
        from driftdesk.analysis.concurrency_report import summary_lines, worth_showing

        if worth_showing(report.concurrency):
            lines.extend("  " + cell(line) for line in summary_lines(report.concurrency))
    if report.pass_hat_k:
        lines.append(f"  pass^k ({report.pass_k_convention} convention, see docs/report-json.md)")
        lines.append(f"  pass^k  {_curve(report.pass_hat_k)}")
        lines.append(f"  pass@k  {_curve(report.pass_at_k)}")
    cost = (
        f"${report.cost_usd:.4f}"
        if report.cost_usd is not None
        else "unknown (no price for " + ", ".join(report.unpriced_models) + ")"
    )
    if report.tokens.get("total"):
        lines.append(f"  tokens {tokens(report.tokens['total'])}  cost {cost}")
    if report.group_by == "scenario" and report.task_goal_completion is not None:
        tgc, sgc = report.task_goal_completion, report.scenario_goal_completion or 0.0
        lines.append(
            f"  TGC {tgc:.1f}%  SGC {sgc:.1f}%  gap {tgc - sgc:.1f}"
            f"  ({len(report.scenarios)} scenarios)"
        )
    if report.missing_slots:
        shown = ", ".join(f"{cell(m['task_id'])}#{m['attempt']}" for m in report.missing_slots[:10])
        more = len(report.missing_slots) - 10
        lines.append(
            f"  missing slots {len(report.missing_slots)}: {shown}"
            + (f" … (+{more})" if more > 0 else "")
        )
    if report.tasks_below_min_runs:
        names = ", ".join(f"{cell(t.task_id)} (n={t.n})" for t in report.tasks_below_min_runs[:10])
        lines.append(
            f"  below --min-runs {report.min_runs}, not averaged: "
            f"{len(report.tasks_below_min_runs)} tasks: {names}"
        )
    if report.skipped_line_count:
        lines.append(f"  skipped lines {report.skipped_line_count} (see warnings)")
    lines.append("")
    if report.empty_reason and not report.tasks:
        lines.append(f"  no task table: {report.empty_reason}")
        return "\n".join(lines) + "\n"
    if report.group_by == "scenario" and report.scenarios:
        swidth = max([len("SCENARIO"), *(len(cell(s.scenario_id)) for s in report.scenarios)])
        lines.append(f"  {'SCENARIO':<{swidth}}  {'TASKS':>5}  {'MIN':>7}  {'MEAN':>7}")
        for sc in report.scenarios:
            lines.append(
                f"  {cell(sc.scenario_id):<{swidth}}  {sc.tasks:>5}  {_pct(sc.min_success_rate):>7}  "
                f"{_pct(sc.mean_success_rate):>7}"
            )
        lines.append("")
    width = max([len("TASK"), *(len(cell(t.task_id)) for t in report.tasks)])
    lines.append(
        f"  {'TASK':<{width}}  {'N':>4}  {'PASS':>4}  {'FAIL':>4}  {'LINK':>4}  "
        f"{'SUCCESS':>7}  {'MAX-MIN PP':>10}  {'LAT_MS':>9}  {'MODEL_MS':>9}  {'LAT_CV':>6}  "
        f"{'RETRY':>5}  {'MISMATCH':>8}  LAST ERRORS"
    )
    for t in report.tasks:
        lines.append(
            f"  {cell(t.task_id):<{width}}  {t.n:>4}  {t.passes:>4}  {t.fails:>4}  "
            f"{t.link_errors:>4}  {_pct(t.success_rate):>7}  {_spread_pp(t.spread):>10}  "
            f"{_num(t.latency_mean_ms, '.0f'):>9}  {_num(t.model_latency_mean_ms, '.0f'):>9}  "
            f"{_num(t.latency_cv, '.2f'):>6}  {t.retries:>5}  {t.model_mismatches:>8}  "
            f"{cell(' '.join(t.last_error_kinds))}"
        )
    if report.tasks_total > len(report.tasks):
        lines.append(f"  … {report.tasks_total - len(report.tasks)} more tasks (--top)")
    return "\n".join(lines) + "\n"


def _injection_lines(report: RunReport) -> list[str]:
    """A run that injected faults (--inject): what became of them, per run and per task."""
    from driftdesk.analysis.injection_report import read_injection, report_lines

    summary = read_injection(report.run_dir)
    return [] if summary is None else [cell(line) for line in report_lines(summary)]


def _spread_pp(spread: float | None) -> str:
    """A task's spread (JSON ``spread``: max − min of its attempts' scores, 0..1) in pp: on
    pass/fail tasks 100 means it both passed and failed, 0 that it never changed."""
    return "-" if spread is None else f"{spread * 100:.0f}"


def unequal_repeats_lines(report: RunReport) -> list[str]:
    """An adaptive design, and how the metrics read tasks with different numbers of attempts
    (docs/report-json.md, "Unequal repeats")."""
    lines = []
    design = report.adaptive
    if design:
        result = design.get("result") or {}
        lines.append(
            f"  repeats adaptive: target {design.get('target')}, {design.get('min_repeats')}.."
            f"{design.get('max_repeats')} per task"
            + (f"; {result['stop_reason']}" if result.get("stop_reason") else "; not finished")
        )
    uneven = report.unequal_repeats
    if uneven:
        interval = uneven.get("success_ci95_attempts")
        lines.append(
            f"  tasks have {uneven['n_min']}..{uneven['n_max']} attempts: success weighs every "
            f"task alike; pass^k at k over tasks with n ≥ k; max − min grows with n — at "
            f"k = {uneven['gap_k']} the gap is {_num(uneven['gap_at_k_pp'], '.1f')} pp"
            + (
                f"; success over these tasks {_pct(interval[0])}–{_pct(interval[1])} (95 %, "
                "attempts' sampling error)"
                if interval
                else ""
            )
        )
    return lines


def noise_floor_lines(report: RunReport) -> list[str]:
    """The noise floor as a sentence and a small table (targets -> repeats per task)."""
    floor = report.noise_floor
    if floor is None or floor.mde_pp is None:
        return []
    lines = [
        f"  noise floor: a same-size rerun detects a success change of ≥ {floor.mde_pp:.1f} pp "
        f"({floor.power:.0%} power, α {floor.alpha:g}; from {floor.tasks} tasks with n ≥ 2)",
        "    TARGET Δ (pp)  " + "  ".join(f"{k:>6g}" for k in floor.repeats_for_pp),
        "    repeats/task   "
        + "  ".join(f"{'—' if v is None else v:>6}" for v in floor.repeats_for_pp.values()),
    ]
    return lines


def render_comparison(comparison: Comparison) -> str:
    a, b = comparison.a, comparison.b
    from driftdesk.analysis.agent_identity import identity_label

    lines = [
        f"A (before) {cell(a.run_id)}  agent {cell(identity_label(a.agent))}",
        f"B (after)  {cell(b.run_id)}  agent {cell(identity_label(b.agent))}",
    ]
    lines.append(
        f"  shared tasks {comparison.shared_tasks}  left out: {comparison.only_in_a} only in A, "
        f"{comparison.only_in_b} only in B"
    )
    lines.extend(f"  warning: {cell(w)}" for w in comparison.warnings)
    lines.append("")
    lines.append(f"  {'PAIRED (B − A)':<22}  {'DELTA':>10}  {'95% CI':>17}  {'P':>8}  TEST")
    for name, d in comparison.delta.items():
        value, ci, p = d.cells()
        lines.append(f"  {name:<22}  {value:>10}  {ci:>17}  {p:>8}  {d.test}")
    lines.extend(f"  {d.sentence}" for d in comparison.delta.values())
    if comparison.r_fault is not None:
        lines.append(f"  {comparison.r_fault.sentence()}")
    lines.append("")
    lines.append(f"  {'METRIC':<22}  {'A':>10}  {'B':>10}  {'B − A':>10}  CI A / CI B")
    for m in comparison.metrics:
        ci = ""
        if m.ci_a or m.ci_b:
            ci = f"{_fmt_ci(m.ci_a)} / {_fmt_ci(m.ci_b)}"
        fmt = "d" if isinstance(m.a, int) and isinstance(m.b, int) else ".4f"
        lines.append(
            f"  {m.name:<22}  {_num(m.a, fmt):>10}  {_num(m.b, fmt):>10}  "
            f"{_num(m.delta, '+' + fmt):>10}  {ci}"
        )
    lines.append("")
    if comparison.changed:
        lines.append(f"  tasks that changed ({len(comparison.changed)}):")
        width = max(len(cell(c.task_id)) for c in comparison.changed)
        for c in comparison.changed:
            lines.append(
                f"  {cell(c.task_id):<{width}}  {c.before:>8} → {c.after:<8}  "
                f"{_pct(c.success_a):>6} → {_pct(c.success_b)}"
            )
    else:
        lines.append("  no task changed behaviour")
    if not comparison.all_tasks and (comparison.only_in_a or comparison.only_in_b):
        lines.append("  (tasks judged by one run only are not listed; --all-tasks lists them)")
    return "\n".join(lines) + "\n"


def _fmt_ci(ci: list[float] | None) -> str:
    return "—" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _mean_score(report: RunReport) -> str:
    """Beside the success rate where the scorer is not binary (partial credit, numbers): the
    mean score, inspect's ``mean``, since pass/fail at a threshold hides what it gave."""
    if not report.partial_scores or report.mean_score is None:
        return ""
    return f"  mean score {report.mean_score:.3f} (inspect's mean over {report.score_tasks} tasks)"
