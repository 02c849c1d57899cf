"""The paired verdicts of a trend: each run against its baseline, as ``check --baseline``
concludes (``gate.regression_verdict`` on ``compare.success_delta``, the stratified
permutation test over attempts, on the shared tasks by task id).

The exact tests are most of a trend's first computing (a few ms each; a history of 200 runs
has 199), so each verdict is kept in the user's cache by the pair's per-task counts, and the
ones not kept are split between this process and one more when there are many and the
machine has two cores or more.

A kept verdict is sealed under its key (``analysis.cache_seal``) and checked for its types: one
cut short, another pair's, or of the wrong shape is computed again. The helper is waited for
only so long (``helper_wait``: its share takes about as long as this process's): one that
hangs, dies or answers garbage is ended and its share computed here."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from driftdesk.analysis import cache_store
from driftdesk.analysis.trend_data import RunAggregate

CACHE = cache_store.declare(
    cache_store.Declared(
        name="pairs",
        format=3,  # of ``PairedOutcome`` and its entry (3: the store's)
        what="pair verdicts",
        keys_on="allowed pp, both runs' ids and per-task counts",
        user_part="trend/pairs",
        keep=20_000,  # ~300 bytes each, the newest written (a history's pairs are all
        # rewritten when its runs change, so old ones are never read again)
    )
)
# Fewer verdicts to compute than this: in this process only (starting a second one, ~0.1 s,
# costs more than it saves).
PARALLEL_FROM = 24
# The helper's share is about this process's: once this process has done its own, the helper
# is waited for this many times as long, and at least ``MIN_WAIT_S`` (its start-up on a busy
# machine); ``HELPER_WAIT_ENV`` (seconds) sets the wait instead (tests).
WAIT_PER_OWN = 4.0
MIN_WAIT_S = 10.0
HELPER_WAIT_ENV = "DRIFTDESK_TREND_HELPER_TIMEOUT"

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
    paths, keys = [], []
    for base, run in pairs:
        key = [
            allowed_pp,
            runs[base].run_id,
            runs[run].run_id,
            digests[base],
            digests[run],
        ]
        paths.append(path := pair_file(key))
        keys.append(key)
        found.append(outcome_of(load_pair(path, key)))
    missing = [i for i, outcome in enumerate(found) if outcome is None]
    inputs: list[PairInput] = [
        (runs[pairs[i][0]].run_id, runs[pairs[i][0]].tasks, runs[pairs[i][1]].tasks, allowed_pp)
        for i in missing
    ]
    for i, outcome in zip(missing, _compute_all(inputs, helper) if inputs else [], strict=True):
        found[i] = outcome
        store_pair(paths[i], keys[i], asdict(outcome))
    if missing:
        CACHE.prune(paths[0].parent)
    return [outcome for outcome in found if outcome is not None]


def pair_file(key: list[Any]) -> Path:
    """Where a pair's outcome is kept: the user's cache dir, by its ``key`` (JSON-able)."""
    return CACHE.entry_file([CACHE.version(), key])


def outcome_of(data: Any) -> PairedOutcome | None:
    """``data`` (a kept verdict, or one the helper sent) as a verdict if it has exactly the
    fields and types of one; else None (computed again)."""
    if not isinstance(data, dict) or set(data) != set(PairedOutcome.__dataclass_fields__):
        return None

    def share(value: Any) -> bool:
        return value is None or type(value) in (int, float)

    def count(value: Any) -> bool:
        return type(value) is int and value >= 0

    if not (
        isinstance(data["passed"], bool)
        and isinstance(data["detail"], str)
        and isinstance(data["sentence"], str)
        and share(data["delta"])
        and share(data["p_value"])
        and all(count(data[k]) for k in ("shared_tasks", "only_in_a", "only_in_b"))
    ):
        return None
    return PairedOutcome(**data)


def tasks_digest(tasks: dict[str, list[int]]) -> str:
    """A run's per-task counts in a pair's cache key (``pair_file``)."""
    text = json.dumps(tasks, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load_pair(path: Path, key: list[Any]) -> dict[str, Any] | None:
    """A pair's paired-test outcome kept by ``store_pair`` at ``path`` (``pair_file``) under
    ``key`` (None: not kept, unreadable, not whole or another pair's)."""
    payload = CACHE.load(path, key)
    try:
        data = None if payload is None else json.loads(payload)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def store_pair(path: Path, key: list[Any], outcome: dict[str, Any]) -> None:
    """Keep a pair's outcome under the user's cache dir (derived: losing it costs a test),
    sealed under its key; pruned once for all the verdicts computed (``paired_outcomes``)."""
    CACHE.store(path, key, json.dumps(outcome, separators=(",", ":")).encode(), prune=False)


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
        self._exchange: threading.Thread | None = None
        self._answer: bytes | None = None
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
        """Hand it ``inputs`` (written, and its answer read, by a thread: a helper that stops
        reading cannot block this process); False: it cannot take them (not started)."""
        process = self.process
        if process is None or process.stdin is None:
            return False
        data = json.dumps(inputs).encode()

        def exchange() -> None:
            try:
                self._answer, _ = process.communicate(data)
            except (OSError, ValueError):  # died, or ended by ``close``
                self._answer = None

        self._exchange = threading.Thread(target=exchange, daemon=True)
        self._exchange.start()
        return True

    def result(self, count: int, wait: float | None = None) -> list[PairedOutcome] | None:
        """Its ``count`` verdicts, or None (failed, said something else, or gave no answer
        within ``wait`` seconds, default ``helper_wait(0)``: then it is ended)."""
        process, exchange = self.process, self._exchange
        if process is None or exchange is None:
            return None
        exchange.join(helper_wait(0.0) if wait is None else wait)
        if exchange.is_alive():  # hung: ended, which ends the exchange
            with contextlib.suppress(OSError):
                process.kill()
            exchange.join()
        answer = self._answer
        outcomes: list[PairedOutcome] | None = None
        if answer is not None and process.returncode == 0:
            try:
                items = json.loads(answer)
            except ValueError:
                items = None
            if isinstance(items, list):
                found = [outcome_of(item) for item in items]
                if all(o is not None for o in found):
                    outcomes = [o for o in found if o is not None]
        self.close()
        return outcomes if outcomes is not None and len(outcomes) == count else None

    def close(self) -> None:
        """Idempotent: ended (killed if it still waits, as when no verdict was missing)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        if self._exchange is not None:  # it reaps the process
            self._exchange.join()
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
    started = time.monotonic()
    mine = compute(ours)
    other = helper.result(len(theirs), helper_wait(time.monotonic() - started)) if given else None
    if other is None:
        other = compute(theirs)
    return [mine[i // 2] if i % 2 == 0 else other[i // 2] for i in range(len(inputs))]


def helper_wait(own: float) -> float:
    """How long to wait for the helper's share once this process took ``own`` seconds for
    its own (see ``WAIT_PER_OWN``)."""
    with contextlib.suppress(KeyError, ValueError):
        set_to = float(os.environ[HELPER_WAIT_ENV])
        if set_to >= 0:
            return set_to
    return max(MIN_WAIT_S, WAIT_PER_OWN * own)


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
