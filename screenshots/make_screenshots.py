"""Regenerate the README's screenshots: drive the workbench headless at a fixed size and save
an SVG (and a PNG) of each main screen.

    dbus-run-session -- bash tests/with-keyring.sh .venv-test/bin/python screenshots/make_screenshots.py

Everything happens in a throwaway home (temp HOME/XDG dirs) and a keyring service of its own in
the private, temporary keyring that tests/with-keyring.sh unlocks, against the real sandbox
endpoint; nothing touches your own config or keyring. The keys are obviously fake and shown
masked. PNGs need ``rsvg-convert`` (Debian: librsvg2-bin) or ``cairosvg`` — dev-time tools, not
dependencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = (140, 42)


def _throwaway_home(root: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "DRIFTDESK_")) or (
            name.startswith("XDG_") and name != "XDG_RUNTIME_DIR"  # the D-Bus session needs it
        ):
            del os.environ[name]
    os.environ["HOME"] = str(root / "home")
    os.environ["XDG_CONFIG_HOME"] = str(root / "home" / ".config")
    os.environ["XDG_DATA_HOME"] = str(root / "home" / ".local" / "share")
    # Our own service name: even in a real keyring these entries could not meet a user's.
    os.environ["DRIFTDESK_KEYRING_SERVICE"] = f"driftdesk-screenshots-{os.getpid()}"
    (root / "project").mkdir(parents=True)
    os.chdir(root / "project")


def _seed_profiles() -> None:
    """A second profile, switched into Claude Code, so the Profiles screen shows a target, with
    an obviously fake key in the keyring (shown masked: ``sk-…7f3a``)."""
    from driftdesk.providers.keys import KeyringUnavailable, set_key
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.providers.targets import apply_switch, plan_switch

    work = Profile(
        name="work-gateway",
        protocol="anthropic",
        base_url="https://llm-gateway.example.com/anthropic",
        model="claude-sonnet-4-5",
        haiku_model="claude-haiku-4-5",
        opus_model="claude-opus-4-1",
        headers={"X-Team": "evals"},
        notes="team gateway",
    )
    ProfileStore().save(work)
    try:
        set_key(work.name, "sk-demo-" + "7f3a")
    except KeyringUnavailable as exc:
        raise SystemExit(
            f"no usable keyring ({exc}).\nRun: dbus-run-session -- bash tests/with-keyring.sh "
            ".venv-test/bin/python screenshots/make_screenshots.py"
        ) from exc
    apply_switch(plan_switch(work, "claude"))


_TEXT_RE = re.compile(
    r'(<text\b[^>]*?\bx=")([0-9.]+)("[^>]*?\btextLength=")([0-9.]+)("[^>]*>)([^<]*)(</text>)'
)
_NBSP = "&#160;"


def _svg_for_rsvg(svg: str) -> str:
    """The SVG with the no-break spaces at either end of a text run dropped (x and textLength
    moved to match): rsvg-convert draws such runs shifted ("^p palette" came out as
    "^pp alette", "74.1%  CI95" as "74.1%CI95"). Blank runs over the background go entirely."""

    def fix(match: re.Match[str]) -> str:
        start, x, mid, length, head, content, end = match.groups()
        cells = len(html.unescape(content))
        if not cells:
            return match.group(0)
        cell = float(length) / cells
        stripped = content
        lead = 0
        while stripped.startswith(_NBSP):
            stripped, lead = stripped[len(_NBSP) :], lead + 1
        trail = 0
        while stripped.endswith(_NBSP):
            stripped, trail = stripped[: -len(_NBSP)], trail + 1
        if not stripped:
            return ""
        new_x = float(x) + lead * cell
        new_length = float(length) - (lead + trail) * cell
        chars = html.unescape(stripped)
        if any("\u2800" <= ch <= "\u28ff" for ch in chars):
            # Braille comes from a proportional fallback font whose wider glyphs rsvg does not
            # squeeze into textLength: one element per cell keeps the plot inside its frame.
            return "".join(
                f"{start}{new_x + i * cell:g}{mid}{cell:g}{head}{html.escape(ch)}{end}"
                for i, ch in enumerate(chars)
            )
        return f"{start}{new_x:g}{mid}{new_length:g}{head}{stripped}{end}"

    return _TEXT_RE.sub(fix, svg)


def _to_png(svg: Path) -> None:
    png = svg.with_suffix(".png")
    if shutil.which("rsvg-convert"):
        with tempfile.NamedTemporaryFile("w", suffix=".svg", encoding="utf-8") as fixed:
            fixed.write(_svg_for_rsvg(svg.read_text(encoding="utf-8")))
            fixed.flush()
            subprocess.run(["rsvg-convert", fixed.name, "-o", str(png)], check=True)
        return
    try:
        import cairosvg
    except ImportError:
        print(f"  (no rsvg-convert or cairosvg: {png.name} not written)", file=sys.stderr)
        return
    cairosvg.svg2png(url=str(svg), write_to=str(png))


# A coding task whose right and wrong paths differ in one command (as issue 45 tried it),
# for the side-by-side: the sandbox plays it through the real Codex's own shell tool.
CODING_TASK = {
    "task_id": "fix-add",
    "prompt": "In calc.py, add() multiplies. Make it add.",
    "workspace": "fix-add",
    "check": "python3 -c 'import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)'",
    "simulated": {
        "commands": [
            "cat calc.py",
            "sed -i 's/a \\* b/a + b/' calc.py",
            "python3 -c 'import calc; print(calc.add(2, 3))'",
        ],
        "wrong": [
            "cat calc.py",
            "sed -i 's/a \\* b/a - b/' calc.py",
            "python3 -c 'import calc; print(calc.add(2, 3))'",
        ],
        "answer": "add() now adds.",
        "skill": 0.5,
    },
}
CODING_SEED = 4  # the sandbox's draws: attempts 0-2 take the right sed, 3 the wrong one


def _coding_run(root: Path) -> Path:
    """Four attempts of ``CODING_TASK`` by the real Codex (installed by ``./run tests`` under
    .tools/npm) against the sandbox, one at a time: the same outcomes every time."""
    import json

    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.run_spec import RunSpec
    from driftdesk.reruns.run_start import execute_run
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    clients = HERE.parent / ".tools" / "npm" / "node_modules" / ".bin"
    os.environ["PATH"] = f"{clients}{os.pathsep}{os.environ['PATH']}"
    if shutil.which("codex") is None:
        raise SystemExit(f"the real Codex is not installed in {clients}: run ./run tests first")
    suite_dir = root / "coding-suite"
    (suite_dir / "fix-add").mkdir(parents=True)
    (suite_dir / "fix-add" / "calc.py").write_text("def add(a, b):\n    return a * b\n")
    suite = suite_dir / "coding.jsonl"
    suite.write_text(json.dumps(CODING_TASK) + "\n")

    class Quiet:
        def on_event(self, event: object) -> None:
            pass

    with SandboxServer(seed=CODING_SEED, suites=[suite], linger_s=0.3) as server:
        profile = Profile("codex-sandbox", "openai", server.base_url, SIM_MODEL)
        spec = RunSpec(
            profile=profile, suite=str(suite), repeat=4, concurrency=1, agent="codex",
            out_dir=root / "coding-runs", api_key="sk-demo-" + "codex", timeout_s=120,
        )  # fmt: skip
        outcome = asyncio.run(execute_run(spec, Quiet()))
    print(f"  (a Codex run of fix-add for the side-by-side: {outcome.run_dir.name})")
    return Path(outcome.run_dir)


def _pass_and_fail(run_dir: Path, task_id: str) -> tuple[int, int]:
    import json

    rows = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    outcomes = {r["attempt"]: r["outcome"] for r in rows if r["task_id"] == task_id}
    passes = [a for a, o in sorted(outcomes.items()) if o == "pass"]
    fails = [a for a, o in sorted(outcomes.items()) if o == "fail"]
    assert passes and fails, f"the coding run needs a pass and a fail: {outcomes}"
    return passes[0], fails[0]


async def _shoot_small(coding_run: Path) -> list[Path]:
    """The side-by-side at 80×24: the two sides stacked, each diverging command whole."""
    from driftdesk.tui.app import DriftdeskApp
    from driftdesk.tui.screens.attempt_pair import AttemptPairScreen

    app = DriftdeskApp(runs_dirs=[coding_run.parent], out_dir=coding_run.parent, blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.5)
        app.push_screen(
            AttemptPairScreen(coding_run, "fix-add", *_pass_and_fail(coding_run, "fix-add"))
        )
        for _ in range(50):
            await pilot.pause(0.1)
            if not [w for w in app.workers if w.is_running and w.group == "pair"]:
                break
        await pilot.pause(0.5)
        app.clear_notifications()
        await pilot.pause(0.2)
        app.save_screenshot("side-by-side-80x24.svg", str(HERE))
        print("  side-by-side-80x24.svg")
        await pilot.press("ctrl+q")
    return [HERE / "side-by-side-80x24.svg"]


async def _shoot(coding_run: Path) -> list[Path]:
    from textual.pilot import Pilot
    from textual.widgets import Log

    from driftdesk.tui.app import DriftdeskApp
    from driftdesk.tui.screens.attempt_pair import AttemptPairScreen
    from driftdesk.tui.screens.compare import CompareScreen
    from driftdesk.tui.screens.task import TaskScreen
    from driftdesk.tui.screens.volatility import VolatilityScreen

    saved: list[Path] = []
    app = DriftdeskApp(
        demo=True, demo_repeat=5, demo_concurrency=8, demo_latency_ms=150.0, blink=False
    )

    def shot(name: str) -> None:
        app.save_screenshot(f"{name}.svg", str(HERE))
        saved.append(HERE / f"{name}.svg")
        print(f"  {name}.svg")

    async def idle(pilot: Pilot[None]) -> None:
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
        # The followed attempt stays until it ends: wait (a little) for one with lines to show.
        log = app.screen.query_one("#run-log", Log)
        for _ in range(30):
            if log.lines:
                break
            await pilot.pause(0.1)
        shot("run-live")
        while not app.demo_run.finished:
            await pilot.pause(0.2)
        await idle(pilot)
        for _ in range(50):  # the demo moves to the Volatility screen once its run is read
            if isinstance(app.screen, VolatilityScreen):
                break
            await pilot.pause(0.1)
        volatility = app.screen
        assert isinstance(volatility, VolatilityScreen), app.screen_stack
        await idle(pilot)
        app.clear_notifications()
        await pilot.pause(0.2)
        shot("volatility")

        volatility.query_one("#tasks").focus()
        await pilot.press("enter")
        await idle(pilot)
        assert isinstance(app.screen, TaskScreen)
        shot("task-drilldown")
        # The attempt's trajectory, then a pass beside a fail at their first divergence.
        await pilot.press("t")
        await idle(pilot)
        shot("trajectory")
        await pilot.press("escape")
        # A coding task's pass beside its fail (the real Codex's commands and tool results).
        app.push_screen(
            AttemptPairScreen(coding_run, "fix-add", *_pass_and_fail(coding_run, "fix-add"))
        )
        await idle(pilot)
        assert isinstance(app.screen, AttemptPairScreen)
        await pilot.press("down", "enter")  # the next step unfolded too: what each sed did
        app.clear_notifications()
        await pilot.pause(0.2)
        shot("side-by-side")
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

        # A short nightly history of the same suite (demo --history): one night a gateway
        # answers under another model name, two nights later five tasks break.
        from driftdesk.reruns.demo_history import seed_history
        from driftdesk.tui.screens.trend import TrendScreen

        nights = await asyncio.to_thread(seed_history, second.run_dir.parent)
        await pilot.press("3")
        await idle(pilot)
        volatility = app.screen
        assert isinstance(volatility, VolatilityScreen), app.screen_stack
        volatility.select_run(nights[-1])
        await idle(pilot)
        await pilot.press("t")
        await idle(pilot)
        assert isinstance(app.screen, TrendScreen), app.screen_stack
        app.clear_notifications()
        await pilot.pause(0.2)
        shot("trend")
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
        coding_run = _coding_run(Path(tmp))
        print(f"screenshots at {SIZE[0]}×{SIZE[1]} in {HERE}:")
        svgs = asyncio.run(_shoot(coding_run))
        svgs += asyncio.run(_shoot_small(coding_run))
    for svg in svgs:
        _to_png(svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
