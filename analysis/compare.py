"""Two runs side by side, the way a careful reviewer would compare them.

By default the comparison is over the tasks both runs judged (``shared``): two different task
sets are never compared as if they were one, and how many tasks each side left out is said.
Over the shared tasks it is **paired**: per task, the difference in success rate (B − A) and
in spread. Each mean difference gets its p-value and its 95 % CI from one permutation null
(``analysis.paired``), so they never disagree: success permutes each task's attempts between
the runs (a stratified permutation test, which weighs every repeat), the gap flips each task's
sign. A and B are the runs in the order given, B "after": the deltas are B − A. When A
started later than B (a manifest's ``started_at``; for an imported run, the time of the
import) a warning says so, and ``newer`` names the later one; the runs are never swapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from driftdesk.analysis.injection_report import RFault, injection_spec, r_fault
from driftdesk.analysis.metrics import mean_or_none
from driftdesk.analysis.paired import PairedTest, sign_flip, stratified_permutation
from driftdesk.analysis.report import build_reports_reading
from driftdesk.analysis.run_report import RunReport
from driftdesk.analysis.sources import RunSource, SourceError, resolve_sources

if TYPE_CHECKING:
    import duckdb

SIGNIFICANCE = 0.05  # "unlikely to be noise" below this p-value
# Metrics computed again over the shared tasks (the rest are whole-run facts).
SHARED_METRICS = ("success_rate", "consistency_gap_pp", "c_out")

# Run metrics compared, with the CI that goes with each (if any).
COMPARED_METRICS: tuple[tuple[str, str | None], ...] = (
    ("success_rate", "success_rate"),
    ("consistency_gap_pp", "consistency_gap_pp"),
    ("c_out", None),
    ("tasks_judged", None),
    ("attempts_judged", None),
    ("link_errors", None),
    ("link_error_rate", None),
    ("cost_usd", None),
)


class TaskOutcome(NamedTuple):
    """What a comparison reads of a task (``TaskStats``' fields of the same names). A tuple:
    each side of a compare of two 10M-row runs holds 200,000 of them."""

    n: int
    passes: int
    success_rate: float | None
    spread: float | None
    c_out: float | None


# A run's judged tasks, by task id.
Outcomes = dict[str, TaskOutcome]
_OUTCOME_COLUMNS = ", ".join(("task_id", *TaskOutcome._fields))


@dataclass
class MetricDelta:
    name: str
    a: float | None
    b: float | None
    delta: float | None  # b − a
    ci_a: list[float] | None = None
    ci_b: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "a": self.a,
            "b": self.b,
            "delta": None if self.delta is None else round(self.delta, 6),
            "ci_a": self.ci_a,
            "ci_b": self.ci_b,
        }


@dataclass
class TaskChange:
    """A task classified "pass" (all passed), "fail" (all failed), "volatile" or "absent"."""

    task_id: str
    before: str
    after: str
    success_a: float | None
    success_b: float | None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class PairedDelta:
    """B − A over the shared tasks, with its CI and p-value (one method) and a plain sentence."""

    name: str
    value: float | None
    ci95: list[float] | None
    p_value: float | None
    test: str  # ``analysis.paired``'s method names, or "none"
    sentence: str

    def cells(self) -> tuple[str, str, str]:
        """(delta, 95 % CI, p) as shown: success in pp (it is a fraction), the gap as is."""
        scale = 100 if self.name == "success_rate" else 1
        value = "—" if self.value is None else f"{self.value * scale:+.1f} pp"
        ci = "—" if not self.ci95 else f"{self.ci95[0] * scale:.1f}–{self.ci95[1] * scale:.1f}"
        p = "—" if self.p_value is None else f"{self.p_value:.3g}"
        return value, ci, p

    def to_json(self) -> dict[str, Any]:
        return {
            "value": None if self.value is None else round(self.value, 6),
            "ci95": None if self.ci95 is None else [round(v, 6) for v in self.ci95],
            "p_value": None if self.p_value is None else round(self.p_value, 6),
            "test": self.test,
            "sentence": self.sentence,
        }


@dataclass
class Comparison:
    """``a`` and ``b`` are the runs' reports; given run dirs, without their task lists."""

    a: RunReport
    b: RunReport
    metrics: list[MetricDelta] = field(default_factory=list)
    changed: list[TaskChange] = field(default_factory=list)
    shared_tasks: int = 0
    only_in_a: int = 0
    only_in_b: int = 0
    all_tasks: bool = False  # metrics over each whole run instead of the shared tasks
    swapped: bool = False  # B and A exchanged to put the newer run as B (``newer_as_b`` only)
    newer: str | None = None  # "a" or "b": the run that started later, when both say
    warnings: list[str] = field(default_factory=list)
    delta: dict[str, PairedDelta] = field(default_factory=dict)
    repeats: tuple[int | None, int | None] = (None, None)  # attempts per task, A and B
    # The ``--inject`` spec of each side (None: no faults injected); with one side faulted,
    # HAL's R_fault (faulted success / clean success) over the shared tasks.
    injection: tuple[str | None, str | None] = (None, None)
    r_fault: RFault | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "injection": {"a": self.injection[0], "b": self.injection[1]},
            "r_fault": self.r_fault.to_json() if self.r_fault is not None else None,
            "a": _side(self.a, self.repeats[0]),
            "b": _side(self.b, self.repeats[1]),
            "shared_tasks": self.shared_tasks,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "all_tasks": self.all_tasks,
            "swapped": self.swapped,
            "newer": self.newer,
            "warnings": self.warnings,
            "delta": {name: d.to_json() for name, d in self.delta.items()},
            "metrics": [m.to_json() for m in self.metrics],
            "changed": [c.to_json() for c in self.changed],
        }


