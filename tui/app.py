"""The driftdesk workbench: a Textual face over the providers, reruns and analysis cores.

Runs execute in child processes (``reruns.run_process``: the engine gets a core of its own
instead of sharing this process's GIL with the UI); a thread worker per run, with its own
asyncio loop, relays the child's events into a ``LiveRun`` and the screens redraw from it on a
timer. One ``Worker.StateChanged`` handler turns any worker failure into a notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import events, on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.worker import Worker, WorkerState

from driftdesk.tui.commands import WorkbenchCommands
from driftdesk.tui.errors import plain_error
from driftdesk.tui.screens.base import PaletteCommand, WorkbenchScreen
from driftdesk.tui.screens.modals import HelpScreen
from driftdesk.tui.screens.profiles import ProfilesScreen
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.screens.volatility import VolatilityScreen
from driftdesk.tui.state import LiveRun

FOLLOW_SECONDS = 1.0  # how often the runs folders are looked at for runs started elsewhere
YOUNG_GC_THRESHOLD = 10_000  # allocations between collections of the youngest generation
SIMULATED_BANNER = "DEMO — the model is simulated by a local sandbox endpoint (no network, no key)"


@dataclass
class RunEnded(Message):
    """A run's worker finished (completed, interrupted or failed)."""

    live: LiveRun


@dataclass
class RunFollowed(Message):
    """A run another process executes was found in the runs folders and is followed."""

    live: LiveRun


@dataclass
class DemoReady(Message):
    spec: Any
    note: str


class DriftdeskApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "driftdesk"
    MODES: ClassVar[dict[str, Any]] = {
        "profiles": ProfilesScreen,
        "run": RunScreen,
        "volatility": VolatilityScreen,
    }
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "switch_mode('profiles')", "Profiles", id="app.profiles"),
        Binding("2", "switch_mode('run')", "Run", id="app.run"),
        Binding("3", "switch_mode('volatility')", "Volatility", id="app.volatility"),
        Binding("f1,question_mark", "help", "Help", id="app.help"),
        Binding("q", "ask_quit", "Quit", id="app.quit", tooltip="Quit (asks while a run is live)"),
        Binding(
            "ctrl+q",
            "quit",
            "Cancel runs and quit",
            id="app.quit_now",
            show=False,
            priority=True,
        ),
    ]

    def __init__(
        self,
        *,
        runs_dirs: list[Path] | None = None,
        out_dir: Path | None = None,
        start_mode: str | None = None,
        demo: bool = False,
        demo_repeat: int = 5,
        demo_concurrency: int = 8,
        demo_latency_ms: float | None = None,
        blink: bool = True,
    ) -> None:
        super().__init__()
        from driftdesk import paths

        # One rule with the CLI: new runs go to ./runs ($DRIFTDESK_RUNS_DIR), reruns beside
        # their source; runs older versions left in the data dir are still listed.
        self.out_dir = out_dir or paths.runs_dir()
        dirs = [self.out_dir, *(runs_dirs or [paths.data_dir() / "runs"])]
        self.runs_dirs: list[Path] = list(dict.fromkeys(p.resolve() for p in dirs))
        self.start_mode = start_mode
        self.export_dir = Path.cwd() / "driftdesk-exports"
        self.demo = demo
        self.demo_repeat = demo_repeat
        self.demo_concurrency = demo_concurrency
        self.demo_latency_ms = demo_latency_ms
        self.demo_run: LiveRun | None = None
        # The demo's profile and throwaway key live only in this process (never saved).
        self.demo_profile: Any = None
        self.demo_api_key: str | None = None
        self.demo_spec: Any = None
        self.blink = blink  # tests and screenshots turn the cursor blink off
        self.live_runs: list[LiveRun] = []
        # Said on the terminal once the app has exited (the resume command of a cancelled run).
        self.exit_messages: list[str] = []
        # Runs the user chose to keep running after the app exits (finished in the terminal).
        self.kept_runs: list[LiveRun] = []
        self.sandbox: Any = None
        # Runs execute in a child process; False runs the engine on the worker thread in this
        # process (as before; bench_tui_live.py --in-thread compares the two).
        self.runs_in_child = True
        # The collector is tuned while the app runs (``tune_collector``); False keeps CPython's
        # settings (bench_tui_live.py --cpython-collector compares the two).
        self.tune_gc = True
        self._gc_thresholds: tuple[int, int, int] | None = None  # CPython's, while the app runs
        if demo:
            self.title = "driftdesk demo"
        self._watch: Any = None  # tui.follow.RunWatch, made on the first look

    # -- start-up --------------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.demo:
            self.switch_mode("run")
            self.start_demo()
        else:
            self.switch_mode(self.start_mode or "volatility")
        self.call_after_refresh(self._build_screens)
        self.set_interval(FOLLOW_SECONDS, self._follow_tick)

    async def _build_screens(self) -> None:
        """Build the screens not shown yet, once the first one is drawn. Built on its first
        visit, a screen cost that key press 156-297 ms during a big run (bench_tui_live.py):
        Textual composed it, then re-parsed the whole stylesheet and restyled every widget of
        the app. A screen built here reads nothing until it is shown (``is_current``)."""
        shown = self.current_mode
        mounts = [self.switch_mode(mode) for mode in self.MODES if mode != shown]
        self.switch_mode(shown)  # in the same callback: no other screen is ever drawn
        for mount in mounts:
            await mount
        # After the build: the screens' objects, alive until exit, are frozen with start-up's.
        if self.tune_gc:
            self._gc_thresholds = tune_collector()

    def on_unmount(self) -> None:
        if self._gc_thresholds is not None:
            restore_collector(self._gc_thresholds)
            self._gc_thresholds = None

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        # Only a focused field draws its cursor, so stopping the blink on focus is enough
        # for pictures that do not depend on the half-second they are taken in.
        if not self.blink and getattr(event.widget, "cursor_blink", False):
            event.widget.cursor_blink = False  # type: ignore[attr-defined]

    # -- runs ----------------------------------------------------------------------------------
    def start_run(self, spec: Any, label: str | None = None) -> LiveRun:
        """Execute ``spec`` (a ``reruns.run_spec.RunSpec``) in a worker; returns its live state."""
        from driftdesk.reruns.run_process import new_run_request
        from driftdesk.reruns.run_start import execute_run

        spec = self._with_demo_profile(spec)
        live = LiveRun(label=label or f"run {len(self.live_runs) + 1}")
        self.live_runs.append(live)
        if self.runs_in_child:
            request = new_run_request(spec)
            live.worker = self._execute_run(live, lambda: _in_child(request, live))
        else:
            live.worker = self._execute_run(live, lambda: execute_run(spec, live))
        return live

    def resume_run(
        self, run_dir: Path, *, retry_link_errors: bool = False, api_key: str | None = None
    ) -> LiveRun:
        """Run the missing slots of an interrupted ``run_dir`` (``reruns.run_start.resume_run``)
        through the same worker path as a new run; returns its live state."""
        from driftdesk.reruns.run_start import resume_run
        from driftdesk.rundir import read_manifest

        label = f"resume of {run_dir.name}" + (" (+link errors)" if retry_link_errors else "")
        profile = None
        if api_key is None and self._is_demo_profile(read_manifest(run_dir).get("profile")):
            profile, api_key = self.demo_profile, self.demo_api_key  # the demo's, in memory
        live = LiveRun(label=label, run_dir=Path(run_dir).resolve())  # executing from now on
        self.live_runs.append(live)

        def start() -> Coroutine[Any, Any, Any]:
            # (on the worker thread) what was finished before the interrupt shows as done
            from driftdesk.reruns.run_process import resume_request
            from driftdesk.reruns.rundir import read_attempt_rows
            from driftdesk.rundir import latest_rows

            live.add_earlier_rows(list(latest_rows(read_attempt_rows(run_dir, [])).values()))
            if self.runs_in_child:
                request = resume_request(
                    run_dir, retry_link_errors=retry_link_errors, api_key=api_key, profile=profile
                )
                return _in_child(request, live)
            return resume_run(
                run_dir,
                live,
                retry_link_errors=retry_link_errors,
                api_key=api_key,
                profile=profile,
                probe=True,
            )

        live.worker = self._execute_run(live, start)
        return live

    def _is_demo_profile(self, name: object) -> bool:
        return self.demo_profile is not None and name == self.demo_profile.name

    def _with_demo_profile(self, spec: Any) -> Any:
        """A spec naming the demo's profile runs with the in-memory profile and key."""
        import dataclasses

        if isinstance(spec.profile, str) and self._is_demo_profile(spec.profile):
            return dataclasses.replace(spec, profile=self.demo_profile, api_key=self.demo_api_key)
        return spec

    # Runs belong to the App, never to a screen: a worker dies with the node that started it.
    # Not exclusive: a second run must never cancel the first.
    @work(thread=True, group="runs", exit_on_error=False, name="the run")
    def _execute_run(self, live: LiveRun, start: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        loop = asyncio.new_event_loop()
        try:
            live.loop = loop
            live.task = loop.create_task(start())
            try:
                loop.run_until_complete(live.task)
            except asyncio.CancelledError:
                live.status = "interrupted" if not live.finished else live.status
            except Exception as exc:
                live.mark_failed(plain_error(exc))
                raise
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            live.loop = None
            self.post_message(RunEnded(live))

    def rerun_tasks(
        self,
        manifest: dict[str, Any],
        tasks: list[str],
        source: Path | None = None,
        profile: str | None = None,
    ) -> LiveRun:
        """A new run of ``tasks`` under the same conditions as the run of ``manifest``, beside
        its ``source`` run dir (``profile`` overrides the manifest's, e.g. for imported runs)."""
        from driftdesk.reruns.run_spec import RunSpec

        out_dir = None if source is not None else self.out_dir
        spec = RunSpec.rerun_of(manifest, tasks, source, profile=profile, out_dir=out_dir)
        return self.start_run(spec, label=f"rerun of {len(tasks)} task(s)")

    def executing_dirs(self) -> set[Path]:
        """Run dirs this process is executing (their liveness needs no lock probe)."""
        return {
            Path(live.run_dir).resolve()
            for live in list(self.live_runs)
            if live.run_dir is not None and not live.finished and not live.followed
        }

    # -- runs started elsewhere ----------------------------------------------------------------
    def _follow_tick(self) -> None:
        if not any(w.group == "follow" and w.is_running for w in self.workers):
            own = [live for live in self.live_runs if not live.followed]
            known = {Path(live.run_dir).resolve() for live in own if live.run_dir is not None}
            waiting = any(live.run_dir is None and not live.finished for live in own)
            self.follow_runs(known, waiting)

    @work(thread=True, group="follow", exit_on_error=False, name="following runs")
    def follow_runs(self, known: set[Path], waiting: bool) -> None:
        """Look for runs other processes execute and tail the followed ones (``tui.follow``)."""
        from driftdesk.tui.follow import RunWatch

        if self._watch is None:
            self._watch = RunWatch(self.runs_dirs)
        found, ended = self._watch.look(known, waiting)
        for follower in found:
            self.post_message(RunFollowed(follower.live))
        for follower in ended:
            self.post_message(RunEnded(follower.live))

    @on(RunFollowed)
    def _run_followed(self, message: RunFollowed) -> None:
        live = message.live
        self.live_runs.append(live)
        self.notify(f"following {live.run_id}: a run started elsewhere", markup=False)
        screen = self._screen_for_mode("run")
        if isinstance(screen, RunScreen) and (screen.live is None or screen.live.finished):
            screen.show_run(live)

    def cancel_run(self, live: LiveRun) -> bool:
        return live.request_cancel()

    @on(RunEnded)
    def _run_ended(self, message: RunEnded) -> None:
        live = message.live
        self.notify(
            f"{live.run_id or live.label}: {live.status}",
            severity="information" if live.status == "completed" else "warning",
        )
        for mode in ("run", "volatility"):
            screen = self._screen_for_mode(mode)
            if screen is not None and hasattr(screen, "run_ended"):
                screen.run_ended(live)
        if self.demo and live is self.demo_run and live.run_dir is not None:
            self.show_volatility(live.run_dir)

    @work(group="navigate", exclusive=True, exit_on_error=False, name="navigation")
    async def show_live_run(self, live: LiveRun) -> None:
        """Switch to the Run screen (mounting it if needed) and show ``live`` there."""
        await self.switch_mode("run")
        screen = self._screen_for_mode("run")
        if isinstance(screen, RunScreen):
            screen.show_run(live)

    @work(group="navigate", exclusive=True, exit_on_error=False, name="navigation")
    async def show_volatility(self, run_dir: Path) -> None:
        """Switch to the Volatility screen (mounting it if needed) with ``run_dir`` selected."""
        await self.switch_mode("volatility")
        screen = self._screen_for_mode("volatility")
        if isinstance(screen, VolatilityScreen):
            screen.select_run(run_dir)

    def _screen_for_mode(self, mode: str) -> Any:
        stack = self._screen_stacks.get(mode)
        return stack[0] if stack else None

    # -- demo ------------------------------------------------------------------------------------
    @work(thread=True, group="demo", exclusive=True, exit_on_error=False, name="starting the demo")
    def start_demo(self) -> None:
        from driftdesk.reruns.demo import DEMO_LATENCY_MS, prepare_demo

        self.sandbox, spec, note = prepare_demo(
            out_dir=self.out_dir,
            repeat=self.demo_repeat,
            concurrency=self.demo_concurrency,
            latency_ms=DEMO_LATENCY_MS if self.demo_latency_ms is None else self.demo_latency_ms,
        )
        self.post_message(DemoReady(spec, note))

    @on(DemoReady)
    def _demo_ready(self, message: DemoReady) -> None:
        self.demo_spec = message.spec
        self.demo_profile = message.spec.profile
        self.demo_api_key = message.spec.api_key
        self.notify(message.note, title="demo", timeout=8)
        self.demo_run = self.start_run(message.spec, label="demo")
        run_screen = self._screen_for_mode("run")
        if isinstance(run_screen, RunScreen):
            run_screen.show_run(self.demo_run)

    # -- failures ------------------------------------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        self.notify(
            plain_error(event.worker.error),
            title=f"{event.worker.name or 'task'} failed",
            severity="error",
            timeout=12,
        )

    # -- app actions ---------------------------------------------------------------------------
    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "screen: profiles",
                "Provider profiles and targets",
                lambda: self.switch_mode("profiles"),
            ),
            PaletteCommand(
                "screen: run", "Launch and watch reruns", lambda: self.switch_mode("run")
            ),
            PaletteCommand(
                "screen: volatility",
                "Per-task volatility of runs",
                lambda: self.switch_mode("volatility"),
            ),
            PaletteCommand("app: help", "Keys of this screen", self.action_help),
            PaletteCommand(
                "app: quit", "Quit (asks what to do with live runs)", self.action_ask_quit
            ),
        ]

    def action_help(self) -> None:
        screen = self.screen
        if not isinstance(screen, WorkbenchScreen):
            return
        rows: list[tuple[str, str, str]] = []
        wide = self.size.width >= 120
        for source in (screen, self):
            for binding in source.BINDINGS:
                if isinstance(binding, Binding):
                    rows.append(
                        (
                            self.readable_keys(binding),
                            # the longer tooltip only where the three columns still fit
                            (binding.tooltip if wide else "") or binding.description,
                            binding.id or "",
                        )
                    )
        self.push_screen(HelpScreen(screen.HELP_INTRO, rows))

    def readable_keys(self, binding: Binding) -> str:
        """``/`` and ``?`` rather than ``slash`` and ``question_mark``; every key of the binding."""
        keys = [key.strip() for key in binding.key.split(",") if key.strip()]
        return "  ".join(self.get_key_display(Binding(key, binding.description)) for key in keys)

    def unfinished_runs(self) -> list[LiveRun]:
        """This app's runs still running (a followed run goes on without the app)."""
        return [live for live in self.live_runs if not live.finished and not live.followed]

    def action_ask_quit(self) -> None:
        """``q``: quit at once when nothing runs; otherwise ask what becomes of the runs."""
        live = self.unfinished_runs()
        if not live:
            self.call_later(self.action_quit)
            return
        from driftdesk.tui.screens.modals import PickScreen

        count = "a run is" if len(live) == 1 else f"{len(live)} runs are"
        choices = [
            ("cancel", "Cancel and quit: finished attempts are kept; resume it later"),
            ("keep", "Keep running: leave the workbench, finish in the terminal"),
            ("stay", "Stay in the workbench"),
        ]
        if self.demo:  # the demo's endpoint lives in this process: it cannot outlive the app
            choices.pop(1)

        def answered(choice: str | None) -> None:
            if choice == "cancel":
                self.call_later(self.action_quit)
            elif choice == "keep":
                self.kept_runs = self.unfinished_runs()
                self.exit()

        self.push_screen(PickScreen(f"Quit? {count} still running.", choices), answered)

    async def action_quit(self) -> None:
        """Cancel every run (they are marked interrupted), stop the sandbox, then exit."""
        running = [w for w in self.workers if w.group == "runs" and w.is_running]
        cancelled = self.unfinished_runs()
        for live in self.live_runs:
            live.request_cancel()
        if running:
            self.notify("stopping runs (they are marked interrupted)…")
            # The engine writes its manifest before the worker returns; do not cut that short.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.workers.wait_for_complete(running), 15.0)
        for live in cancelled:
            if live.run_dir is not None and live.status == "interrupted":
                self.exit_messages.append(
                    f"{live.run_id}: interrupted; finished attempts are kept. Finish it with:\n"
                    f"  driftdesk resume {live.run_dir}"
                )
        if self.sandbox is not None:
            sandbox, self.sandbox = self.sandbox, None
            await asyncio.to_thread(sandbox.stop)
        self.exit()


