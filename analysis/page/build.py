"""The three pages: a report of runs, a comparison of two, a trend of a suite's runs.

Each page's figures are the cores' own results, not recomputed: a report page holds the report
JSON exactly as ``report --format json`` writes it (``report_cache.write_json``), a comparison
page ``Comparison.to_json()``, a trend page ``trend_json``. What a page adds (identity,
attempts, explanations) comes from ``run_data`` and ``volatile``; all of it through a
``Scrubber``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis.page import document, headline, plots
from driftdesk.analysis.page.run_data import (
    ATTEMPT_FIELDS,
    attempt_rows,
    bodies_recorded,
    manifest_of,
    run_identity,
)
from driftdesk.analysis.page.scrub import Scrubber
from driftdesk.analysis.page.volatile import explained

if TYPE_CHECKING:
    from driftdesk.analysis.compare import Comparison

# Volatile tasks explained per run, the most volatile first: each costs reading its attempts'
# recordings, and a page of a huge run stays quick to make and to open.
EXPLAIN_LIMIT = 200
SecretsOf = Callable[[str | None], Sequence[str]]  # a run's profile name -> values to scrub


@dataclass
class PageOptions:
    drop_content: bool = False  # --redact-content: prompts, answers and arguments left out
    secrets_of: SecretsOf | None = None
    explain_limit: int = EXPLAIN_LIMIT


def _scrubber(manifest: dict[str, Any], options: PageOptions) -> Scrubber:
    profile = manifest.get("profile") if isinstance(manifest.get("profile"), str) else None
    secrets = list(options.secrets_of(profile)) if options.secrets_of else []
    return Scrubber.of(secrets, options.drop_content or not bodies_recorded(manifest))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("driftdesk")
    except PackageNotFoundError:
        return "?"


def _header(title: str, what: str, drop_content: bool) -> str:
    content = (
        "recorded content left out (--redact-content or a --no-bodies run)"
        if drop_content
        else "recorded content included, keys redacted"
    )
    return (
        f"<header><h1>{escape(title)}</h1>"
        f'<p class="sub">{escape(what)} · made by driftdesk {escape(_version())} · '
        f"{escape(content)} · self-contained: no network needed</p></header>"
    )


def _plots_html(images: list[tuple[str, str]]) -> str:
    if not images:
        if plots.available():
            return ""
        return (
            '<p class="sub plots-missing">Plots: install driftdesk with the '
            f"<code>{plots.EXTRA}</code> extra (pip install 'driftdesk[{plots.EXTRA}]').</p>"
        )
    return '<div class="plots">' + "".join(
        f'<img alt="{escape(alt, quote=True)}" data-plot="{escape(alt, quote=True)}" src="{url}">'
        for alt, url in images
    ) + "</div>"  # fmt: skip


# -- a report --------------------------------------------------------------------------------


def report_json(
    sources: Sequence[str], warn: Callable[[str], None], **report_options: Any
) -> list[dict[str, Any]]:
    """The report JSON of ``sources`` as ``report --format json`` writes it, one object a run."""
    from driftdesk.analysis.report_cache import write_json

    out = io.StringIO()
    write_json(list(sources), out, warn=warn, **report_options)
    data = json.loads(out.getvalue())
    # one run: its object; several: {"runs": [...]} (docs/report-json.md)
    return list(data["runs"]) if set(data) == {"runs"} else [data]


def _most_volatile(report: dict[str, Any]) -> list[str]:
    """Volatile task ids, those nearest half passing first (then by id)."""
    volatile = [t for t in report.get("tasks") or [] if t.get("volatile")]
    volatile.sort(key=lambda t: (abs((t.get("success_rate") or 0) - 0.5), str(t["task_id"])))
    return [str(t["task_id"]) for t in volatile]


def _listed(report: dict[str, Any]) -> set[str] | None:
    """The tasks the page lists, when ``--top`` cut the table (None: every task)."""
    if len(report.get("tasks") or []) >= int(report.get("tasks_total") or 0):
        return None
    tasks = list(report.get("tasks") or []) + list(report.get("tasks_below_min_runs") or [])
    return {str(t["task_id"]) for t in tasks}


def report_page(
    sources: Sequence[str],
    options: PageOptions,
    warn: Callable[[str], None],
    **report_options: Any,
) -> str:
    """The page of ``sources`` (``report``'s RUN arguments), one section per run."""
    runs = []
    body = []
    any_dropped = False
    for report in report_json(sources, warn, **report_options):
        manifest = manifest_of(report.get("run_dir"))
        scrub = _scrubber(manifest, options)
        any_dropped = any_dropped or scrub.drop_content
        run_dir = report.get("run_dir")
        explanations = {}
        if run_dir:  # an attempts file given alone has no recordings to explain by
            from driftdesk.analysis.trajectory import calls_of_tasks

            volatile = _most_volatile(report)
            chosen = volatile[: options.explain_limit]
            calls = calls_of_tasks(run_dir, chosen)  # one read of calls.jsonl for them all
            for task_id in chosen:
                explanations[scrub.text(task_id)] = explained(
                    run_dir, task_id, scrub, calls[task_id]
                )
        else:
            volatile = []
        run = {
            "report": scrub.value(report),
            "identity": run_identity(report, manifest, scrub),
            "attempt_fields": list(ATTEMPT_FIELDS),
            "attempts": attempt_rows(run_dir, manifest, scrub, _listed(report)),
            "explained": explanations,
            "explained_order": list(explanations),  # a JS object puts ids like "12" first
            "explained_of": len(volatile),
        }
        runs.append(run)
        body.append(_run_section(run))
    title = "driftdesk report: " + ", ".join(str(r["report"]["run_id"]) for r in runs)
    what = f"{len(runs)} run" + ("s" if len(runs) != 1 else "")
    html_body = _header(title, what, any_dropped) + "\n".join(body)
    return document.render(
        title=title, kind="report", body=html_body, data={"kind": "report", "runs": runs}
    )


def _run_section(run: dict[str, Any]) -> str:
    report = run["report"]
    images = []
    if plots.available():
        rates = [
            t["success_rate"]
            for t in report.get("tasks") or []
            if t.get("success_rate") is not None
        ]
        ci = (report.get("ci95") or {}).get("success_rate")
        images.append(
            (
                "success with its 95% CI",
                plots.success_per_run([(str(report["run_id"]), report.get("success_rate"), ci)]),
            )
        )
        if report.get("pass_hat_k"):
            images.append(
                (
                    "pass^k curve",
                    plots.pass_k_curves(
                        [
                            (
                                str(report["run_id"]),
                                report["pass_hat_k"],
                                report.get("pass_at_k") or {},
                            )
                        ]
                    ),
                )
            )
        if rates:
            images.append(("per-task success histogram", plots.success_histogram(rates)))
    return (
        f'<section class="run" data-run="{escape(str(report["run_id"]), quote=True)}">'
        f"<h2>Run <code>{escape(str(report['run_id']))}</code></h2>"
        + '<div class="run-top"><div class="headline">'
        + headline.run_headline(report)
        + '</div><div class="who"><h3>Identity</h3>'
        + headline.identity_table(run["identity"])
        + "</div></div>"
        + _plots_html(images)
        + "</section>"
    )  # fmt: skip


# -- a comparison ----------------------------------------------------------------------------


def compare_page(comparison: Comparison, options: PageOptions) -> str:
    data = comparison.to_json()
    sides = []
    for side, report in (("A", comparison.a), ("B", comparison.b)):
        manifest = manifest_of(report.run_dir)
        scrub = _scrubber(manifest, options)
        identity = run_identity(report.to_json(), manifest, scrub)
        sides.append((side, report, identity, scrub))
    scrub = Scrubber.of([s for _, _, _, sc in sides for s in sc.secrets], options.drop_content)
    data = scrub.value(data)
    images = []
    if plots.available():
        images.append(
            (
                "success of A and B with their 95% CIs",
                plots.success_per_run(
                    [
                        (f"{side} {r.run_id}", r.success_rate, r.ci95.get("success_rate"))
                        for side, r, _, _ in sides
                    ]
                ),
            )
        )
        curves = [
            (
                f"{side}",
                {str(k): v for k, v in r.pass_hat_k.items()},
                {str(k): v for k, v in r.pass_at_k.items()},
            )
            for side, r, _, _ in sides
            if r.pass_hat_k
        ]
        if curves:
            images.append(("pass^k curves of A and B", plots.pass_k_curves(curves)))
    title = (
        f"driftdesk compare: {scrub.text(comparison.a.run_id)} → {scrub.text(comparison.b.run_id)}"
    )
    body = [_header(title, "B − A over the tasks both judged", options.drop_content)]
    body.append(headline.compare_headline(data))
    for side, _, identity, _ in sides:
        body.append(f"<h3>{side}: <code>{escape(str(identity.get('run_id')))}</code></h3>")
        body.append(headline.identity_table(identity))
    body.append(_plots_html(images))
    return document.render(
        title=title, kind="compare", body="\n".join(body), data={"kind": "compare", "compare": data}
    )  # fmt: skip


# -- a trend ---------------------------------------------------------------------------------


def trend_page(trend: dict[str, Any], options: PageOptions) -> str:
    """The page of a trend (``trend_json``'s object)."""
    secrets: list[str] = []
    for run in trend.get("runs") or []:
        manifest = manifest_of(run.get("run_dir"))
        secrets.extend(_scrubber(manifest, options).secrets)
    scrub = Scrubber.of(secrets, options.drop_content)
    trend = scrub.value(trend)
    images = []
    if plots.available() and trend.get("runs"):
        images.append(
            ("success over time with its 95% CI band and flags", plots.trend_chart(trend["runs"]))
        )
    title = f"driftdesk trend: suite {trend.get('suite') or '?'}"
    body = [
        _header(title, f"{len(trend.get('runs') or [])} runs, oldest first", options.drop_content),
        _plots_html(images),
        headline.trend_headline(trend),
    ]
    return document.render(
        title=title, kind="trend", body="\n".join(body), data={"kind": "trend", "trend": trend}
    )  # fmt: skip


def write_page(html: str, out: Path | str) -> None:
    from driftdesk.fileio import atomic_write_text

    atomic_write_text(out, html, mode=0o644)
