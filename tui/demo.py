"""Setting up `driftdesk demo`: the simulated sandbox endpoint and a ``sandbox`` profile.

Runs in a worker thread (starting a server and touching the keyring may block). The key is a
throwaway one (the sandbox accepts any): it goes to the keyring when one is usable, otherwise it
is handed to the engine in memory (``RunSpec.api_key``) and never written anywhere.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

DEMO_PROFILE = "sandbox"
DEMO_SUITE = "basic"
# Slow enough to watch attempts fill in, with a few injected 429s and 500s so the retry and
# link-error counters have something honest to show.
DEMO_LATENCY_MS = 350.0
DEMO_FAULTS = {"rate_limit": 0.04, "server_error": 0.02}


def prepare_demo(
    out_dir: Path, repeat: int, concurrency: int, latency_ms: float = DEMO_LATENCY_MS
) -> tuple[Any, Any, str]:
    """Start the sandbox and point the ``sandbox`` profile at it; returns (server, spec, note)."""
    from driftdesk.providers.keys import KeyringUnavailable, set_key
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.engine import RunSpec
    from driftdesk.reruns.sandbox import SIM_MODEL, FaultRates, SandboxServer

    server = SandboxServer(
        latency_ms=latency_ms, faults=FaultRates(**DEMO_FAULTS), retry_after_s=0.5
    )
    server.start()
    try:
        key = "sk-sandbox-" + secrets.token_hex(12)
        ProfileStore().save(
            Profile(
                name=DEMO_PROFILE,
                protocol="openai",
                base_url=server.base_url,
                model=SIM_MODEL,
                notes="driftdesk demo: a local SIMULATED model (no network)",
            )
        )
        in_memory_key: str | None = None
        try:
            set_key(DEMO_PROFILE, key)
            where = "its throwaway key is in the OS keyring"
        except KeyringUnavailable:
            in_memory_key = key
            where = "there is no OS keyring here, so its throwaway key is passed in memory only"
        spec = RunSpec(
            profile=DEMO_PROFILE,
            suite=DEMO_SUITE,
            repeat=repeat,
            concurrency=concurrency,
            out_dir=out_dir,
            api_key=in_memory_key,
        )
    except BaseException:
        server.stop()
        raise
    note = (
        f"The model is SIMULATED by a local sandbox at {server.base_url} (no network). Profile "
        f"'{DEMO_PROFILE}' points at it and {where}. Running suite '{DEMO_SUITE}' × {repeat} "
        f"(concurrency {concurrency})."
    )
    return server, spec, note
