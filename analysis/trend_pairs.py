"""The paired verdicts of a trend: each run against its baseline, as ``check --baseline``
concludes (``gate.regression_verdict`` on ``compare.success_delta``, the stratified
permutation test over attempts, on the shared tasks by task id).

The exact tests are most of a trend's first computing (a few ms each; a history of 200 runs
has 199), so each verdict is kept in the user's cache by the pair's per-task counts, and the
ones not kept are split between this process and one more when there are many and the
machine has two cores or more."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from driftdesk.analysis.code_version import code_version
from driftdesk.analysis.trend_data import RunAggregate
from driftdesk.paths import caches_enabled

CACHE_PAIR_VERSION = 2  # of ``PairedOutcome`` (with the code's: see ``pair_file``)
# Fewer verdicts to compute than this: in this process only (starting a second one, ~0.1 s,
# costs more than it saves).
PARALLEL_FROM = 24
KEEP_PAIRS = 20_000  # verdicts kept (~300 bytes each), the newest written

# What computing a verdict needs of a pair: the baseline's id, both runs' per-task
# [judged, passes], the allowed drop in pp.
PairInput = tuple[str, dict[str, list[int]], dict[str, list[int]], float]


@dataclass
class PairedOutcome:
    """What ``check --baseline`` concludes of a run against its baseline (JSON-able)."""

    passed: bool
    detail: str
    delta: float | None
    p_value: float | None
    sentence: str
    shared_tasks: int
    only_in_a: int
    only_in_b: int


def paired_outcomes(
    runs: Sequence[RunAggregate],
    pairs: Sequence[tuple[int, int]],
    digests: Sequence[str],
    allowed_pp: float,
    helper: Helper | None = None,
) -> list[PairedOutcome]:
    """The verdict of each (baseline index, run index) of ``pairs`` over ``runs``, in order;
    ``digests``: each run's ``tasks_digest``; ``helper``: see ``helper_for``."""
    found: list[PairedOutcome | None] = []
    paths = []
    for base, run in pairs:
        key = [
            code_version(f"pairs:{CACHE_PAIR_VERSION}"),
            allowed_pp,
            runs[base].run_id,
            runs[run].run_id,
            digests[base],
            digests[run],
        ]
        paths.append(path := pair_file(key))
        known = load_pair(path)
        outcome = None
        if known is not None:
            with contextlib.suppress(TypeError):
                outcome = PairedOutcome(**known)
        found.append(outcome)
    missing = [i for i, outcome in enumerate(found) if outcome is None]
    inputs: list[PairInput] = [
        (runs[pairs[i][0]].run_id, runs[pairs[i][0]].tasks, runs[pairs[i][1]].tasks, allowed_pp)
        for i in missing
    ]
    for i, outcome in zip(missing, _compute_all(inputs, helper) if inputs else [], strict=True):
        found[i] = outcome
        store_pair(paths[i], asdict(outcome))
    if missing:
        _prune(paths[0].parent)
    return [outcome for outcome in found if outcome is not None]


