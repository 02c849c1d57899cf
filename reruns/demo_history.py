"""`driftdesk demo --history`: a few small nightly runs, each through the real proxy against
its own sandbox (its own seed, so the nights drift as a real model's do). From night 3 a
gateway answers under another model name, which stays; on night 5 five tasks the model always
got right fail every time (``skill_shift``); night 6 reruns night 5 unchanged. ``driftdesk
trend`` flags exactly nights 3 and 5.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from driftdesk.reruns.demo import DEMO_SUITE, demo_profile
from driftdesk.reruns.simulated_endpoint import SandboxServer

HISTORY_FOLDER = "demo-history"
HISTORY_ROUTED_MODEL = "routed-model-2"
HISTORY_NIGHTS: tuple[dict[str, Any], ...] = (
    {"seed": 1},
    {"seed": 2},
    {"seed": 3, "serve_model": HISTORY_ROUTED_MODEL},
    {"seed": 4, "serve_model": HISTORY_ROUTED_MODEL},
    {"seed": 5, "serve_model": HISTORY_ROUTED_MODEL, "skill_shift": 1.0, "shift_tasks": 5},
    {"seed": 6, "serve_model": HISTORY_ROUTED_MODEL, "skill_shift": 1.0, "shift_tasks": 5},
)
HISTORY_REPEAT = 5  # a task that goes from 5/5 to 0/5 is strong evidence on its own


def seed_history(
    out_dir: Path,
    *,
    repeat: int = HISTORY_REPEAT,
    concurrency: int = 1,
    on_night: Callable[[int, Path], None] | None = None,
) -> list[Path]:
    """Run ``HISTORY_NIGHTS`` into ``out_dir`` (oldest first); ``on_night(night, run_dir)``
    after each. Concurrency 1 replays each night exactly."""
    import asyncio
    import secrets

    from driftdesk.reruns.run_spec import RunSpec
    from driftdesk.reruns.run_start import execute_run

    runs = []
    for night, drift in enumerate(HISTORY_NIGHTS, start=1):
        with SandboxServer(**drift) as server:
            spec = RunSpec(
                profile=demo_profile(server),
                suite=DEMO_SUITE,
                repeat=repeat,
                concurrency=concurrency,
                timeout_s=30,
                out_dir=out_dir,
                api_key="sk-sandbox-" + secrets.token_hex(12),
            )
            outcome = asyncio.run(execute_run(spec))
        runs.append(Path(outcome.run_dir))
        if on_night is not None:
            on_night(night, Path(outcome.run_dir))
    return runs
