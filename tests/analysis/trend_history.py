"""A nightly history made for real: each night a real run (``execute_run``) through the metering
proxy against a fresh ``SandboxServer`` (its own seed, so reruns drift as a real model's do).

Night 3 is answered by another model name (a gateway routing the asked name elsewhere), which
stays; night 5 has five tasks the model always got right fail every time (``skill_shift``);
night 6 reruns night 5's setup unchanged.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

KEY = "sk-test-trend-0123456789abcdef"
ROUTED = "routed-model-2"
NIGHTS: list[dict[str, Any]] = [
    {"seed": 1},
    {"seed": 2},
    {"seed": 3, "serve_model": ROUTED},
    {"seed": 4, "serve_model": ROUTED},
    {"seed": 5, "serve_model": ROUTED, "skill_shift": 1.0, "shift_tasks": 5},
    {"seed": 6, "serve_model": ROUTED, "skill_shift": 1.0, "shift_tasks": 5},
]
SERVED_CHANGE, REGRESSION, UNCHANGED = 2, 4, 5  # indexes into the nights
REPEAT = 5  # a 5/5 → 0/5 task is strong evidence on its own (1/252)


def make_history(out: Path) -> tuple[list[Path], frozenset[str]]:
    """The run dirs, oldest first, and the five tasks made to fail."""
    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.engine import RunSpec, execute_run
    from driftdesk.reruns.sandbox import SIM_MODEL, SandboxServer

    runs: list[Path] = []
    shifted: frozenset[str] = frozenset()
    for night in NIGHTS:
        with SandboxServer(**night) as server:
            profile = Profile(
                name="nightly", protocol="openai", base_url=server.base_url, model=SIM_MODEL
            )
            spec = RunSpec(
                profile=profile,
                suite="basic",
                repeat=REPEAT,
                concurrency=1,  # one attempt at a time: each night replays exactly
                timeout_s=10,
                out_dir=out,
                api_key=KEY,
            )
            outcome = asyncio.run(execute_run(spec))
            shifted = server.endpoint.shifted or shifted
        runs.append(Path(outcome.run_dir))
    return runs, shifted


def set_started(run_dir: Path, started_at: str) -> None:
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["started_at"] = started_at
    path.write_text(json.dumps(manifest))
