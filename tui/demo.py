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

from driftdesk.reruns.demo import (
    DEMO_LATENCY_MS,
    DEMO_PROFILE,
    DEMO_SUITE,
    demo_profile,
    start_demo_sandbox,
)


def prepare_demo(
    out_dir: Path, repeat: int, concurrency: int, latency_ms: float = DEMO_LATENCY_MS
) -> tuple[Any, Any, str]:
    """Start the sandbox and an in-memory profile pointing at it; returns (server, spec, note)."""
    from driftdesk.reruns.run_spec import RunSpec

    server = start_demo_sandbox(latency_ms)
    spec = RunSpec(
        profile=demo_profile(server),
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