def pair_file(key: list[Any]) -> Path:
    """Where a pair's outcome is kept: the user's cache dir, by its ``key`` (JSON-able)."""
    from driftdesk.paths import cache_dir

    text = json.dumps(key, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return cache_dir() / "trend" / "pairs" / f"{digest[:40]}.json"


def tasks_digest(tasks: dict[str, list[int]]) -> str:
    """A run's per-task counts in a pair's cache key (``pair_file``)."""
    text = json.dumps(tasks, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load_pair(path: Path) -> dict[str, Any] | None:
    """A pair's paired-test outcome kept by ``store_pair`` at ``path`` (``pair_file``; None:
    not kept, or unreadable)."""
    if not caches_enabled():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def store_pair(path: Path, outcome: dict[str, Any]) -> None:
    """Keep a pair's outcome under the user's cache dir (derived: losing it costs a test)."""
    from driftdesk.fileio import atomic_write_text

    if not caches_enabled():
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            path, json.dumps(outcome, separators=(",", ":")), mode=0o600, durable=False
        )


def _prune(folder: Path) -> None:
    """The newest ``KEEP_PAIRS`` verdicts kept (a history's pairs are all rewritten when its
    runs change, so old ones are never read again)."""
    entries = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                entries.append((entry.stat().st_mtime_ns, entry.path))
    for _, old in sorted(entries, reverse=True)[KEEP_PAIRS:]:
        with contextlib.suppress(OSError):
            os.unlink(old)


class Helper:
    """A second Python process for the verdicts (this module's ``__main__``), started before
    the runs are read so that its start-up overlaps the read; given its share on its stdin.

    A plain subprocess, not multiprocessing: a spawned worker would import the caller's
    ``__main__`` again (a user's script without a guard would run twice), and a forked one
    would copy DuckDB's threads' held locks. It gets no environment but where Python finds
    driftdesk: it needs nothing else (no key, no home)."""

    def __init__(self) -> None:
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PYTHONSAFEPATH": "1"}
        self.process: subprocess.Popen[bytes] | None
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            self.process = None

    def give(self, inputs: list[PairInput]) -> bool:
        """Hand it ``inputs``; False: it cannot take them (not started, or died)."""
        process = self.process
        if process is None or process.stdin is None:
            return False
        try:
            process.stdin.write(json.dumps(inputs).encode())
            process.stdin.close()
        except OSError:
            self.close()
            return False
        return True

    def result(self, count: int) -> list[PairedOutcome] | None:
        """Its ``count`` verdicts, or None (failed, or said something else)."""
        process = self.process
        if process is None or process.stdout is None:
            return None
        outcomes: list[PairedOutcome] | None
        try:
            outcomes = [PairedOutcome(**item) for item in json.loads(process.stdout.read())]
        except (OSError, ValueError, TypeError):
            outcomes = None
        if process.wait() != 0:
            outcomes = None
        self.close()
        return outcomes if outcomes is not None and len(outcomes) == count else None

    def close(self) -> None:
        """Idempotent: ended (killed if it still waits, as when no verdict was missing)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@contextlib.contextmanager
def helper_for(runs: int) -> Iterator[Helper | None]:
    """A ``Helper`` when a trend of ``runs`` runs may have enough verdicts to compute and
    the machine has a second core; ended on exit."""
    helper = Helper() if runs > PARALLEL_FROM and _cores() >= 2 else None
    try:
        yield helper
    finally:
        if helper is not None:
            helper.close()


def _compute_all(inputs: list[PairInput], helper: Helper | None) -> list[PairedOutcome]:
    """``compute`` of each input; every other one by ``helper`` when worth it (a helper that
    cannot take its share, or fails, leaves it to this process)."""
    if helper is None or len(inputs) < PARALLEL_FROM:
        return compute(inputs)
    theirs, ours = inputs[1::2], inputs[0::2]
    given = helper.give(theirs)
    mine = compute(ours)
    other = helper.result(len(theirs)) if given else None
    if other is None:
        other = compute(theirs)
    return [mine[i // 2] if i % 2 == 0 else other[i // 2] for i in range(len(inputs))]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def compute(inputs: Sequence[PairInput]) -> list[PairedOutcome]:
    """The verdict of each pair, computed (top-level: a second process runs it)."""
    from driftdesk.analysis.compare import success_delta
    from driftdesk.analysis.gate import regression_verdict

    outcomes = []
    for base_id, base_tasks, run_tasks, allowed_pp in inputs:
        shared = sorted(base_tasks.keys() & run_tasks.keys())
        counts = ((base_tasks[t], run_tasks[t]) for t in shared)
        delta = success_delta([(na, pa, nb, pb) for (na, pa), (nb, pb) in counts])
        only_in_a, only_in_b = len(base_tasks) - len(shared), len(run_tasks) - len(shared)
        condition = regression_verdict(base_id, delta, allowed_pp, only_in_a, only_in_b)
        outcomes.append(
            PairedOutcome(
                condition.passed,
                condition.detail,
                delta.value,
                delta.p_value,
                delta.sentence,
                len(shared),
                only_in_a,
                only_in_b,
            )
        )
    return outcomes


if __name__ == "__main__":  # a ``Helper``: imports first, then waits for its share
    from driftdesk.analysis import compare, gate  # noqa: F401

    given = json.loads(sys.stdin.buffer.read())
    found = compute([(base_id, base, run, allowed) for base_id, base, run, allowed in given])
    sys.stdout.write(json.dumps([asdict(outcome) for outcome in found]))