def _models(report: RunReport) -> list[str]:
    """The models a run's rows name, else the one its manifest asked for."""
    return report.models or ([report.model] if report.model else [])


def _side(report: RunReport, repeats: int | None) -> dict[str, Any]:
    return {
        "run_id": report.run_id,
        "repeats": repeats,
        "models": _models(report),
        "agent": report.agent,
        "started_at": report.started_at,
        "tasks_judged": report.tasks_judged,
    }


def repeats_of(report: RunReport, tasks: Outcomes) -> int | None:
    """Attempts per task: the manifest's repeat, else the most counted attempts of a task."""
    if report.repeat is not None:
        return report.repeat
    return max((t.n for t in tasks.values()), default=None)


def classify(task: TaskOutcome | None) -> str:
    """ "pass" when every counted attempt passed, "fail" when none did, else "volatile"."""
    if task is None or task.n == 0:
        return "absent"
    if task.passes == task.n:
        return "pass"
    if task.passes == 0:
        return "fail"
    return "volatile"


def compare_runs(
    a: RunReport | Path | str,
    b: RunReport | Path | str,
    *,
    all_tasks: bool = False,
    newer_as_b: bool = False,
    **report_options: Any,
) -> Comparison:
    """Compare run ``a`` (before) with run ``b`` (after); paths are read with ``build_report``.

    A and B stay as given (``newer_as_b``: the run that started later becomes B, and
    ``swapped`` says whether they were exchanged). Reports passed in
    should list all their tasks (no ``top``); tasks below ``min_runs`` count as not judged.
    Success rate, gap and C_out are over the shared tasks unless ``all_tasks``; ``changed``
    lists every shared task whose class differs (every task with ``all_tasks``), by task id.
    """
    # both named runs found before either is read (10M rows take a minute)
    runs = [run if isinstance(run, RunReport) else _one_run(run) for run in (a, b)]
    (report_a, tasks_a), (report_b, tasks_b) = (_side_of(run, report_options) for run in runs)
    swapped = False
    newer = _newer(report_a, report_b)
    if newer_as_b and newer == "a":
        report_a, report_b, swapped, newer = report_b, report_a, True, "b"
        tasks_a, tasks_b = tasks_b, tasks_a
    comparison = Comparison(report_a, report_b, all_tasks=all_tasks, swapped=swapped, newer=newer)
    comparison.repeats = (repeats_of(report_a, tasks_a), repeats_of(report_b, tasks_b))
    shared = sorted(tasks_a.keys() & tasks_b.keys())
    comparison.shared_tasks = len(shared)
    comparison.only_in_a = len(tasks_a.keys() - tasks_b.keys())
    comparison.only_in_b = len(tasks_b.keys() - tasks_a.keys())
    pairs = [(tasks_a[t], tasks_b[t]) for t in shared]
    comparison.injection = (injection_spec(report_a.run_dir), injection_spec(report_b.run_dir))
    comparison.warnings = _warnings(comparison)
    comparison.delta = paired_deltas(pairs)
    comparison.r_fault = _r_fault(comparison.injection, pairs)
    shared_values = {
        "success_rate": (
            mean_or_none([x.success_rate for x, _ in pairs]),
            mean_or_none([y.success_rate for _, y in pairs]),
        ),
        "consistency_gap_pp": (
            _pp(mean_or_none([x.spread for x, _ in pairs])),
            _pp(mean_or_none([y.spread for _, y in pairs])),
        ),
        "c_out": (
            mean_or_none([x.c_out for x, _ in pairs]),
            mean_or_none([y.c_out for _, y in pairs]),
        ),
    }
    for name, ci_name in COMPARED_METRICS:
        value_a = getattr(report_a, name)
        value_b = getattr(report_b, name)
        if name in SHARED_METRICS and not all_tasks:
            value_a, value_b = shared_values[name]
            if comparison.only_in_a or comparison.only_in_b:
                ci_name = None  # the runs' own CIs are over other task sets; see ``delta``
        delta = None if value_a is None or value_b is None else value_b - value_a
        comparison.metrics.append(
            MetricDelta(
                name,
                value_a,
                value_b,
                delta,
                report_a.ci95.get(ci_name) if ci_name else None,
                report_b.ci95.get(ci_name) if ci_name else None,
            )
        )
    listed = sorted(tasks_a.keys() | tasks_b.keys()) if all_tasks else shared
    for task_id in listed:
        before, after = tasks_a.get(task_id), tasks_b.get(task_id)
        class_a, class_b = classify(before), classify(after)
        if class_a != class_b:
            comparison.changed.append(
                TaskChange(
                    task_id,
                    class_a,
                    class_b,
                    before.success_rate if before else None,
                    after.success_rate if after else None,
                )
            )
    return comparison


