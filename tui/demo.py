"""Setting up `driftdesk demo`: the simulated sandbox endpoint and an in-memory profile for it.

Runs in a worker thread (starting a server may block). The demo's profile lives only in this
process: it is never saved among the user's profiles (it cannot overwrite a profile the user
named ``sandbox``, and it does not outlive the demo pointing at a dead port), and its throwaway
key (the sandbox accepts any) is handed to the engine in memory (``RunSpec.api_key``), never
written to the keyring or a file.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

DEMO_PROFILE = "demo-sandbox"
DEMO_SUITE = "basic"
# Slow enough to watch attempts fill in, with a few injected 429s and 500s so the retry and
# link-error counters have something honest to show.
DEMO_LATENCY_MS = 350.0
DEMO_FAULTS = {"rate_limit": 0.04, "server_error": 0.02}


def prepare_demo(
    out_dir: Path, repeat: int, concurrency: int, latency_ms: float = DEMO_LATENCY_MS
) -> tuple[Any, Any, str]:
    """Start the sandbox and an in-memory profile pointing at it; returns (server, spec, note)."""
    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.engine import RunSpec
    from driftdesk.reruns.sandbox import SIM_MODEL, FaultRates, SandboxServer

    server = SandboxServer(
        latency_ms=latency_ms, faults=FaultRates(**DEMO_FAULTS), retry_after_s=0.5
    )
    server.start()
    profile = Profile(
        name=DEMO_PROFILE,
        protocol="openai",
        base_url=server.base_url,
        model=SIM_MODEL,
        notes="driftdesk demo: a local SIMULATED model (no network); exists while the demo runs",
    )
    spec = RunSpec(
        profile=profile,
        suite=DEMO_SUITE,
        repeat=repeat,
        concurrency=concurrency,
        out_dir=out_dir,
        api_key="sk-sandbox-" + secrets.token_hex(12),
    )
    note = (
        f"The model is SIMULATED by a local sandbox at {server.base_url} (no network). The "
        f"demo's profile '{DEMO_PROFILE}' exists only while the demo runs (your profiles are "
        f"not touched). Running suite '{DEMO_SUITE}' × {repeat} (concurrency {concurrency})."
    )
    return server, spec, note
