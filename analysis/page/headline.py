"""The parts of a page drawn in Python, as static HTML: each run's headline figures and
identity, a comparison's deltas, a trend's runs and flags. They show before any script runs
(the page's headline is up as soon as its first kilobytes are parsed), and every text in them
goes through ``html.escape``.

Each figure carries the JSON value it shows (``data-figure`` names the report key,
``data-value`` holds the value), so a reader — or a test — can check the page against
``report --format json``.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any


def _pct(value: Any) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _ci(ci: Any, scale: float = 1.0) -> str:
    if not ci:
        return ""
    return f"95% CI {ci[0] * scale:.1f}–{ci[1] * scale:.1f}"


def figure(key: str, label: str, value: Any, shown: str, note: str = "") -> str:
    """One figure: its label, its value as shown, a note (a CI); the JSON value in an attribute."""
    raw = escape(json.dumps(value, ensure_ascii=False), quote=True)
    note_html = f'<span class="note">{escape(note)}</span>' if note else ""
    return (
        f'<div class="fig" data-figure="{escape(key, quote=True)}" data-value="{raw}">'
        f'<span class="label">{escape(label)}</span>'
        f'<span class="value">{escape(shown)}</span>{note_html}</div>'
    )


def model_failures(report: dict[str, Any]) -> int:
    """Judged failures over every task (the ones below --min-runs too)."""
    tasks = list(report.get("tasks") or []) + list(report.get("tasks_below_min_runs") or [])
    return sum(int(t.get("fails") or 0) for t in tasks)


def run_headline(report: dict[str, Any]) -> str:
    ci95 = report.get("ci95") or {}
    gap = report.get("consistency_gap_pp")
    figures = [
        figure(
            "success_rate", "success", report.get("success_rate"),
            _pct(report.get("success_rate")), _ci(ci95.get("success_rate"), 100),
        ),
        figure(
            "consistency_gap_pp", "consistency gap", gap,
            "—" if gap is None else f"{gap:.1f} pp", _ci(ci95.get("consistency_gap_pp")),
        ),
        figure("tasks_judged", "tasks judged", report.get("tasks_judged"), str(report.get("tasks_judged"))),
        figure(
            "attempts_judged", "attempts judged", report.get("attempts_judged"),
            str(report.get("attempts_judged")),
        ),
        figure("model_failures", "model failures", model_failures(report), str(model_failures(report))),
        figure(
            "link_errors", "link errors", report.get("link_errors"), str(report.get("link_errors")),
            _kinds(report.get("link_errors_by_kind")),
        ),
        figure(
            "harness_errors", "harness errors", report.get("harness_errors"),
            str(report.get("harness_errors")), _kinds(report.get("harness_errors_by_kind")),
        ),
        figure("retries", "retries", report.get("retries"), str(report.get("retries"))),
        figure(
            "model_mismatches", "model mismatches", report.get("model_mismatches"),
            str(report.get("model_mismatches")),
        ),
        figure("c_out", "C_out (HAL)", report.get("c_out"), _num(report.get("c_out"))),
        figure("all_agree_rate", "all attempts agree", report.get("all_agree_rate"), _pct(report.get("all_agree_rate"))),
        _cost(report),
    ]  # fmt: skip
    parts = ['<div class="figures">', *figures, "</div>"]
    parts.append(_injection(report.get("injection")))
    parts.append(_pass_k(report))
    if report.get("empty_reason"):
        parts.append(f'<p class="warn">{escape(str(report["empty_reason"]))}</p>')
    for warning in report.get("check_warnings") or []:
        parts.append(f'<p class="warn">warning: {escape(str(warning))}</p>')
    if report.get("skipped_line_count"):
        parts.append(
            f'<p class="warn">{int(report["skipped_line_count"])} lines of the run were '
            "unreadable and skipped (see <code>driftdesk report</code>)</p>"
        )
    return "\n".join(p for p in parts if p)


def _num(value: Any, fmt: str = ".3f") -> str:
    return "—" if value is None else format(value, fmt)


def _kinds(kinds: Any) -> str:
    if not kinds:
        return ""
    return ", ".join(f"{k}: {v}" for k, v in kinds.items())


def _cost(report: dict[str, Any]) -> str:
    cost = report.get("cost_usd")
    tokens = (report.get("tokens") or {}).get("total")
    notes = [f"{tokens} tokens"] if tokens else []
    if cost is not None:
        shown = f"${cost:.4f}"
    else:
        shown = "unknown"
        unpriced = ", ".join(str(m) for m in report.get("unpriced_models") or [])
        notes += [f"no price for {unpriced}"] if unpriced else []
    return figure("cost_usd", "cost", cost, shown, "; ".join(notes))


def _injection(injection: Any) -> str:
    if not isinstance(injection, dict):
        return ""
    figures = [
        figure(f"injection.{key}", label, injection.get(key), str(injection.get(key)))
        for key, label in (
            ("faults", "injected faults"),
            ("recovered", "recovered"),
            ("surfaced", "surfaced as link errors"),
            ("misattributed", "misattributed"),
        )
    ]
    spec = escape(str(injection.get("spec") or ""))
    return (
        f'<h3>Injected faults <code>{spec}</code></h3><div class="figures">'
        + "".join(figures)
        + "</div>"
    )


def _pass_k(report: dict[str, Any]) -> str:
    hat = report.get("pass_hat_k") or {}
    at = report.get("pass_at_k") or {}
    if not hat:
        return ""
    ks = sorted(hat, key=int)
    head = "".join(f"<th>k={escape(k)}</th>" for k in ks)
    hat_row = "".join(
        f'<td data-figure="pass_hat_k.{escape(k)}" data-value="{json.dumps(hat[k])}">{hat[k]:.3f}</td>'
        for k in ks
    )
    at_row = "".join(
        f'<td data-figure="pass_at_k.{escape(k)}" data-value="{json.dumps(at.get(k))}">{_num(at.get(k))}</td>'
        for k in ks
    )
    convention = escape(str(report.get("pass_k_convention")))
    return (
        f"<h3>pass^k ({convention} convention)</h3>"
        f'<table class="passk"><tr><th></th>{head}</tr><tr><th>pass^k</th>{hat_row}</tr>'
        f"<tr><th>pass@k</th>{at_row}</tr></table>"
    )


IDENTITY_FIELDS = (
    ("profile", "profile"),
    ("protocol", "protocol"),
    ("base_url", "base URL"),
    ("model_requested", "model requested"),
    ("models_served", "models served (calls)"),
    ("agent", "agent"),
    ("driftdesk_version", "driftdesk"),
    ("suite", "suite"),
    ("repeat", "repeat"),
    ("started_at", "started"),
    ("ended_at", "ended"),
    ("status", "status"),
    ("inject", "--inject"),
    ("bodies_recorded", "bodies recorded"),
    ("imported_from", "imported from"),
)


def identity_table(identity: dict[str, Any]) -> str:
    rows = []
    for key, label in IDENTITY_FIELDS:
        value = identity.get(key)
        if value is None or value == {}:
            continue
        if key == "models_served":
            shown = ", ".join(f"{m} ({n})" for m, n in value.items())
        elif key == "agent":
            shown = " ".join(
                str(value[k]) for k in ("kind", "client", "version") if value.get(k)
            ) + ("" if value.get("recorded", True) else " (not recorded)")
        else:
            shown = str(value)
        rows.append(
            f'<tr data-identity="{escape(key, quote=True)}"><th>{escape(label)}</th>'
            f"<td>{escape(shown)}</td></tr>"
        )
    return '<table class="identity">' + "".join(rows) + "</table>"


def _delta_cells(name: str, delta: dict[str, Any]) -> tuple[str, str, str]:
    """(Δ, 95 % CI, p) as ``compare`` shows them: success in pp (it is a fraction)."""
    scale = 100 if name == "success_rate" else 1
    value, ci, p = delta.get("value"), delta.get("ci95"), delta.get("p_value")
    shown = "—" if value is None else f"{value * scale:+.1f} pp"
    ci_shown = "—" if not ci else f"{ci[0] * scale:.1f}–{ci[1] * scale:.1f}"
    return shown, ci_shown, "—" if p is None else f"{p:.3g}"


def compare_headline(data: dict[str, Any]) -> str:
    """A comparison's paired deltas, per-run metrics and warnings (``Comparison.to_json()``)."""
    parts = [
        f'<p class="sub">paired over {int(data.get("shared_tasks") or 0)} shared tasks; '
        f"only in A: {int(data.get('only_in_a') or 0)}, only in B: {int(data.get('only_in_b') or 0)}</p>",
        "<h2>Paired deltas (B − A)</h2>",
        '<table class="deltas"><tr><th>metric</th><th class="num">Δ</th><th>95% CI</th>'
        '<th class="num">p</th><th>test</th><th>in words</th></tr>',
    ]
    for name, delta in (data.get("delta") or {}).items():
        value, ci, p = _delta_cells(name, delta)
        raw = escape(json.dumps(delta.get("value")), quote=True)
        parts.append(
            f'<tr data-delta="{escape(name, quote=True)}" data-value="{raw}"><th>{escape(name)}</th>'
            f'<td class="num">{escape(value)}</td><td>{escape(ci)}</td><td class="num">{escape(p)}</td>'
            f"<td>{escape(str(delta.get('test')))}</td><td>{escape(str(delta.get('sentence') or ''))}</td></tr>"
        )
    parts.append("</table>")
    parts.append(
        '<h2>Metrics</h2><table class="metrics"><tr><th>metric</th><th class="num">A</th>'
        '<th class="num">B</th><th class="num">B − A</th><th>CI A</th><th>CI B</th></tr>'
    )
    for m in data.get("metrics") or []:
        rate = str(m.get("name")).endswith("_rate")  # a fraction: shown in % (its delta in pp)
        cells = [_pct(m.get(k)) if rate else _metric(m.get(k)) for k in ("a", "b")]
        delta = m.get("delta")
        cells.append(f"{delta * 100:+.1f} pp" if rate and delta is not None else _metric(delta))
        cis = [_ci(m.get(k), 100 if rate else 1) or "—" for k in ("ci_a", "ci_b")]
        parts.append(
            f'<tr data-metric="{escape(str(m.get("name")), quote=True)}"><th>{escape(str(m.get("name")))}</th>'
            + "".join(f'<td class="num">{escape(c)}</td>' for c in cells)
            + "".join(f"<td>{escape(c.replace('95% CI ', ''))}</td>" for c in cis)
            + "</tr>"
        )
    parts.append("</table>")
    if data.get("r_fault"):
        parts.append(f"<p>R_fault (HAL): <code>{escape(json.dumps(data['r_fault']))}</code></p>")
    for warning in data.get("warnings") or []:
        parts.append(f'<p class="warn">warning: {escape(str(warning))}</p>')
    return "\n".join(parts)


