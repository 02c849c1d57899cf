"""The demo's simulated endpoint, for `driftdesk demo` and for resuming a demo run later.

A demo run's profile (``demo-sandbox``) lives only while the demo runs and its sandbox dies
with it, so the printed `driftdesk resume RUN` would find neither. ``resume_run`` recognises
such a run (``is_demo_run``) and starts a sandbox like the demo's for the resume
(``start_demo_sandbox``): the same suite, simulated model and injected faults, a new port.

``seed_history`` makes the short nightly history of ``driftdesk demo --history``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.sandbox import SIM_MODEL, FaultRates, SandboxServer

DEMO_PROFILE = "demo-sandbox"
DEMO_SUITE = "basic"
# Slow enough to watch attempts fill in, with a few injected 429s and 500s so the retry and
# link-error counters have something honest to show.
DEMO_LATENCY_MS = 350.0
DEMO_FAULTS = {"rate_limit": 0.04, "server_error": 0.02}
DEMO_NOTES = "driftdesk demo: a local SIMULATED model (no network); exists while the demo runs"


def start_demo_sandbox(latency_ms: float = DEMO_LATENCY_MS) -> SandboxServer:
    server = SandboxServer(
        latency_ms=latency_ms, faults=FaultRates(**DEMO_FAULTS), retry_after_s=0.5
    )
    server.start()
    return server


def demo_profile(server: SandboxServer) -> Profile:
    """The demo's profile for ``server``: never saved; keyless (the sandbox takes any key)."""
    return Profile(
        name=DEMO_PROFILE,
        protocol="openai",
        base_url=server.base_url,
        model=SIM_MODEL,
        notes=DEMO_NOTES,
        no_key=True,
    )


def is_demo_run(manifest: dict[str, Any]) -> bool:
    """A run `driftdesk demo` made: its profile, model and a loopback endpoint (a user's own
    saved profile of that name is not the demo's: the caller checks that first)."""
    host = urlsplit(str(manifest.get("base_url") or "")).hostname
    return (
        manifest.get("profile") == DEMO_PROFILE
        and manifest.get("model") == SIM_MODEL
        and manifest.get("protocol") == "openai"
        and host == "127.0.0.1"
    )


# `driftdesk demo --history`: a few small nightly runs, each through the real proxy against
# its own sandbox (its own seed, so the nights drift as a real model's do). From night 3 a
# gateway answers under another model name; on night 5 five tasks the model always got right
# fail every time (``skill_shift``). ``driftdesk trend`` flags exactly nights 3 and 5.
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

    from driftdesk.reruns.engine import RunSpec, execute_run

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
