"""Benchmark: the live TUI while it shows a 10,000-attempt run at concurrency 256.

The real ``DriftdeskApp`` runs headless (``App.run_test``) and executes the run as
``driftdesk`` does — in a child process whose events a worker thread relays into the app
(``reruns/run_process.py``) — against the sandbox endpoint with 0.5 % injected faults (429,
500, hangs). Each round also runs the old way, the engine on the app's worker thread sharing
its GIL (``app.runs_in_child = False``), the two modes interleaved, so both print side by side
under the same load. The sandbox runs in a child process (``driftdesk sandbox``): a real provider is
remote, and in this process it would compete with the app for the GIL. While the run goes, keys
are pressed every ``--gap`` seconds (move the grid cursor, switch to Profiles and back, open
the command palette and close it) and each press is timed from the moment the key event is
sent to the end of the first screen refresh that shows its effect. Then the same presses are
timed with the run finished: the floor, on the same app and the same grid.

It also counts how often the grid and the counters are actually repainted while the Run
screen is in front (a repaint of the counters with a new attempt count, of the grid with new
cells), and prints p50/p99 latency, the repaint rate, the load average and the CPU of the app
process and of the run's child, round by round and as medians per mode.

    .venv-test/bin/python tests/benchmarks/bench_tui_live.py [--repeat 295] [--concurrency 256]
        [--rounds 3] [--gap 0.5] [--switch-interval S] [--profile FILE] [--cpython-collector]
        [--in-thread | --child-only] [--census]
        (FILE: a cProfile of the app's main thread in the first child-process round;
         --cpython-collector: CPython's garbage-collector settings, not the app's;
         --in-thread: only the old mode, --child-only: only the new one)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import load

LATENCY_TARGET_MS = 100.0
REDRAW_TARGET_PER_S = 2.0
PRESS_TIMEOUT_S = 10.0
IDLE_PRESSES = 64  # eight of each key


@dataclass
class Frames:
    """Repaints of the Run screen seen by ``Screen._compositor_refresh`` (bench-only hook)."""

    grid: list[float] = field(default_factory=list)  # grid repainted with new cells
    counters: list[float] = field(default_factory=list)  # counters repainted with a new count
    on_run_screen: list[tuple[float, float]] = field(default_factory=list)  # spans in front
    busy: tuple[float, float] = (0.0, 0.0)  # from the first row on disk to 95 % of them


@dataclass
class RoundResult:
    mode: str  # "child" (the run in a child process) or "thread" (on the app's worker thread)
    live_ms: list[float]
    idle_ms: list[float]
    by_key: dict[str, list[float]]
    grid_per_s: float
    counters_per_s: float
    worst_gap_s: float
    run_wall_s: float
    attempts: int
    cpu_s: float
    child_cpu_s: float
    status: str
    load: str
    gc_pauses_ms: list[float]  # full (generation 2) collections in the app's process, live
    peak_rss_mib: float  # this process (the app and the benchmark) so far


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


class GcPauses:
    """Times the app process's full collections: a pause of the whole interpreter, which a
    key press arriving then waits out."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._started) * 1000)


def print_census() -> None:
    """What a full collection scans now (the objects the collector tracks, frozen ones left
    out), by type, and how long one takes: what the run left in the app's heap."""
    counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
    top = ", ".join(f"{name} {n:,}" for name, n in counts.most_common(12))
    print(f"  tracked objects after the run: {sum(counts.values()):,} ({top})", flush=True)
    gc.collect()  # the run's garbage first: the second collection times the live heap alone
    started = time.perf_counter()
    gc.collect()
    print(
        f"  a full collection of what the run left: {(time.perf_counter() - started) * 1000:.0f} ms",
        flush=True,
    )


