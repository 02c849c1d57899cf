"""Adaptive reruns: which task gets the next attempt, and when the run knows enough to stop.

Pure (no I/O, no clock): ``AdaptivePolicy`` is told the rows written so far and the attempts
started, and answers "the next (task, attempt) to start, or None" and "why the run stops".
The engine asks it only when a worker is free, so no attempt is started that would be thrown
away, and every started attempt is a real attempt that gets its row.

The design (recorded in the manifest under ``adaptive``, so ``resume`` continues it):

- a first round of ``min_repeats`` judged attempts per task;
- then each further attempt goes to the open task where it reduces uncertainty most, until the
  target holds, the budget is spent, or every task is closed:

  - ``volatile``: a task is *volatile* as soon as it has both a pass and a fail; it is
    *always-pass* (*always-fail*) once its n judged outcomes all agree and n ≥ ``stable_after``,
    the smallest n with (1 − θ)^n ≤ 1 − confidence (θ = 0.3, confidence 90 %: n = 7): were the
    other outcome's rate θ or more, n agreeing outcomes in a row would happen at most 10 % of
    the time. The next attempt goes to the open task with the fewest attempts (even coverage if
    the budget runs out);
  - ``ci=5pp``: the run's success rate (mean task success) known to ± 5 pp at 95 %, counting
    the attempts' sampling error over these tasks (``analysis.metrics.repeat_ci95``). The next
    attempt goes to the task whose attempt shrinks the variance most (v_i / (n_i (n_i + 1))).

- A task stops getting attempts once classified, at ``max_repeats`` judged attempts, or once
  its link/harness errors reach ``max_repeats``.
- Link and harness errors are real attempts (a row, an attempt number, counted against
  ``budget_attempts`` and the cost) but not outcomes of the model: they are not judged
  repeats, so the task gets another attempt in their place.
- Attempts in flight count as coming outcomes: a task that needs two more agreeing outcomes
  and has two in flight gets no third; if the target would hold once the in-flight ones land,
  nothing more starts until they have.
- Attempt numbers per task are 0..n−1: the policy hands out the lowest number with no row and
  none in flight (a gap left by an interrupted run is filled first on resume).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from driftdesk.analysis.metrics import Z95, repeat_ci95, repeat_half_width
from driftdesk.analysis.metrics import outcome_variance as task_variance
from driftdesk.rundir import latest_rows

TargetKind = Literal["ci", "volatile"]
JUDGED = ("pass", "fail")

# The volatile target's rule (see the module doc): θ and the confidence.
STABLE_OTHER_RATE = 1 / 3
STABLE_CONFIDENCE = 0.95

DEFAULT_MIN_REPEATS = 2
DEFAULT_MAX_REPEATS = 20
DEFAULT_TARGET = "ci=5pp"


def stable_after(
    other_rate: float = STABLE_OTHER_RATE, confidence: float = STABLE_CONFIDENCE
) -> int:
    """The fewest agreeing outcomes n with (1 − θ)^n ≤ 1 − confidence."""
    return math.ceil(math.log(1 - confidence) / math.log(1 - other_rate) - 1e-12)


class DesignError(ValueError):
    """An adaptive design that cannot run as asked (one line, for the CLI's exit 2)."""


@dataclass(frozen=True)
class AdaptiveDesign:
    target: TargetKind = "ci"
    ci_half_width: float = 0.05  # the ci target's ± (a fraction: 0.05 = 5 pp)
    min_repeats: int = DEFAULT_MIN_REPEATS
    max_repeats: int = DEFAULT_MAX_REPEATS
    budget_attempts: int | None = None
    budget_usd: float | None = None

    @classmethod
    def parse(
        cls,
        target: str = DEFAULT_TARGET,
        *,
        min_repeats: int = DEFAULT_MIN_REPEATS,
        max_repeats: int = DEFAULT_MAX_REPEATS,
        budget_attempts: int | None = None,
        budget_usd: float | None = None,
    ) -> AdaptiveDesign:
        """The design of the CLI's flags; ``DesignError`` (one line) for a bad combination."""
        text = target.strip().lower()
        half_width = 0.05
        kind: TargetKind
        if text == "volatile":
            kind = "volatile"
        else:
            match = re.fullmatch(r"ci=(\d+(?:\.\d+)?)(pp|%)?", text)
            if match is None:
                raise DesignError(f"--target {target!r}: use ci=<N>pp (e.g. ci=5pp) or volatile")
            half_width = float(match.group(1)) / 100
            if not 0 < half_width < 0.5:
                raise DesignError(f"--target {target!r}: the ± must be above 0 and below 50 pp")
            kind = "ci"
        if min_repeats < 1:
            raise DesignError("--min-repeats must be at least 1")
        if kind == "volatile" and min_repeats < 2:
            raise DesignError("--target volatile needs --min-repeats 2 or more")
        if max_repeats < min_repeats:
            raise DesignError(
                f"--max-repeats ({max_repeats}) must be at least --min-repeats ({min_repeats})"
            )
        if budget_attempts is not None and budget_usd is not None:
            raise DesignError("use --budget-attempts or --budget-usd, not both")
        if budget_attempts is not None and budget_attempts < 1:
            raise DesignError("--budget-attempts must be at least 1")
        if budget_usd is not None and not budget_usd > 0:
            raise DesignError("--budget-usd must be positive")
        return cls(kind, half_width, min_repeats, max_repeats, budget_attempts, budget_usd)

    @property
    def target_text(self) -> str:
        if self.target == "volatile":
            return "volatile"
        return f"ci={self.ci_half_width * 100:g}pp"

    def to_manifest(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "target": self.target_text,
            "min_repeats": self.min_repeats,
            "max_repeats": self.max_repeats,
            "budget_attempts": self.budget_attempts,
            "budget_usd": self.budget_usd,
        }
        if self.target == "volatile":
            data["rule"] = {
                "stable_after": stable_after(),
                "other_rate_below": STABLE_OTHER_RATE,
                "confidence": STABLE_CONFIDENCE,
            }
        return data

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> AdaptiveDesign:
        budget_attempts = data.get("budget_attempts")
        budget_usd = data.get("budget_usd")
        return cls.parse(
            str(data.get("target") or DEFAULT_TARGET),
            min_repeats=int(data.get("min_repeats") or DEFAULT_MIN_REPEATS),
            max_repeats=int(data.get("max_repeats") or DEFAULT_MAX_REPEATS),
            budget_attempts=int(budget_attempts) if budget_attempts is not None else None,
            budget_usd=float(budget_usd) if budget_usd is not None else None,
        )

    def describe(self) -> str:
        budget = (
            f", budget {self.budget_attempts} attempts"
            if self.budget_attempts is not None
            else f", budget ${self.budget_usd:g}"
            if self.budget_usd is not None
            else ""
        )
        return (
            f"adaptive: target {self.target_text}, {self.min_repeats}..{self.max_repeats} "
            f"repeats per task{budget}"
        )


@dataclass
class TaskTally:
    passes: int = 0
    fails: int = 0
    errors: int = 0  # link and harness errors: real attempts, not judged
    in_flight: int = 0
    numbers: set[int] = field(default_factory=set)  # attempt numbers with a row or in flight

    @property
    def judged(self) -> int:
        return self.passes + self.fails

    @property
    def coming(self) -> int:
        """Judged outcomes once the attempts in flight land (an in-flight one may be an error,
        then the task is asked again)."""
        return self.judged + self.in_flight

    def next_number(self) -> int:
        number = 0
        while number in self.numbers:
            number += 1
        return number


@dataclass(frozen=True)
class TaskState:
    """What the live view shows for a task: open or closed, and why."""

    task_id: str
    n: int  # judged attempts
    passes: int
    errors: int
    in_flight: int
    open: bool
    why: str  # "volatile", "always-pass", "first round", "3 of 7 agreeing"...


@dataclass(frozen=True)
class Progress:
    """The target's progress, for the headline (``AdaptiveProgress`` carries it to a face)."""

    target: str
    attempts: int  # rows so far (every real attempt) + in flight
    budget_attempts: int | None
    spent_usd: float | None
    budget_usd: float | None
    ci_half_width: float | None  # the run's success CI half-width now (None before 1 per task)
    success: float | None
    ci95: tuple[float, float] | None
    open_tasks: int
    volatile_tasks: int
    stop_reason: str | None
    attempts_bound: int  # the attempts the run makes at most, as known now


class AdaptivePolicy:
    """The allocation state of one adaptive run (see the module doc).

    Each answer costs O(log T) for T tasks, not O(T): the open tasks wait in a heap by priority
    (an entry is stale once its task's tally changed: skipped when it comes up), and the ci
    target's sums are kept per task as its tally changes."""

    def __init__(
        self,
        design: AdaptiveDesign,
        task_ids: Sequence[str],
        rows: Iterable[dict[str, Any]] = (),
        *,
        cost_of: Callable[[dict[str, Any]], float] | None = None,
    ) -> None:
        """``rows``: the run's attempt rows so far (the last row of a slot wins); ``cost_of``:
        a row's cost in USD (needed with ``budget_usd``)."""
        if design.budget_usd is not None and cost_of is None:
            raise DesignError("--budget-usd needs the model's price")
        self.design = design
        self.task_ids = list(task_ids)
        self._order = {t: i for i, t in enumerate(self.task_ids)}
        self.tallies = {t: TaskTally() for t in self.task_ids}
        self._cost_of = cost_of
        self._stable_after = stable_after()
        self.rows = 0
        self.spent_usd = 0.0
        self.stop_reason: str | None = None
        self._in_flight = 0
        self._versions = dict.fromkeys(self.task_ids, 0)
        self._queue: list[tuple[int, float, int, int, str]] = []  # (phase, key, order, version, id)
        self._gapped: set[str] = set()  # tasks with a hole in their attempt numbers
        # The ci target's sums over tasks (judged, and projected with attempts in flight):
        # Σ p̂_i, Σ v_i / n_i, tasks without a count; each task's last share, to take back.
        self._sums = {False: [0.0, 0.0, 0], True: [0.0, 0.0, 0]}
        self._shares: dict[tuple[str, bool], tuple[float, float] | None] = {}
        for (task_id, attempt), row in latest_rows(rows).items():
            if task_id in self.tallies:
                self.tallies[task_id].numbers.add(attempt)
                self._count(task_id, row)
        for task_id in self.task_ids:
            self._changed(task_id)

    # --- what the engine tells it -------------------------------------------------------------

    def _count(self, task_id: str, row: dict[str, Any]) -> None:
        tally = self.tallies[task_id]
        outcome = row.get("outcome")
        if outcome == "pass":
            tally.passes += 1
        elif outcome == "fail":
            tally.fails += 1
        else:
            tally.errors += 1
        self.rows += 1
        if self._cost_of is not None:
            self.spent_usd += self._cost_of(row)

    def finished(self, row: dict[str, Any]) -> None:
        """An attempt's row is on disk."""
        task_id = str(row["task_id"])
        tally = self.tallies[task_id]
        if tally.in_flight:
            tally.in_flight -= 1
            self._in_flight -= 1
        tally.numbers.add(int(row["attempt"]))
        self._count(task_id, row)
        self._changed(task_id)

    def abandoned(self, task_id: str, attempt: int) -> None:
        """An attempt ended without a row (cancelled): its number is free again."""
        tally = self.tallies[task_id]
        if tally.in_flight:
            tally.in_flight -= 1
            self._in_flight -= 1
        tally.numbers.discard(attempt)
        self._changed(task_id)

    def _changed(self, task_id: str) -> None:
        """Its tally changed: a new queue entry (the old one is stale), new ci shares."""
        tally = self.tallies[task_id]
        version = self._versions[task_id] = self._versions[task_id] + 1
        if tally.numbers and max(tally.numbers) + 1 > len(tally.numbers):
            self._gapped.add(task_id)
        else:
            self._gapped.discard(task_id)
        order = self._order[task_id]
        if self._in_first_round(task_id):
            heapq.heappush(self._queue, (0, float(tally.coming), order, version, task_id))
        elif self._wants_more(task_id):
            key = -self._variance_drop(task_id) if self.design.target == "ci" else tally.coming
            heapq.heappush(self._queue, (1, float(key), order, version, task_id))
        for projected in (False, True):
            sums = self._sums[projected]
            shares = [(self._share(tally, projected), 1)]
            if (task_id, projected) in self._shares:  # take its last share back
                shares.append((self._shares[(task_id, projected)], -1))
            for share, sign in shares:
                if share is None:
                    sums[2] += sign
                else:
                    sums[0] += sign * share[0]
                    sums[1] += sign * share[1]
            self._shares[(task_id, projected)] = shares[0][0]

    # --- what it answers ----------------------------------------------------------------------

    def next_slot(self) -> tuple[str, int] | None:
        """The (task, attempt) to start now, reserved as in flight; None: start nothing now
        (``stop_reason`` says why when the run is done, else in-flight attempts may reopen)."""
        task_id = self._choose()
        if task_id is None:
            return None
        tally = self.tallies[task_id]
        number = tally.next_number()
        tally.numbers.add(number)
        tally.in_flight += 1
        self._in_flight += 1
        self._changed(task_id)
        return task_id, number

    def _top(self) -> tuple[int, str] | None:
        """(phase, task) of the queue's first entry still current (stale ones are dropped)."""
        queue = self._queue
        while queue:
            phase, _, _, version, task_id = queue[0]
            if version == self._versions[task_id]:
                return phase, task_id
            heapq.heappop(queue)
        return None

    def _choose(self) -> str | None:
        if self._gapped:  # an interrupted run's holes: filled first, so numbers stay 0..n−1
            return min(self._gapped, key=self._order.__getitem__)
        budget = self._budget_problem()
        top = self._top()
        if top is not None and top[0] == 0:  # the first round
            if budget is not None:
                self._stop(budget)
                return None
            return top[1]
        if self.design.target == "ci" and self._ci_met(projected=True):
            self._stop(self._ci_text("target met"))
            return None
        if top is None:
            self._stop(self._closed_text())
            return None
        if budget is not None:
            self._stop(budget)
            return None
        return top[1]

    def _stop(self, reason: str) -> None:
        """Nothing more starts; once nothing is in flight, the run is done for ``reason``."""
        if self._in_flight == 0 and self.stop_reason is None:
            self.stop_reason = reason

    def _in_first_round(self, task_id: str) -> bool:
        tally = self.tallies[task_id]
        return tally.coming < self.design.min_repeats and not self._error_capped(task_id)

    def _error_capped(self, task_id: str) -> bool:
        """Its errors reached ``max_repeats``, or would if those in flight failed too."""
        tally = self.tallies[task_id]
        return tally.errors + tally.in_flight >= self.design.max_repeats

    def _wants_more(self, task_id: str) -> bool:
        """Open: not classified, under ``max_repeats`` (counting attempts in flight)."""
        tally = self.tallies[task_id]
        if tally.coming >= self.design.max_repeats or self._error_capped(task_id):
            return False
        if self.design.target == "volatile":
            if tally.passes and tally.fails:
                return False
            return tally.coming < self._stable_after
        return True

    def _budget_problem(self) -> str | None:
        design = self.design
        used = self.rows + self._in_flight
        if design.budget_attempts is not None and used >= design.budget_attempts:
            return f"budget spent: {used} of {design.budget_attempts} attempts"
        if design.budget_usd is not None:
            per_attempt = self.spent_usd / self.rows if self.rows else 0.0
            projected = self.spent_usd + (self._in_flight + 1) * per_attempt
            if projected > design.budget_usd:
                return f"budget spent: ${self.spent_usd:.4f} of ${design.budget_usd:g}"
        return None

    def in_flight(self) -> int:
        return self._in_flight

    # --- the ci target ------------------------------------------------------------------------

    @staticmethod
    def _count_of(tally: TaskTally, projected: bool) -> tuple[int, int]:
        """(n, passes); ``projected`` counts attempts in flight as coming (with the task's
        current pass rate), so a target they would meet starts nothing more."""
        n = tally.coming if projected else tally.judged
        passes = tally.passes
        if projected and tally.judged:
            passes = round(tally.passes * n / tally.judged)
        return n, passes

    def _share(self, tally: TaskTally, projected: bool) -> tuple[float, float] | None:
        """The task's p̂ and v / n in ``repeat_ci95``'s sums; None before it has a count."""
        n, passes = self._count_of(tally, projected)
        return None if n <= 0 else (passes / n, task_variance(passes, n) / n)

    def _counts(self, projected: bool) -> list[tuple[int, int]]:
        return [self._count_of(tally, projected) for tally in self.tallies.values()]

    def interval(self) -> tuple[float, float, float] | None:
        """(success, low, high) of the run now (judged attempts only)."""
        return repeat_ci95(self._counts(projected=False))

    def _ci_met(self, *, projected: bool) -> bool:
        """``repeat_half_width`` ≤ the target, from the kept sums (the same arithmetic)."""
        _, variance, uncounted = self._sums[projected]
        if uncounted or not self.task_ids:
            return False
        half = Z95 * math.sqrt(max(variance, 0.0)) / len(self.task_ids)
        return half <= self.design.ci_half_width

    def _variance_drop(self, task_id: str) -> float:
        tally = self.tallies[task_id]
        n = max(tally.coming, 1)
        return task_variance(tally.passes, tally.judged) / (n * (n + 1))

    def _ci_text(self, prefix: str) -> str:
        found = repeat_half_width(self._counts(projected=False))
        width = "?" if found is None else f"{found[1] * 100:.1f}"
        return f"{prefix}: success ± {width} pp ≤ {self.design.ci_half_width * 100:g} pp"

    def _closed_text(self) -> str:
        if self.design.target == "volatile":
            return "target met: every task classified (or at --max-repeats)"
        return self._ci_text("every task at --max-repeats") + " not reached"

    # --- for the live view --------------------------------------------------------------------

    def task_state(self, task_id: str) -> TaskState:
        tally = self.tallies[task_id]
        why = self._why(task_id)
        is_open = self.stop_reason is None and (
            self._in_first_round(task_id) or (self._wants_more(task_id) and why != "")
        )
        return TaskState(
            task_id,
            tally.judged,
            tally.passes,
            tally.errors,
            tally.in_flight,
            is_open,
            why or "open",
        )

    def _why(self, task_id: str) -> str:
        tally = self.tallies[task_id]
        design = self.design
        if tally.passes and tally.fails and design.target == "volatile":
            return "volatile"
        if tally.errors >= design.max_repeats:
            return f"stopped: {tally.errors} link/harness errors"
        if tally.judged >= design.max_repeats:
            return "at --max-repeats"
        if tally.judged < design.min_repeats:
            return "first round"
        if design.target == "volatile":
            need = self._stable_after
            if tally.judged >= need:
                return "always-pass" if tally.passes else "always-fail"
            agree = "passes" if tally.passes else "fails"
            return f"{tally.judged} of {need} agreeing {agree}"
        v = task_variance(tally.passes, tally.judged) / max(tally.judged, 1)
        return f"variance {v:.4f}"

    def progress(self) -> Progress:
        found = self.interval()
        half = repeat_half_width(self._counts(projected=False))
        states = [self.task_state(t) for t in self.task_ids]
        return Progress(
            target=self.design.target_text,
            attempts=self.rows + self.in_flight(),
            budget_attempts=self.design.budget_attempts,
            spent_usd=self.spent_usd if self._cost_of is not None else None,
            budget_usd=self.design.budget_usd,
            ci_half_width=None if half is None else half[1],
            success=None if found is None else found[0],
            ci95=None if found is None else (found[1], found[2]),
            open_tasks=sum(1 for s in states if s.open),
            volatile_tasks=sum(1 for t in self.tallies.values() if t.passes and t.fails),
            stop_reason=self.stop_reason,
            attempts_bound=self.attempts_bound(),
        )

    def attempts_bound(self) -> int:
        """The attempts the run makes at most, as far as is known now (link errors to come
        aside: each is replaced): rows, in flight, and what each open task may still get."""
        if self.stop_reason is not None:
            return self.rows
        design = self.design
        more = 0
        for task_id, tally in self.tallies.items():
            if self._in_first_round(task_id) or self._wants_more(task_id):
                cap = design.max_repeats
                if design.target == "volatile":
                    cap = min(cap, max(self._stable_after, design.min_repeats))
                more += max(cap - tally.coming, 0)
        bound = self.rows + self._in_flight + more
        if design.budget_attempts is not None:
            bound = min(bound, max(design.budget_attempts, self.rows + self._in_flight))
        return bound

    def summary(self) -> dict[str, Any]:
        """What the manifest records when the execution ends."""
        found = self.interval()
        return {
            "stop_reason": self.stop_reason,
            "attempts": self.rows,
            "spent_usd": round(self.spent_usd, 6) if self._cost_of is not None else None,
            "success": None if found is None else round(found[0], 6),
            "ci95": None if found is None else [round(found[1], 6), round(found[2], 6)],
            "volatile_tasks": sorted(
                t for t, tally in self.tallies.items() if tally.passes and tally.fails
            ),
        }