def _metric(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def trend_headline(trend: dict[str, Any]) -> str:
    """A trend's runs (one row each, as ``trend`` prints them), flags and notes."""
    runs = trend.get("runs") or []
    parts = [f'<p class="sub">agent {escape(str(trend.get("agent") or "?"))}</p>']
    parts.extend(f'<p class="warn">note: {escape(str(n))}</p>' for n in trend.get("notes") or [])
    parts.append(
        '<h2>Runs</h2><table class="trend-runs"><tr><th>#</th><th>run</th><th>started</th>'
        '<th class="num">success</th><th>95% CI</th><th class="num">gap pp</th>'
        '<th class="num">link</th><th class="num">harness</th><th class="num">tokens/attempt</th>'
        "<th>served</th><th>flags</th></tr>"
    )
    for i, r in enumerate(runs, start=1):
        ci = r.get("success_ci95")
        served = ", ".join(sorted(r.get("served_models") or {})) or "?"
        flags = " ".join(str(f.get("name")) for f in r.get("flags") or [])
        gap = r.get("consistency_gap_pp")
        parts.append(
            f'<tr data-run="{escape(str(r.get("run_id")), quote=True)}" '
            f'data-value="{escape(json.dumps(r.get("success_rate")), quote=True)}">'
            f"<td>{i}</td><td><code>{escape(str(r.get('run_id')))}</code></td>"
            f"<td>{escape(str(r.get('started_at') or '?')[:19])}</td>"
            f'<td class="num">{_pct(r.get("success_rate"))}</td>'
            f"<td>{escape(_ci(ci, 100).replace('95% CI ', ''))}</td>"
            f'<td class="num">{"—" if gap is None else f"{gap:.1f}"}</td>'
            f'<td class="num">{int(r.get("link_errors") or 0)}</td>'
            f'<td class="num">{int(r.get("harness_errors") or 0)}</td>'
            f'<td class="num">{_num(r.get("tokens_per_attempt"), ".0f")}</td>'
            f"<td>{escape(served)}</td><td>{escape(flags)}</td></tr>"
        )
    parts.append("</table>")
    flagged = [(i, r) for i, r in enumerate(runs, start=1) if r.get("flags") or r.get("notes")]
    if flagged:
        parts.append('<h3>Flags and notes</h3><ul class="flags">')
        for i, r in flagged:
            for flag in r.get("flags") or []:
                parts.append(
                    f'<li data-flag="{escape(str(flag.get("name")), quote=True)}">run {i}: '
                    f"<strong>{escape(str(flag.get('name')))}</strong>: "
                    f"{escape(str(flag.get('evidence') or ''))}</li>"
                )
            for note in r.get("notes") or []:
                parts.append(f"<li>run {i}: note: {escape(str(note))}</li>")
        parts.append("</ul>")
    return "\n".join(parts)