async def _in_child(request: dict[str, Any], live: LiveRun) -> None:
    """Execute ``request`` in a child process, its events into ``live`` (on the run's worker
    loop). A child killed mid-run leaves ``live`` interrupted with the resume command."""
    from driftdesk.reruns.run_process import RunProcessDied, run_in_child

    def started(pid: int) -> None:
        live.pid = pid

    try:
        await run_in_child(request, live, on_start=started)
    except RunProcessDied as exc:
        live.mark_failed(str(exc), status="interrupted")


def run_workbench(runs_dirs: list[Path] | None = None) -> int:
    """``driftdesk`` / ``driftdesk tui``: runs are listed from ``./runs`` and the data dir."""
    from driftdesk import paths

    extra = [paths.data_dir() / "runs", *(runs_dirs or [])]
    app = DriftdeskApp(runs_dirs=extra)
    with _own_loop() as loop:
        app.run(loop=loop)
        return after_exit(app)


@contextlib.contextmanager
def _own_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop for ``App.run`` that is shut down only after ``after_exit``: ``asyncio.run``
    would, on its way out, wait for every thread the app's workers ran on, so a run the user
    chose to keep running held the terminal blank until it ended, its progress unseen."""
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


def after_exit(app: DriftdeskApp, stream: Any = None) -> int:
    """Once the app has exited: say what became of its runs, and finish the ones the user
    chose to keep running (Ctrl-C interrupts them, as in ``driftdesk run``)."""
    import sys
    import time

    from driftdesk.reruns.progress import TextProgress, status_line

    out = stream or sys.stderr
    for message in app.exit_messages:
        print(message, file=out)
    for live in app.kept_runs:
        print(f"{live.run_id}: still running in {live.run_dir} (Ctrl-C interrupts it)", file=out)
        progress = TextProgress(out)  # the line `driftdesk run` draws, as the run goes on
        try:
            while not live.finished:
                progress.draw(live.stats)
                time.sleep(0.2)
        except KeyboardInterrupt:
            live.request_cancel()
            while not live.finished:
                time.sleep(0.1)
        progress.draw(live.stats, force=True)
        if progress.is_tty:
            print(file=out)
        print(f"{live.status}: {live.run_dir}\n{status_line(live.stats, bar=False)}", file=out)
        if live.status == "interrupted":
            print(f"finish it with:\n  driftdesk resume {live.run_dir}", file=out)
    return 0


def run_demo(out_dir: Path | None = None, repeat: int = 5, concurrency: int = 8) -> int:
    """``driftdesk demo``: sandbox + an in-memory profile + a live run of the built-in suite."""
    from driftdesk import paths

    extra = [paths.data_dir() / "runs"]
    app = DriftdeskApp(
        demo=True,
        out_dir=out_dir,
        runs_dirs=extra,
        demo_repeat=repeat,
        demo_concurrency=concurrency,
    )
    with _own_loop() as loop:
        app.run(loop=loop)
        if os.environ.get("DRIFTDESK_DEMO_QUIET") != "1" and app.demo_run and app.demo_run.run_dir:
            print(f"demo run ({app.demo_run.status}) saved in {app.demo_run.run_dir}")
        return after_exit(app)


def tune_collector() -> tuple[int, int, int]:
    """Tune Python's garbage collector for an app that must answer keys while a big run
    streams in (``bench_tui_live.py`` prints the full collections it sees).

    - What start-up made (Textual, its CSS, the first screen: ~55,000 objects, alive
      until exit) is frozen: a full collection scans every object it tracks, with the
      app paused meanwhile.
    - The youngest generation is collected after 10,000 allocations, not CPython's 700.
      At 700, a collection ran in the middle of nearly every frame, so the frame's
      short-lived strips and segments outlived it and were promoted, and the old
      generation filled with them: a 10k run saw 57 full collections of 60–200 ms, the
      pauses the slowest key presses waited on; with this, 2. A young collection of
      10,000 objects takes a millisecond or two.

    Returns CPython's thresholds, for ``restore_collector`` (the app calls it on exit)."""
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *thresholds[1:])
    return thresholds


def restore_collector(thresholds: tuple[int, int, int]) -> None:
    """CPython's settings again. Frozen objects are never collected: after the app they are
    ordinary objects again (a process that runs the app many times, like the tests, would
    keep each one)."""
    gc.unfreeze()
    gc.set_threshold(*thresholds)
