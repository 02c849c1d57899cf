"""The report's lines for a Harbor import: Harbor's own mean beside driftdesk's, and what each
left out and why (``RunReport.harbor``, made by ``analysis.harbor_jobs.figures``)."""

from __future__ import annotations

from typing import Any


def _means(means: Any) -> str:
    if not isinstance(means, dict) or not means:
        return "none"
    if list(means) == ["mean"]:
        return f"{means['mean']:.6f}"
    return ", ".join(f"{k} {v:.6f}" for k, v in means.items())


def harbor_lines(harbor: dict[str, Any] | None) -> list[str]:
    if not harbor:
        return []
    trials = harbor.get("trials_on_disk", 0)
    missing = harbor.get("missing_rewards_as_zero", 0)
    lines = [
        f"  Harbor's mean {_means(harbor.get('harbor_mean'))} over every trial on disk "
        f"({trials}; {missing} without a reward counted 0)"
        + (
            f"  the job's result.json: {_means(harbor['job_reported_mean'])}"
            if harbor.get("job_reported_mean")
            else ""
        ),
        f"  driftdesk's mean {_means(harbor.get('judged_mean'))} over the judged trials "
        f"({harbor.get('judged_trials', 0)})",
    ]
    left_out = []
    for outcome, kinds in (harbor.get("excluded") or {}).items():
        total = sum(kinds.values())
        named = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
        left_out.append(f"{outcome} {total} ({named})")
    if harbor.get("cancelled"):
        left_out.append(f"cancelled {harbor['cancelled']} (not imported)")
    if left_out:
        lines.append("  left out of driftdesk's mean: " + "; ".join(left_out))
    pass_at_k = harbor.get("harbor_pass_at_k")
    if pass_at_k:
        lines.append(
            "  Harbor's pass@k  " + "  ".join(f"k={k} {v:.3f}" for k, v in pass_at_k.items())
        )
    return lines
