"""Regenerate the README's screenshots: drive the workbench headless at a fixed size and save
an SVG (and a PNG) of each main screen.

    .venv/bin/python screenshots/make_screenshots.py

Everything happens in a throwaway home (temp HOME/XDG dirs, no keyring: the demo's in-memory
key path) against the real sandbox endpoint; nothing touches your own config. PNGs need
``rsvg-convert`` (Debian: librsvg2-bin) or ``cairosvg`` — dev-time tools, not dependencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = (140, 42)


def _throwaway_home(root: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "XDG_", "DRIFTDESK_")):
            del os.environ[name]
    os.environ["HOME"] = str(root / "home")
    os.environ["XDG_CONFIG_HOME"] = str(root / "home" / ".config")
    os.environ["XDG_DATA_HOME"] = str(root / "home" / ".local" / "share")
    # No keyring: the demo then keeps its throwaway key in memory (and says so).
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    (root / "project").mkdir(parents=True)
    os.chdir(root / "project")


def _seed_profiles() -> None:
    """A second profile, switched into Claude Code, so the Profiles screen shows a target."""
    from providers.profiles import Profile, ProfileStore
    from providers.targets import apply_switch, plan_switch

    work = Profile(
        name="work-gateway",
        protocol="anthropic",
        base_url="https://llm-gateway.example.com/anthropic",
        model="claude-sonnet-4-5",
        notes="team gateway",
    )
    ProfileStore().save(work)
    apply_switch(plan_switch(work, "claude"))


def _to_png(svg: Path) -> None:
    png = svg.with_suffix(".png")
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", str(svg), "-o", str(png)], check=True)
        return
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        print(f"  (no rsvg-convert or cairosvg: {png.name} not written)", file=sys.stderr)
        return
    cairosvg.svg2png(url=str(svg), write_to=str(png))


async def _shoot() -> list[Path]:
    from tui.app import DriftdeskApp
    from tui.screens.compare import CompareScreen
    from tui.screens.task import TaskScreen
    from tui.screens.volatility import VolatilityScreen

    saved: list[Path] = []
    app = DriftdeskApp(
        demo=True, demo_repeat=5, demo_concurrency=8, demo_latency_ms=150.0, blink=False
    )

    def shot(name: str) -> None:
        app.save_screenshot(f"{name}.svg", str(HERE))
        saved.append(HERE / f"{name}.svg")
        print(f"  {name}.svg")

    async def idle(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.2)
        busy = [w for w in app.workers if w.group != "runs" and w.is_running]
        if busy:
            from textual.worker import WorkerCancelled, WorkerFailed

            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await app.workers.wait_for_complete(busy)
        await pilot.pause(0.3)

    async with app.run_test(size=SIZE) as pilot:
        while (
            app.demo_run is None
            or not app.demo_run.total
            or app.demo_run.done < app.demo_run.total * 0.45
        ):
            await pilot.pause(0.1)
        await pilot.pause(0.4)
        shot("run-live")
        while not app.demo_run.finished:
            await pilot.pause(0.2)
        await idle(pilot)
        volatility = app.screen
        assert isinstance(volatility, VolatilityScreen)
        await idle(pilot)
        app.clear_notifications()
        await pilot.pause(0.2)
        shot("volatility")

        volatility.query_one("#tasks").focus()
        await pilot.press("enter")
        await idle(pilot)
        assert isinstance(app.screen, TaskScreen)
        shot("task-drilldown")
        await pilot.press("escape")

        # A second run of the same suite: the sandbox's model drifts like a real one.
        first = app.demo_run
        second = app.start_run(app.demo_spec, label="second run")
        while not second.finished:
            await pilot.pause(0.2)
        await idle(pilot)
        assert first.run_dir is not None and second.run_dir is not None
        app.push_screen(CompareScreen(first.run_dir, second.run_dir))
        await idle(pilot)
        app.clear_notifications()
        await pilot.pause(0.2)
        shot("compare")
        await pilot.press("escape")

        await pilot.press("1")
        await idle(pilot)
        shot("profiles")
        await pilot.press("ctrl+q")
    return saved


def main() -> int:
    sys.path.insert(0, str(HERE.parent))
    with tempfile.TemporaryDirectory(prefix="driftdesk-shots-") as tmp:
        _throwaway_home(Path(tmp))
        _seed_profiles()
        print(f"screenshots at {SIZE[0]}×{SIZE[1]} in {HERE}:")
        svgs = asyncio.run(_shoot())
    for svg in svgs:
        _to_png(svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