def _side_of(
    run: RunReport | RunSource, report_options: dict[str, Any]
) -> tuple[RunReport, Outcomes]:
    """A run's report and its judged tasks' outcomes; a run dir is read without making its
    tasks into ``TaskStats``."""
    if isinstance(run, RunReport):
        return run, {
            t.task_id: TaskOutcome(t.n, t.passes, t.success_rate, t.spread, t.c_out)
            for t in run.tasks
        }
    ((report, outcomes),) = build_reports_reading([run], _read_outcomes, **report_options)
    return report, outcomes


def _one_run(run: Path | str) -> RunSource:
    """The one run ``run`` names (``SourceError`` if it names none or several)."""
    runs = resolve_sources([run])
    if len(runs) != 1:
        raise SourceError(f"{run}: names {len(runs)} runs; compare takes one run a side")
    return runs[0]


def _read_outcomes(con: duckdb.DuckDBPyConnection) -> Outcomes:
    from driftdesk.analysis import task_report

    rows = task_report.task_rows(con, included=True, sort=None, top=None, columns=_OUTCOME_COLUMNS)
    return {row[0]: TaskOutcome(*row[1:]) for row in rows}


def _r_fault(
    injection: tuple[str | None, str | None], pairs: list[tuple[TaskOutcome, TaskOutcome]]
) -> RFault | None:
    """R_fault when exactly one side injected faults (the other is the clean run)."""
    if bool(injection[0]) == bool(injection[1]):
        return None
    faulted_is_b = bool(injection[1])
    rates = [
        (x.success_rate, y.success_rate) if faulted_is_b else (y.success_rate, x.success_rate)
        for x, y in pairs
        if x.success_rate is not None and y.success_rate is not None
    ]
    return r_fault(rates)


def _pp(value: float | None) -> float | None:
    return None if value is None else value * 100


def _newer(a: RunReport, b: RunReport) -> str | None:
    """ "a" or "b": the run whose manifest says it started later (None when either is silent
    or they started together)."""
    if not a.started_at or not b.started_at or a.started_at == b.started_at:
        return None
    return "a" if a.started_at > b.started_at else "b"


def _warnings(comparison: Comparison) -> list[str]:
    a, b = comparison.a, comparison.b
    warnings: list[str] = []
    if a.run_id == b.run_id and a.started_at == b.started_at:
        warnings.append(f"A and B are the same run ({a.run_id}): every delta is 0 by construction")
    if comparison.swapped:
        warnings.append(f"{b.run_id} is the newer run, so it is B (after)")
    elif comparison.newer == "a":
        warnings.append(
            f"A ({a.run_id}) started after B ({b.run_id}) (an imported run starts when it was "
            "imported): the deltas are B − A in the order given, older minus newer"
        )
    for side, spec in zip("AB", comparison.injection, strict=True):
        if spec:
            warnings.append(
                f"{side} injected faults at the proxy (--inject {spec}): its success change is "
                "what those faults cost"
            )
    if comparison.only_in_a or comparison.only_in_b:
        warnings.append(
            f"compared over the {comparison.shared_tasks} tasks both runs judged; left out: "
            f"{comparison.only_in_a} only in A, {comparison.only_in_b} only in B"
        )
    repeats_a, repeats_b = comparison.repeats
    if repeats_a != repeats_b:
        warnings.append(
            f"repeat counts differ (A {repeats_a}, B {repeats_b}): a task run more often is "
            "more likely to show both a pass and a fail, so the consistency gap is biased "
            "towards the run with more repeats"
        )
    for side, report in (("A", a), ("B", b)):
        uneven = report.unequal_repeats
        if uneven and report.adaptive:  # (a partial run's few short tasks: not worth a line)
            warnings.append(
                f"{side}'s repeats were adaptive: its tasks have {uneven['n_min']}.."
                f"{uneven['n_max']} attempts each (success weighs every task alike; pass^k averages each k over the "
                f"tasks with n ≥ k; the max − min gap grows with n — at k = {uneven['gap_k']} "
                f"it is {uneven['gap_at_k_pp']} pp)"
            )
    warnings.extend(agent_warnings(a, b))
    from driftdesk.analysis.link_faults_report import mode_warning, run_link_faults_mode

    modes = mode_warning(run_link_faults_mode(a.run_dir), run_link_faults_mode(b.run_dir))
    if modes is not None:
        warnings.append(modes)
    models_a, models_b = _models(a), _models(b)
    if models_a != models_b:
        warnings.append(
            f"models differ (A {', '.join(models_a) or '?'}, B {', '.join(models_b) or '?'})"
        )
    return warnings


