"""Drift over time: the runs of one suite in start order, what moved between them, and where.

Per run: success (mean task success, with a 95 % CI over tasks), the consistency gap (mean
over tasks of max − min success, pp), link and harness errors, the served models and
fingerprints the metering proxy saw, tokens per attempt and latency p50/p95 (judged attempts).
Per task: its success in each run (a flip strip), the tasks that changed class (pass / fail /
volatile, as ``compare`` classes them) most often first.

Flags on a run, each against the latest earlier run it can be compared with, with its evidence
in one line:

- ``regression`` / ``improvement``: the paired comparison over the shared tasks that
  ``check --baseline`` makes (``gate.regression_verdict`` on ``compare.success_delta``, the
  stratified permutation test over attempts), so the two never disagree: a regression is a drop
  larger than ``allowed_pp`` with p < 0.05; an improvement the same upwards. The baseline is
  the latest earlier run sharing a judged task with this one.
- ``served_model_changed`` / ``fingerprint_changed``: the set of served models (or
  ``system_fingerprint``s) differs from the latest earlier run that recorded any.
- ``link_errors_up``: more link errors per attempt slot than the previous run, p < 0.05 in the
  exact conditional test of two proportions (``paired.stratified_permutation`` with one
  stratum: given all the link errors of both runs, which run got them is hypergeometric).
- ``tokens_changed``: tokens per judged attempt moved by at least ``TOKENS_MIN_CHANGE`` of the
  previous run's AND by more than ``TOKENS_MIN_SE`` standard errors (Welch) — beyond noise.
- ``agent_changed``: the agent kind (``builtin``, ``claude-code``, ``codex``…) differs from the
  previous run's. A trend keeps one series per agent kind (``agent``: the newest run's kind
  unless named), so only a mixed trend (``agent="all"``, and ``check --trend``) has it.
- ``client_changed``: the client or its version differs from the latest earlier run of the
  same kind that recorded one (a Claude Code upgrade stays in its series, flagged). Runs from
  before manifests named their client are never flagged against.
- ``link_faults_changed``: the run treats link faults otherwise than the previous run
  (``--link-faults absorb`` / ``retry``): link errors and R_fault mean other things.

It stays whole (past 600 lines): one concern, the trend. Its model (``Trend``, ``TrendRun``,
``TaskStrip`` and their JSON and state forms), the computation that builds the runs and the flag
rules above that fill them in the same pass are tightly bound.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.analysis.trend_data import RunAggregate, aggregates, normal_ci95
from driftdesk.rundir import MANIFEST_FILE
from driftdesk.rundir.catalog import run_dirs_in

if TYPE_CHECKING:
    from driftdesk.analysis.agent_identity import AgentIdentity
    from driftdesk.analysis.trend_pairs import Helper

FLAGS = (
    "regression",
    "improvement",
    "served_model_changed",
    "fingerprint_changed",
    "link_errors_up",
    "tokens_changed",
    "agent_changed",
    "client_changed",
    "link_faults_changed",
)
GATING_FLAGS = ("regression", "served_model_changed", "link_errors_up", "agent_changed")
ALL_AGENTS = "all"  # ``agent``: every agent kind in one trend (then flagged agent_changed)
# A task's success in one run as one character (flip strips): all passed, at least half,
# some, none; a run that did not judge it is blank.
STRIP_CELLS = (("█", 1.0), ("▓", 0.5), ("░", 1e-9), ("·", 0.0))
NOT_JUDGED = " "
TOKENS_MIN_CHANGE = 0.10  # relative change of tokens per attempt
TOKENS_MIN_SE = 3.0  # standard errors of the difference


class TrendError(ValueError):
    """Bad input for a trend (no run found, an unknown suite): one line, exit code 2."""


@dataclass
class Flag:
    name: str
    evidence: str  # one line: the figures behind it and what it was compared with

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "evidence": self.evidence}


@dataclass
class TrendRun:
    run: RunAggregate
    success_rate: float | None = None
    success_ci95: list[float] | None = None
    consistency_gap_pp: float | None = None
    baseline: str | None = None  # the run id the paired flags compare with
    shared_tasks: int | None = None
    flags: list[Flag] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def flag_names(self) -> list[str]:
        return [f.name for f in self.flags]

    def to_json(self) -> dict[str, Any]:
        run = self.run
        judged = sum(n for n, _ in run.tasks.values())
        return {
            "run_id": run.run_id,
            "run_dir": run.run_dir,
            "started_at": run.started_at,
            "status": run.status,
            "profile": run.profile,
            "model": run.model,
            "agent": run_identity(run).to_json(),
            "success_rate": _round(self.success_rate),
            "success_ci95": None
            if self.success_ci95 is None
            else [_round(v) for v in self.success_ci95],
            "consistency_gap_pp": _round(self.consistency_gap_pp, 4),
            "tasks_judged": len(run.tasks),
            "attempts_judged": judged,
            "attempt_slots": run.slots,
            "link_errors": run.link_errors,
            "harness_errors": run.harness_errors,
            "served_models": dict(sorted(run.served_models.items())),
            "fingerprints": dict(sorted(run.fingerprints.items())),
            "tokens_per_attempt": _round(run.tokens_per_attempt, 3),
            "latency_p50_ms": _round(run.latency_p50_ms, 3),
            "latency_p95_ms": _round(run.latency_p95_ms, 3),
            "skipped_lines": run.skipped_lines,
            "baseline": self.baseline,
            "shared_tasks": self.shared_tasks,
            "flags": [f.to_json() for f in self.flags],
            "notes": self.notes,
        }


@dataclass
class TaskStrip:
    task_id: str
    success: list[float | None]  # per run, in run order; None: not judged in that run
    flips: int  # changes of class (pass / fail / volatile) between runs that judged it

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "success": [_round(v) for v in self.success],
            "flips": self.flips,
        }


@dataclass
class Trend:
    suite: str | None
    runs: list[TrendRun]
    tasks: list[TaskStrip]
    notes: list[str] = field(default_factory=list)  # what was left out, and why
    agent: str | None = None  # the agent kind of the series shown; "all": kinds mixed

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "agent": self.agent,
            "runs": [r.to_json() for r in self.runs],
            "tasks": [t.to_json() for t in self.tasks],
            "notes": self.notes,
        }

    def run(self, run_id: str) -> TrendRun | None:
        return next((r for r in self.runs if r.run_id == run_id), None)

    def to_state(self) -> dict[str, Any]:
        """Everything, as JSON-able values that ``from_state`` makes the same trend of (a
        kept trend: ``analysis.trend_cache``)."""
        return {
            "suite": self.suite,
            "agent": self.agent,
            "notes": self.notes,
            "runs": [
                {
                    **{name: getattr(r, name) for name in _RUN_FIGURES},
                    "run": vars(r.run),
                    "flags": [[f.name, f.evidence] for f in r.flags],
                }
                for r in self.runs
            ],
            "tasks": [[t.task_id, t.success, t.flips] for t in self.tasks],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Trend:
        return cls(
            state["suite"],
            [
                TrendRun(
                    RunAggregate.from_json(r["run"]),
                    flags=[Flag(name, evidence) for name, evidence in r["flags"]],
                    **{name: r[name] for name in _RUN_FIGURES},
                )
                for r in state["runs"]
            ],
            [TaskStrip(*t) for t in state["tasks"]],
            state["notes"],
            state.get("agent"),
        )


# A ``TrendRun``'s fields besides its run and flags.
_RUN_FIGURES = (
    "success_rate",
    "success_ci95",
    "consistency_gap_pp",
    "baseline",
    "shared_tasks",
    "notes",
)


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


# --- which runs ------------------------------------------------------------------------------


def run_dirs_under(folder: Path) -> list[Path]:
    """The run dirs (folders with a manifest) directly under ``folder``, or ``folder`` itself."""
    if (folder / MANIFEST_FILE).is_file():
        return [folder]
    if not folder.is_dir():
        raise TrendError(f"{folder}: no such folder of runs")
    return sorted(run_dirs_in(folder))


def start_key(run: RunAggregate) -> tuple[float, str]:
    """Order by start time (a manifest's ``started_at``; unknown first), then run id."""
    moment = -math.inf
    if run.started_at:
        try:
            parsed = datetime.fromisoformat(run.started_at)
            parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            moment = parsed.timestamp()
        except ValueError:
            pass
    return moment, run.run_id


def suite_matches(run: RunAggregate, wanted: str) -> bool:
    """``wanted`` names the run's suite, or is a suite file with the run's suite's content."""
    path = Path(wanted).expanduser()
    if path.is_file():
        import hashlib

        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if run.suite_sha256 == digest:
            return True
        return bool(run.suite_path) and Path(str(run.suite_path)).resolve() == path.resolve()
    return run.suite == wanted


def run_identity(run: RunAggregate) -> AgentIdentity:
    """The agent that made ``run`` (``analysis.agent_identity``), from its trend figures."""
    from driftdesk.analysis.agent_identity import UNKNOWN_KIND, AgentIdentity

    return AgentIdentity(
        run.agent or UNKNOWN_KIND, run.client, run.client_version, run.client_known
    )


def select(
    runs: Sequence[RunAggregate],
    *,
    suite: str | None = None,
    profile: str | None = None,
    last: int | None = None,
    agent: str | None = None,
) -> tuple[list[RunAggregate], str | None, list[str]]:
    """The runs of one suite (``suite``, else the newest run's), of ``profile`` if given, of
    one agent kind (``agent``, else the newest run's; ``"all"``: every kind), in start order,
    the newest ``last``; with the suite's name and notes on what was left out."""
    ordered = sorted(runs, key=start_key)
    notes: list[str] = []
    if profile is not None:
        kept = [r for r in ordered if r.profile == profile]
        if not kept:
            raise TrendError(f"no run of profile {profile!r} among {len(ordered)} runs")
        ordered = kept
    if suite is not None:
        kept = [r for r in ordered if suite_matches(r, suite)]
        if not kept:
            names = sorted({r.suite or "?" for r in ordered})
            raise TrendError(f"no run of suite {suite!r} (suites seen: {', '.join(names)})")
        name = kept[-1].suite
    else:
        if not ordered:
            raise TrendError("no run to show")
        name = ordered[-1].suite
        kept = [r for r in ordered if r.suite == name]
    others = len(ordered) - len(kept)
    if others:
        notes.append(f"left out {others} runs of other suites (--suite picks one)")
    kept = _of_agent(kept, agent, notes)
    if last is not None and len(kept) > last:
        notes.append(f"showing the newest {last} of {len(kept)} runs (--last)")
        kept = kept[-last:]
    return kept, name, notes


def _of_agent(runs: list[RunAggregate], agent: str | None, notes: list[str]) -> list[RunAggregate]:
    """The runs of one agent kind (``agent``, else the newest run's; ``ALL_AGENTS``: all),
    noting the others left out: Claude Code and Codex runs of a suite are two series."""
    if agent == ALL_AGENTS or not runs:
        return runs
    from driftdesk.analysis.agent_identity import UNKNOWN_KIND

    wanted = agent if agent is not None else (runs[-1].agent or UNKNOWN_KIND)
    kept = [r for r in runs if (r.agent or UNKNOWN_KIND) == wanted]
    if not kept:
        kinds = sorted({r.agent or UNKNOWN_KIND for r in runs})
        raise TrendError(f"no run of agent {agent!r} (agents seen: {', '.join(kinds)})")
    left = [r.agent or UNKNOWN_KIND for r in runs if (r.agent or UNKNOWN_KIND) != wanted]
    if left:
        counted = ", ".join(f"{k} {left.count(k)}" for k in sorted(set(left)))
        notes.append(
            f"agent {wanted}: left out {len(left)} runs of other agents ({counted}); "
            f"--agent KIND shows theirs, --agent all mixes them"
        )
    return kept


def build_trend(
    run_dirs: Sequence[Path],
    *,
    suite: str | None = None,
    profile: str | None = None,
    last: int | None = None,
    allowed_pp: float = 0.0,
    upto: Path | None = None,
    agent: str | None = None,
) -> Trend:
    """The trend of the runs in ``run_dirs`` (see ``select``); flags as the module says.
    ``upto`` (one of ``run_dirs``): its suite's runs that started no later than it, it the
    newest (``check --trend`` judges it against its history). With caches on, a trend of
    runs that did not change since is the one kept (``analysis.trend_cache``). ``agent``:
    the agent kind of the series (``select``; ``"all"`` mixes kinds)."""
    options = dict(
        suite=suite, profile=profile, last=last, allowed_pp=allowed_pp, upto=upto, agent=agent
    )
    return _answer(run_dirs, options).trend()


def trend_json(
    run_dirs: Sequence[Path],
    *,
    suite: str | None = None,
    profile: str | None = None,
    last: int | None = None,
    allowed_pp: float = 0.0,
    agent: str | None = None,
) -> str:
    """``build_trend(...).to_json()`` as JSON text (what ``trend --json`` prints): a kept
    trend's text as it was kept, without making the trend again."""
    options = dict(
        suite=suite, profile=profile, last=last, allowed_pp=allowed_pp, upto=None, agent=agent
    )
    return _answer(run_dirs, options).json_text()


class _Answer:
    """A trend just computed, or the one kept (made into a ``Trend`` only if asked for)."""

    def __init__(self, trend: Trend | None, text: str | None, state: bytes | None = None):
        self._trend, self._text, self._state = trend, text, state

    def trend(self) -> Trend:
        if self._trend is None:
            assert self._state is not None
            self._trend = Trend.from_state(json.loads(self._state))
        return self._trend

    def json_text(self) -> str:
        if self._text is None:
            self._text = json.dumps(self.trend().to_json(), ensure_ascii=False)
        return self._text


def _answer(run_dirs: Sequence[Path], options: dict[str, Any]) -> _Answer:
    """The trend kept for these runs and options if none of them changed since, else the
    trend computed (and kept)."""
    from driftdesk.analysis import cache_store, trend_cache
    from driftdesk.analysis.sources import manifest_or_empty

    if not run_dirs:
        raise TrendError("no run dir found")
    if not cache_store.enabled():
        return _Answer(_compute(run_dirs, None, **options), None)
    manifests = [manifest_or_empty(d) for d in run_dirs]
    resolved = [d.resolve() for d in run_dirs]
    key_options = _key_options(options)
    path = trend_cache.entry_file(resolved, key_options)
    before = trend_cache.identity(run_dirs, resolved, manifests, key_options)
    kept = trend_cache.load(path, before)
    if kept is not None:
        return _Answer(None, *kept)
    trend = _compute(run_dirs, manifests, **options)
    answer = _Answer(trend, None)
    # Not kept if a run's files changed meanwhile (computed next time).
    if trend_cache.identity(run_dirs, resolved, manifests, key_options) == before:
        trend_cache.store(path, before, answer.json_text(), trend.to_state())
    return answer


def _key_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options as they enter a kept trend's key: paths resolved, a suite file by its
    identity (``cache_store.file_identity``) too (a run matches it by content)."""
    from driftdesk.analysis.cache_store import file_identity

    keyed = dict(options)
    if options["upto"] is not None:
        keyed["upto"] = str(Path(options["upto"]).resolve())
    suite = options["suite"]
    if suite is not None and Path(suite).expanduser().is_file():
        keyed["suite_file"] = file_identity(Path(suite).expanduser().resolve())
    return keyed


def _compute(
    run_dirs: Sequence[Path],
    manifests: Sequence[dict[str, Any]] | None,
    *,
    suite: str | None,
    profile: str | None,
    last: int | None,
    allowed_pp: float,
    upto: Path | None,
    agent: str | None = None,
) -> Trend:
    from driftdesk.analysis.trend_pairs import helper_for

    # the paired tests' second process, started now: its start-up overlaps the read
    with helper_for(len(run_dirs)) as helper:
        found = aggregates(run_dirs, manifests=manifests)
        if upto is not None:
            target = upto.resolve()
            judged = next((r for r in found if Path(r.run_dir).resolve() == target), None)
            if judged is None:
                raise TrendError(f"{upto}: not among the runs read")
            newest = judged
            found = [
                r
                for r in found
                if r.suite == newest.suite
                and start_key(r) <= start_key(newest)
                and (r is newest or Path(r.run_dir).resolve() != target)
            ]
            found.sort(key=lambda r: (start_key(r), r is newest))  # a tie: the run judged last
            suite = None
        runs, name, notes = select(found, suite=suite, profile=profile, last=last, agent=agent)
        if upto is not None and runs:
            runs = [r for r in runs if r is not newest] + [newest]
        trend = trend_of(runs, allowed_pp=allowed_pp, helper=helper)
        trend.suite, trend.notes = name, notes + trend.notes
        trend.agent = agent if agent == ALL_AGENTS else (runs[-1].agent if runs else None)
        return trend


# --- flags -----------------------------------------------------------------------------------


def trend_of(
    runs: Sequence[RunAggregate], *, allowed_pp: float = 0.0, helper: Helper | None = None
) -> Trend:
    """Figures and flags of ``runs`` (in the order given: oldest first); ``helper``: a second
    process for the paired verdicts (``trend_pairs.helper_for``)."""
    from driftdesk.analysis.compare import SIGNIFICANCE
    from driftdesk.analysis.trend_pairs import paired_outcomes, tasks_digest

    bases: list[int | None] = []
    for index, run in enumerate(runs):
        bases.append(
            next((i for i in range(index - 1, -1, -1) if run.tasks.keys() & runs[i].tasks.keys()),
                 None)
        )  # fmt: skip
    wanted = [(base, index) for index, base in enumerate(bases) if base is not None]
    digests = [tasks_digest(run.tasks) for run in runs]
    verdicts = dict(
        zip(wanted, paired_outcomes(runs, wanted, digests, allowed_pp, helper), strict=True)
    )
    shown: list[TrendRun] = []
    for index, run in enumerate(runs):
        rates = [p / n for n, p in run.tasks.values()]
        spreads = [1.0 if 0 < p < n else 0.0 for n, p in run.tasks.values()]
        current = TrendRun(
            run,
            success_rate=math.fsum(rates) / len(rates) if rates else None,
            success_ci95=normal_ci95(rates),
            consistency_gap_pp=math.fsum(spreads) / len(spreads) * 100 if spreads else None,
        )
        shown.append(current)
        if not run.tasks:
            current.notes.append("no judged attempt: no success to compare")
        earlier = runs[:index]
        base_index = bases[index]
        if base_index is not None:
            base = runs[base_index]
            pair = verdicts[(base_index, index)]
            current.baseline, current.shared_tasks = base.run_id, pair.shared_tasks
            if not pair.passed:
                current.flags.append(Flag("regression", f"vs {base.run_id}: {pair.detail}"))
            elif (
                pair.delta is not None
                and pair.delta * 100 > allowed_pp
                and pair.p_value is not None
                and pair.p_value < SIGNIFICANCE
            ):
                current.flags.append(Flag("improvement", f"vs {base.run_id}: {pair.sentence}"))
            if pair.only_in_a or pair.only_in_b:
                current.notes.append(
                    f"compared with {base.run_id} on the {pair.shared_tasks} shared "
                    f"tasks ({pair.only_in_b} only here, {pair.only_in_a} only there)"
                )
        elif index:
            current.notes.append("no earlier run judged any of its tasks: nothing to compare")
        _set_flags(current, earlier)
    return Trend(runs[-1].suite if runs else None, shown, task_strips(runs))


def _set_flags(current: TrendRun, earlier: Sequence[RunAggregate]) -> None:
    """The flags that compare a run with the latest earlier run that has the figure."""
    run = current.run
    for name, attribute, what in (
        ("served_model_changed", "served_models", "served"),
        ("fingerprint_changed", "fingerprints", "fingerprints"),
    ):
        seen: dict[str, int] = getattr(run, attribute)
        before = next((r for r in reversed(earlier) if getattr(r, attribute)), None)
        if seen and before is not None and set(seen) != set(getattr(before, attribute)):
            current.flags.append(
                Flag(
                    name,
                    f"{what} {_counted(seen)}; {before.run_id} {what} "
                    f"{_counted(getattr(before, attribute))}",
                )
            )
    _set_agent_flags(current, earlier)
    if earlier and None not in (run.link_faults, earlier[-1].link_faults):
        before = earlier[-1]
        if before.link_faults != run.link_faults:
            current.flags.append(
                Flag(
                    "link_faults_changed",
                    f"link faults {run.link_faults}; {before.run_id} link faults "
                    f"{before.link_faults}: link errors and R_fault are not comparable",
                )
            )
    previous = next((r for r in reversed(earlier) if r.slots), None)
    if run.slots and previous is not None:
        flag = _link_errors_up(previous, run)
        if flag is not None:
            current.flags.append(flag)
    previous = next((r for r in reversed(earlier) if r.tokens_n >= 2), None)
    if run.tokens_n >= 2 and previous is not None:
        flag = _tokens_changed(previous, run)
        if flag is not None:
            current.flags.append(flag)


def _set_agent_flags(current: TrendRun, earlier: Sequence[RunAggregate]) -> None:
    """``agent_changed`` against the previous run; ``client_changed`` against the latest
    earlier run of the same kind whose manifest named its client."""
    run = current.run
    who = run_identity(run)
    if earlier and run_identity(earlier[-1]).kind != who.kind:
        before = earlier[-1]
        current.flags.append(
            Flag(
                "agent_changed",
                f"agent {who.label}; {before.run_id} agent {run_identity(before).label}",
            )
        )
    same = [r for r in earlier if run_identity(r).kind == who.kind and r.client_known]
    if who.recorded and same:
        before_who = run_identity(same[-1])
        if (before_who.client, before_who.version) != (who.client, who.version):
            current.flags.append(
                Flag(
                    "client_changed",
                    f"client {who.client_label}; {same[-1].run_id} client "
                    f"{before_who.client_label}",
                )
            )


def _counted(calls: dict[str, int]) -> str:
    return ", ".join(f"{name} ({count} calls)" for name, count in sorted(calls.items()))


def _link_errors_up(before: RunAggregate, run: RunAggregate) -> Flag | None:
    from driftdesk.analysis.compare import SIGNIFICANCE
    from driftdesk.analysis.paired import stratified_permutation

    test = stratified_permutation([(before.slots, before.link_errors, run.slots, run.link_errors)])
    if test.value <= 0 or test.p_value >= SIGNIFICANCE:
        return None
    return Flag(
        "link_errors_up",
        f"{run.link_errors} link errors in {run.slots} attempts "
        f"({run.link_errors / run.slots:.1%}) vs {before.link_errors} in {before.slots} "
        f"({before.link_errors / before.slots:.1%}) in {before.run_id}; p = {test.p_value:.3g} "
        "(exact conditional test)",
    )


def _tokens_changed(before: RunAggregate, run: RunAggregate) -> Flag | None:
    mean_a, mean_b = before.tokens_per_attempt, run.tokens_per_attempt
    var_a, var_b = before.tokens_variance, run.tokens_variance
    assert mean_a is not None and mean_b is not None and var_a is not None and var_b is not None
    change = mean_b - mean_a
    relative = abs(change) / mean_a if mean_a else math.inf if change else 0.0
    error = math.sqrt(var_a / before.tokens_n + var_b / run.tokens_n)
    errors = abs(change) / error if error else math.inf if change else 0.0
    if relative < TOKENS_MIN_CHANGE or errors <= TOKENS_MIN_SE:
        return None
    shown = f"{relative:+.1%}" if math.isfinite(relative) else "from 0"
    return Flag(
        "tokens_changed",
        f"{mean_b:.0f} tokens per attempt vs {mean_a:.0f} in {before.run_id} "
        f"({shown.replace('+', '+' if change > 0 else '-')}, "
        f"{'∞' if math.isinf(errors) else f'{errors:.1f}'} standard errors; rule: ≥ "
        f"{TOKENS_MIN_CHANGE:.0%} and > {TOKENS_MIN_SE:g} SE)",
    )


# --- tasks -----------------------------------------------------------------------------------


def _class(cell: list[int] | None) -> str | None:
    if cell is None:
        return None
    n, passes = cell
    return "pass" if passes == n else "fail" if passes == 0 else "volatile"


def task_strips(runs: Sequence[RunAggregate]) -> list[TaskStrip]:
    """Every task judged by some run: its success per run and how often its class changed
    between consecutive runs that judged it; the most flipped first, then by task id."""
    order: dict[str, None] = {}
    for run in runs:
        order.update(dict.fromkeys(run.tasks))
    strips = []
    for task_id in order:
        cells = [run.tasks.get(task_id) for run in runs]
        classes = [c for c in (_class(cell) for cell in cells) if c is not None]
        flips = sum(1 for a, b in itertools.pairwise(classes) if a != b)
        success = [None if cell is None else cell[1] / cell[0] for cell in cells]
        strips.append(TaskStrip(task_id, success, flips))
    strips.sort(key=lambda s: (-s.flips, s.task_id))
    return strips


def strip_cell(success: float | None) -> str:
    if success is None:
        return NOT_JUDGED
    return next(char for char, floor in STRIP_CELLS if success >= floor)


def gating_flags(trend: Trend, run_id: str, gating: Sequence[str] = GATING_FLAGS) -> list[Flag]:
    """The flags of ``run_id`` that gate a CI job (``check --trend``)."""
    current = trend.run(run_id)
    return [] if current is None else [f for f in current.flags if f.name in gating]
