"""The Volatility screen's summary of one run: its headline facts (success and its CI, the
consistency gap, repeats, volatile tasks, link, harness and injected errors, the noise floor,
tokens and cost), and beside them its pass^k curve and success histogram as text."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from driftdesk.text import tokens as format_tokens

PLOT_SIZE = (48, 12)
HISTOGRAM_SIZE = (40, 12)


def summary_text(
    report: Any, live: bool, stopped_because: str | None, short: bool, width: int
) -> Text:
    """The run's headline: one fact a line, or, on a short screen (``short``), the facts packed
    side by side within ``width`` (the task table keeps room for more than a few rows at
    80×24). ``stopped_because``: why an interrupted run stopped."""
    ci = report.ci95 or {}
    text = Text()
    text.append(f"{report.run_id}", style="bold")
    if live:
        text.append("  LIVE", style="bold cyan")
    text.append(f"\n{report.model or ''}  status {report.status or '?'}\n", style="dim")
    if stopped_because:
        text.append(f"stopped: {stopped_because}\n", style="yellow")
    facts: list[tuple[str, Text]] = []

    def fact(label: str, value: str, style: str = "") -> Text:
        shown = Text(value, style=style)
        facts.append((label, shown))
        return shown

    def with_ci(label: str, value: str, key: str, scale: float = 100.0) -> None:
        shown = fact(label, value)
        bounds = ci.get(key)
        if bounds:
            shown.append(f"  CI95 {bounds[0] * scale:.1f}–{bounds[1] * scale:.1f}", "dim")

    with_ci(
        "mean task success",
        "-" if report.success_rate is None else f"{report.success_rate * 100:.1f} %",
        "success_rate",
    )
    pooled = report.attempt_success_rate
    fact("attempts passed", "-" if pooled is None else f"{pooled * 100:.1f} %")
    if report.partial_scores and report.mean_score is not None:
        # the scorer gives partial credit: pass/fail at a threshold hides what it gave
        fact("mean score", f"{report.mean_score:.3f}")
    with_ci(
        "consistency gap",
        "-" if report.consistency_gap_pp is None else f"{report.consistency_gap_pp:.1f} pp",
        "consistency_gap_pp",
        scale=1.0,
    )
    fact("tasks · attempts", f"{report.tasks_judged} · {report.attempts_judged} judged")
    design, uneven = getattr(report, "adaptive", None), getattr(report, "unequal_repeats", None)
    if design:  # the n column says how many each task got; max − min is read at one k
        stopped = (design.get("result") or {}).get("stop_reason") or "not finished"
        fact("repeats", f"adaptive, target {design.get('target')}").append(f"  {stopped}", "dim")
        if uneven and uneven.get("gap_at_k_pp") is not None:
            fact(
                "gap at k",
                f"{uneven['gap_at_k_pp']:.1f} pp at k = {uneven['gap_k']} "
                f"(n {uneven['n_min']}–{uneven['n_max']})",
            )
    volatile = sum(1 for t in report.tasks if t.volatile)
    fact("volatile tasks", f"{volatile}", "yellow" if volatile else "")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted((report.link_errors_by_kind or {}).items()))
    fact(
        "link errors",
        f"{report.link_errors}" + (f" ({kinds})" if kinds else ""),
        "magenta" if report.link_errors else "",
    )
    injection = getattr(report, "injection", None)
    if injection:
        # run --inject: the faults put in at the proxy, and what the agent made of them;
        # a misattributed one (judged although its answer never came) is a bug to see
        fact(
            "injected faults",
            f"{injection['faults']}: recovered {injection['recovered']}, surfaced "
            f"{injection['surfaced']}, misattributed {injection['misattributed']}",
            "bold red" if injection["misattributed"] else "cyan",
        )
    absorbed = getattr(report, "link_faults", None)
    if absorbed:
        # run --link-faults absorb: faults held at the proxy and sent again (never seen by
        # the agent), beside what still surfaced as link errors
        fact(
            "link faults",
            f"absorbed {absorbed['absorbed']} (waited {absorbed['absorbed_wait_s']:.1f} s), "
            f"surfaced {absorbed['surfaced']}",
            "cyan",
        )
    if report.harness_errors:
        # Attempts the harness itself broke (a crash, no result): not the model, not the
        # link; when every attempt is one, nothing was measured and the reason says why.
        kinds = ", ".join(f"{k} {v}" for k, v in report.harness_errors_by_kind.items())
        fact("harness errors", f"{report.harness_errors} ({kinds})", "bold red")
    floor = getattr(report, "noise_floor", None)
    if floor is not None and floor.mde_pp is not None:
        # The smallest success change a same-size rerun detects (80 % power), and the
        # repeats per task needed to see 5 and 10 pp.
        fact("noise floor", f"{floor.mde_pp:.1f} pp").append(f"  {floor.power:.0%} power", "dim")
        wanted = {k: v for k, v in floor.repeats_for_pp.items() if k in (5.0, 10.0)}
        fact(
            "repeats for Δ",
            "  ".join(f"{k:g} pp: {v if v is not None else '—'}" for k, v in wanted.items()),
        )
    # No attempt reported any usage (e.g. imported results): unknown, not free.
    counted = any(t.tokens_mean is not None for t in report.tasks)
    total = (report.tokens or {}).get("total") if counted else None
    known = total is not None and report.cost_usd is not None
    cost = f"${report.cost_usd:.4f}" if known else "unknown"
    fact("tokens · cost", f"{format_tokens(total)} · {cost}")
    if short:
        _pack_facts(text, facts, max(width - 4, 40))
    else:
        for label, value in facts:
            text.append(f"{label:<18}", style="bold")
            text.append_text(value)
            text.append("\n")
    if report.empty_reason and (report.harness_errors or report.link_errors):
        text.append(f"{report.empty_reason}\n", style="red")
    if report.skipped_lines:
        text.append(f"{len(report.skipped_lines)} malformed line(s) skipped\n", style="bold red")
    if short:
        text.rstrip()  # no blank line under it: one more task row
    return text


def _pack_facts(text: Text, facts: list[tuple[str, Text]], width: int) -> None:
    """``label value`` facts side by side, three spaces apart, a new line where the next one
    would pass ``width``."""
    used = 0
    for label, value in facts:
        size = len(label) + 1 + value.cell_len
        if used and used + 3 + size > width:
            text.append("\n")
            used = 0
        elif used:
            text.append("   ")
            used += 3
        text.append(f"{label} ", style="bold")
        text.append_text(value)
        used += size
    text.append("\n")


def pass_k_plot_text(report: Any) -> str:
    """The pass^k curve as text; a plot that fails must not hide the table, so say why instead."""
    from driftdesk.analysis.plots import pass_hat_k_plot

    try:
        return pass_hat_k_plot(report, *PLOT_SIZE, color=True)
    except Exception as exc:
        return f"(pass^k plot unavailable: {type(exc).__name__}: {exc})"


def histogram_text(report: Any) -> str:
    from driftdesk.analysis.plots import success_histogram

    try:
        return success_histogram(report, *HISTOGRAM_SIZE, color=True)
    except Exception as exc:
        return f"(histogram unavailable: {type(exc).__name__}: {exc})"