def start_sandbox(seed: int) -> tuple[subprocess.Popen[str], str]:
    """``driftdesk sandbox`` in a child process; it prints its base URL on stdout."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "sandbox", "--seed", str(seed), "--latency-ms", "20",
         "--rate-limit-rate", "0.002", "--server-error-rate", "0.002", "--timeout-rate", "0.001",
         "--retry-after", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http"):
        proc.kill()
        raise SystemExit(f"the sandbox did not start (said {base_url!r})")
    return proc, base_url


class Probe:
    """Times key presses and counts repaints through one hook on ``Screen._compositor_refresh``.

    A press is done when a refresh of the screen in front ends with its effect visible (the
    ``done`` predicate holds): that is the frame the user would see.
    """

    def __init__(self, app: Any) -> None:
        from textual.screen import Screen

        from driftdesk.tui.screens.run import RunScreen

        self.app = app
        self.frames = Frames()
        self._waiting: tuple[Callable[[], bool], asyncio.Event] | None = None
        self._painted_done = ""
        self._painted_counters: int | None = None
        self._painted_cells: int | None = None
        self._front_since: float | None = None
        original = Screen._compositor_refresh
        probe = self

        def hooked(screen: Any) -> None:
            original(screen)
            now = time.perf_counter()
            if screen is not probe.app.screen:
                return
            waiting = probe._waiting
            if waiting is not None and waiting[0]():
                probe._waiting = None
                waiting[1].set()
            if isinstance(screen, RunScreen) and screen.live is not None:
                probe._count(screen, now)

        self._original = original
        Screen._compositor_refresh = hooked  # type: ignore[method-assign]

    def close(self) -> None:
        from textual.screen import Screen

        Screen._compositor_refresh = self._original  # type: ignore[method-assign]

    def _count(self, screen: Any, now: float) -> None:
        """A frame paints what the widgets hold: a new snapshot of the grid's cells, and
        counters naming a new number of attempts done, count as repaints."""
        grid = screen.query_one("#run-grid")
        if id(grid.cells) != self._painted_cells:
            self._painted_cells = id(grid.cells)
            self.frames.grid.append(now)
        counters = screen.query_one("#run-counters")
        done = str(screen.query_one("#run-eta").content).split("/", 1)[0]
        if id(counters.content) != self._painted_counters and done != self._painted_done:
            self._painted_counters, self._painted_done = id(counters.content), done
            self.frames.counters.append(now)

    def front(self, now: float) -> None:
        """Note whether the Run screen (no modal above it) is in front from ``now`` on."""
        from driftdesk.tui.screens.run import RunScreen

        in_front = isinstance(self.app.screen, RunScreen)
        if in_front and self._front_since is None:
            self._front_since = now
        elif not in_front and self._front_since is not None:
            self.frames.on_run_screen.append((self._front_since, now))
            self._front_since = None

    def end_front(self, now: float) -> None:
        if self._front_since is not None:
            self.frames.on_run_screen.append((self._front_since, now))
            self._front_since = None

    async def painted(
        self, done: Callable[[], bool], send: Callable[[], None] | None = None
    ) -> float:
        """Milliseconds from now (``send()`` first, if given) until the end of the first refresh
        of the screen in front after which ``done()`` holds; raises TimeoutError past
        ``PRESS_TIMEOUT_S``."""
        event = asyncio.Event()
        self._waiting = (done, event)
        started = time.perf_counter()
        if send is not None:
            send()
        try:
            await asyncio.wait_for(event.wait(), PRESS_TIMEOUT_S)
        finally:
            self._waiting = None
        return (time.perf_counter() - started) * 1000

    async def press(self, key: str, done: Callable[[], bool]) -> float:
        """Send ``key`` as the terminal driver would; milliseconds until its frame."""
        from textual import events

        def send() -> None:
            key_event = events.Key(key, key if len(key) == 1 else None)
            key_event.set_sender(self.app)
            self.app._driver.send_message(key_event)

        try:
            return await self.painted(done, send)
        except TimeoutError:
            print(
                f"  press {key!r} showed no effect within {PRESS_TIMEOUT_S:g} s (effect "
                f"{'there, never painted' if done() else 'absent'}; screen "
                f"{type(self.app.screen).__name__}, focus {type(self.app.focused).__name__})",
                flush=True,
            )
            return PRESS_TIMEOUT_S * 1000


def rate(
    stamps: list[float], spans: list[tuple[float, float]], busy: tuple[float, float]
) -> tuple[float, float]:
    """Repaints per second while the Run screen was in front and rows were landing, and the
    longest gap inside such a span with no repaint (the stutter a user would see). The run's
    tail (the last attempts waiting out injected hangs) changes nothing, so it is left out."""
    spans = [(max(a, busy[0]), min(b, busy[1])) for a, b in spans if b > busy[0] and a < busy[1]]
    total = sum(end - start for start, end in spans)
    count = 0
    worst = 0.0
    for start, end in spans:
        inside = [t for t in stamps if start <= t <= end]
        count += len(inside)
        edges = [start, *inside, end]
        worst = max([worst, *(b - a for a, b in itertools.pairwise(edges))])
    return (count / total if total else 0.0), worst


def watch_rows(live: Any, frames: Frames) -> None:
    first: float | None = None
    while not live.finished:
        now = time.perf_counter()
        if first is None and live.done:
            first = now
        if first is not None and live.total and live.done >= 0.95 * live.total:
            frames.busy = (first, now)
            return
        time.sleep(0.02)
    frames.busy = (first or 0.0, time.perf_counter())


async def one_round(args: argparse.Namespace, base_url: str, out: Path, mode: str) -> RoundResult:
    from textual.command import CommandPalette

    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.run_spec import RunSpec
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL
    from driftdesk.tui.app import DriftdeskApp
    from driftdesk.tui.screens.profiles import ProfilesScreen
    from driftdesk.tui.screens.run import RunScreen
    from driftdesk.tui.widgets.attempt_grid import AttemptGrid

    app = DriftdeskApp(out_dir=out, runs_dirs=[out], start_mode="run", blink=False)
    app.tune_gc = not args.cpython_collector
    app.runs_in_child = mode == "child"
    profile = Profile(name="sim", protocol="openai", base_url=base_url, model=SIM_MODEL)
    spec = RunSpec(
        profile=profile,
        suite="basic",
        repeat=args.repeat,
        concurrency=args.concurrency,
        timeout_s=5.0,
        out_dir=out,
        api_key="sk-bench-tui-live-0123456789",
    )
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    child_before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the run's child, once reaped
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        default_interval = sys.getswitchinterval()
        if args.switch_interval:
            sys.setswitchinterval(args.switch_interval)
        probe = Probe(app)
        try:
            run_screen = app.screen
            assert isinstance(run_screen, RunScreen)
            live = app.start_run(spec)
            run_screen.show_run(live)
            grid = run_screen.query_one("#run-grid", AttemptGrid)
            log = run_screen.query_one("#run-log")
            started = time.perf_counter()
            # When rows land, seen from a thread of its own (not the app's loop under test).
            watcher = threading.Thread(target=watch_rows, args=(live, probe.frames), daemon=True)
            watcher.start()
            while not live.task_ids:  # the grid needs the run's tasks before the cursor moves
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            grid.focus()
            await pilot.pause()

            def cursor_at(row: int, col: int) -> Callable[[], bool]:
                return lambda: grid.cursor == (row, col)

            def presses() -> list[tuple[str, Callable[[], bool]]]:
                if app.screen is run_screen and app.focused is not grid:
                    grid.focus()  # the cursor keys below are the grid's
                row, col = grid.cursor
                last_row, last_col = len(grid.task_ids) - 1, max(grid.repeat - 1, 0)
                down = min(row + 1, last_row) if row < last_row else 0
                right = min(col + 1, last_col)
                sequence: list[tuple[str, Callable[[], bool]]] = []
                if row >= last_row:
                    sequence.append(("up", cursor_at(row - 1, col)))
                    row -= 1
                else:
                    sequence.append(("down", cursor_at(down, col)))
                    row = down
                if col >= last_col:
                    sequence.append(("left", cursor_at(row, col - 1)))
                else:
                    sequence.append(("right", cursor_at(row, right)))
                sequence += [
                    ("tab", lambda: app.focused is log),
                    ("shift+tab", lambda: app.focused is grid),
                    ("1", lambda: isinstance(app.screen, ProfilesScreen)),
                    ("2", lambda: app.screen is run_screen),
                    ("ctrl+p", lambda: isinstance(app.screen, CommandPalette)),
                    ("escape", lambda: app.screen is run_screen),
                ]
                return sequence

            by_key: dict[str, list[float]] = {}

            async def press_cycle(until: Callable[[], bool], count: int | None) -> list[float]:
                timings: list[float] = []
                while not until() and (count is None or len(timings) < count):
                    for key, done in presses():
                        if until() or (count is not None and len(timings) >= count):
                            break
                        probe.front(time.perf_counter())
                        timings.append(await probe.press(key, done))
                        by_key.setdefault(key, []).append(timings[-1])
                        probe.front(time.perf_counter())
                        await asyncio.sleep(args.gap)
                return timings

            with GcPauses() as gc_pauses:
                live_ms = await press_cycle(lambda: live.finished, None)
            probe.end_front(time.perf_counter())
            wall = time.perf_counter() - started
            watcher.join()
            if args.census:
                print_census()
            frames = probe.frames
            grid_rate, grid_gap = rate(frames.grid, frames.on_run_screen, frames.busy)
            counters_rate, counters_gap = rate(frames.counters, frames.on_run_screen, frames.busy)
            live_by_key, by_key = by_key, {}
            # The live cycle may stop mid-way (on Profiles, or in the palette): the idle cycle
            # starts where a cycle starts, on the Run screen.
            if isinstance(app.screen, CommandPalette):
                await pilot.press("escape")
            if app.screen is not run_screen:
                await pilot.press("2")
            await pilot.pause(0.5)
            idle_ms = await press_cycle(lambda: False, IDLE_PRESSES)
        finally:
            probe.close()
            sys.setswitchinterval(default_interval)
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    child_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (child_after.ru_utime + child_after.ru_stime) - (
        child_before.ru_utime + child_before.ru_stime
    )
    return RoundResult(
        mode=mode,
        live_ms=live_ms,
        idle_ms=idle_ms,
        by_key={
            key: [
                percentile(live_by_key[key], 50),
                percentile(by_key.get(key, []), 50),
                max(live_by_key[key], default=float("nan")),
                max(by_key.get(key, []), default=float("nan")),
            ]
            for key in live_by_key
        },
        grid_per_s=grid_rate,
        counters_per_s=counters_rate,
        worst_gap_s=max(grid_gap, counters_gap),
        run_wall_s=wall,
        attempts=live.done,
        cpu_s=cpu,
        child_cpu_s=child_cpu,
        status=live.status,
        load=load(),
        gc_pauses_ms=gc_pauses.pauses_ms,
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


def describe(label: str, values: list[float]) -> str:
    return (
        f"{label} p50 {percentile(values, 50):6.1f} ms  p99 {percentile(values, 99):6.1f} ms  "
        f"max {max(values, default=float('nan')):6.1f} ms  ({len(values)} presses)"
    )


MODE_NAMES = {"child": "run in a child process", "thread": "run on the app's thread (old)"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=295, help="34 basic tasks × this")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between presses")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--census", action="store_true", help="print the objects the run left in the app's heap"
    )
    parser.add_argument("--profile", type=Path, help="write a cProfile of the app's thread")
    parser.add_argument(
        "--switch-interval",
        type=float,
        help="the GIL switch interval while the app runs (CPython's default: 0.005); the app "
        "and the thread relaying (or running) the run share one GIL",
    )
    parser.add_argument(
        "--cpython-collector",
        action="store_true",
        help="keep CPython's garbage-collector settings (the app tunes them: tune_collector)",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument(
        "--in-thread", action="store_true", help="only the old mode: the engine on the app's thread"
    )
    only.add_argument("--child-only", action="store_true", help="only the child-process mode")
    args = parser.parse_args()
    modes = ["thread"] if args.in_thread else ["child"] if args.child_only else ["child", "thread"]

    results: list[RoundResult] = []
    with tempfile.TemporaryDirectory(prefix="bench-tui-live-") as tmp:
        # A throwaway home: the app reads profiles and writes nothing of the user's.
        os.environ.update(
            HOME=tmp,
            XDG_CONFIG_HOME=f"{tmp}/.config",
            XDG_DATA_HOME=f"{tmp}/.local/share",
            XDG_STATE_HOME=f"{tmp}/.local/state",
            XDG_CACHE_HOME=f"{tmp}/.cache",
        )
        os.chdir(tmp)
        sandbox, base_url = start_sandbox(args.seed)
        try:
            for round_ in range(args.rounds):
                # Interleaved, the first mode alternating: neither always runs on a cooler machine.
                order = modes if round_ % 2 == 0 else modes[::-1]
                for mode in order:
                    out = Path(tmp) / f"runs-{round_}-{mode}"
                    out.mkdir()
                    profiler = None
                    if args.profile is not None and round_ == 0 and mode == modes[0]:
                        import cProfile

                        profiler = cProfile.Profile()
                        profiler.enable()
                    result = asyncio.run(one_round(args, base_url, out, mode))
                    if profiler is not None:
                        profiler.disable()
                        profiler.dump_stats(args.profile)
                    results.append(result)
                    print(
                        f"round {round_ + 1}, {MODE_NAMES[mode]}: {result.attempts:,} attempts at "
                        f"concurrency {args.concurrency} in {result.run_wall_s:.0f} s "
                        f"({result.status}), CPU: app process {result.cpu_s:.0f} s, run's child "
                        f"{result.child_cpu_s:.0f} s   [{result.load}]\n"
                        f"  {describe('key press, live run:', result.live_ms)}\n"
                        f"  {describe('key press, idle:    ', result.idle_ms)}\n"
                        f"  repaints while the Run screen is in front: grid "
                        f"{result.grid_per_s:.1f}/s, counters {result.counters_per_s:.1f}/s, "
                        f"longest gap {result.worst_gap_s:.2f} s\n"
                        f"  full GC pauses in the app during the run: {len(result.gc_pauses_ms)}, "
                        f"max {max(result.gc_pauses_ms, default=0):.0f} ms, total "
                        f"{sum(result.gc_pauses_ms):.0f} ms; peak RSS of the app's process so far "
                        f"{result.peak_rss_mib:.0f} MiB\n  by key, p50 (live/idle) "
                        "and max (live/idle): "
                        + ", ".join(
                            f"{k} {a:.0f}/{b:.0f} max {c:.0f}/{d:.0f} ms"
                            for k, (a, b, c, d) in result.by_key.items()
                        ),
                        flush=True,
                    )
        finally:
            sandbox.terminate()
            sandbox.wait(10)

    def median(mode: str, pick: Callable[[RoundResult], float]) -> float:
        return statistics.median(pick(r) for r in results if r.mode == mode)

    def p(q: float) -> Callable[[RoundResult], float]:
        return lambda r: percentile(r.live_ms, q)

    def idle(q: float) -> Callable[[RoundResult], float]:
        return lambda r: percentile(r.idle_ms, q)

    rows: list[tuple[str, Callable[[RoundResult], float], str]] = [
        ("key press p50, live run", p(50), "ms"),
        ("key press p99, live run", p(99), "ms"),
        ("key press p50, idle (floor)", idle(50), "ms"),
        ("key press p99, idle (floor)", idle(99), "ms"),
        ("grid repaints", lambda r: r.grid_per_s, "/s"),
        ("counter repaints", lambda r: r.counters_per_s, "/s"),
        ("longest repaint gap", lambda r: r.worst_gap_s, "s"),
        ("run wall time", lambda r: r.run_wall_s, "s"),
        ("CPU of the app process", lambda r: r.cpu_s, "s"),
    ]
    print(f"\nmedians of {args.rounds} rounds" + "".join(f"{m:>16}" for m in modes))
    for label, pick, unit in rows:
        print(f"  {label:<30}" + "".join(f"{median(m, pick):13.1f} {unit:<2}" for m in modes))
    if len(modes) == 2:
        for label, pick in (("p50", p(50)), ("p99", p(99))):
            ratio = median("thread", pick) / median("child", pick)
            print(f"  key press {label}, live: the child-process mode is {ratio:.1f}× faster")
    verdicts = []
    for mode in modes:
        ok = (
            median(mode, p(50)) < LATENCY_TARGET_MS
            and median(mode, p(99)) < LATENCY_TARGET_MS
            and median(mode, lambda r: r.grid_per_s) >= REDRAW_TARGET_PER_S
            and median(mode, lambda r: r.counters_per_s) >= REDRAW_TARGET_PER_S
            and all(r.status == "completed" for r in results if r.mode == mode)
        )
        verdicts.append(ok)
        print(
            f"target ({MODE_NAMES[mode]}): key press < {LATENCY_TARGET_MS:g} ms at p50 and p99, "
            f"grid and counters >= {REDRAW_TARGET_PER_S:g}/s: {'OK' if ok else 'MISSED'}"
        )
    print(f"[{load()}]")
    return 0 if verdicts[0] else 1


if __name__ == "__main__":
    raise SystemExit(main())