def agent_warnings(a: RunReport, b: RunReport) -> list[str]:
    """A line when the two runs were made by different agents or client versions: their
    difference is then the agent's as much as the model's."""
    from driftdesk.analysis.agent_identity import identity_differences, identity_from_json

    who_a, who_b = identity_from_json(a.agent), identity_from_json(b.agent)
    differ = identity_differences(who_a, who_b)
    if not differ:
        return []
    what = "agents" if who_a.kind != who_b.kind else "client versions"
    return [
        f"{what} differ (A {who_a.label}, B {who_b.label}): the deltas measure the agent "
        "as much as the model"
    ]


def paired_deltas(pairs: list[tuple[TaskOutcome, TaskOutcome]]) -> dict[str, PairedDelta]:
    """B − A in success rate and gap over the shared tasks: the mean per-task difference, and
    its p-value and 95 % CI from one permutation null (``analysis.paired``): success permutes
    each task's attempts between the runs, the gap flips each task's sign."""
    if not pairs:
        return {name: _nothing_shared(name) for name in ("success_rate", "consistency_gap_pp")}
    gap = sign_flip([((y.spread or 0.0) - (x.spread or 0.0)) * 100 for x, y in pairs])
    return {
        "success_rate": success_delta([(x.n, x.passes, y.n, y.passes) for x, y in pairs]),
        "consistency_gap_pp": _delta("consistency_gap_pp", gap, len(pairs)),
    }


def success_delta(counts: Sequence[tuple[int, int, int, int]]) -> PairedDelta:
    """B − A in success rate over the shared tasks (``counts``: per task, by task id, A's
    judged attempts and passes, then B's), by the stratified permutation test over attempts:
    the one delta a regression is judged by (``gate.regression_condition``, and ``driftdesk
    trend``'s flags without the rest of a comparison)."""
    if not counts:
        return _nothing_shared("success_rate")
    return _delta("success_rate", stratified_permutation(counts), len(counts))


def _delta(name: str, test: PairedTest, tasks: int) -> PairedDelta:
    delta = PairedDelta(name, test.value, test.ci95, test.p_value, test.method, "")
    delta.sentence = _sentence(delta, tasks)
    return delta


def _nothing_shared(name: str) -> PairedDelta:
    empty = "no task was judged by both runs, so there is nothing to compare"
    return PairedDelta(name, None, None, None, "none", empty)


def _sentence(delta: PairedDelta, tasks: int) -> str:
    """ "B is better by 6.1 pp, 95 % CI 1.2–11.0 pp; unlikely to be noise (p = 0.012)"."""
    assert delta.value is not None
    scale = 100 if delta.name == "success_rate" else 1
    value = delta.value * scale
    higher_is_better = delta.name == "success_rate"
    what = "success rate" if delta.name == "success_rate" else "consistency gap"
    if abs(value) < 0.05:
        head = f"B and A have the same {what} over the {tasks} shared tasks"
    else:
        better = (value > 0) == higher_is_better
        head = f"B is {'better' if better else 'worse'} by {abs(value):.1f} pp ({what})"
    ci = ""
    if delta.ci95 is not None:
        ci = f", 95 % CI {delta.ci95[0] * scale:.1f} to {delta.ci95[1] * scale:.1f} pp"
    p = delta.p_value if delta.p_value is not None else 1.0
    verdict = "unlikely to be noise" if p < SIGNIFICANCE else "could be noise"
    return f"{head}{ci}; {verdict} (p = {p:.3g}, {delta.test}, {tasks} tasks)"
