"""Setting up `driftdesk demo`: the simulated sandbox endpoint and a ``sandbox`` profile.

Runs in a worker thread (starting a server and touching the keyring may block). The key is the
sandbox's throwaway key: it goes to the keyring when one is usable, otherwise it is handed to
the engine in memory (``RunSpec.api_key``) and never written anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEMO_PROFILE = "sandbox"
DEMO_SUITE = "basic"


def prepare_demo(out_dir: Path, repeat: int, concurrency: int) -> tuple[Any, Any, str]:
    """Start the sandbox and point the ``sandbox`` profile at it; returns (server, spec, note)."""
    from reruns.sandbox import SandboxServer

    from providers.keys import KeyringUnavailable, set_key
    from providers.profiles import Profile, ProfileStore
    from reruns.engine import RunSpec

    server = SandboxServer()
    server.start()
    try:
        key = str(server.api_key)
        ProfileStore().save(
            Profile(
                name=DEMO_PROFILE,
                protocol="openai",
                base_url=server.base_url,
                model=str(getattr(server, "model", "sandbox-sim")),
                notes="driftdesk demo: a local simulated model (no network)",
            )
        )
        in_memory_key: str | None = None
        try:
            set_key(DEMO_PROFILE, key)
            where = "its throwaway key is in the OS keyring"
        except KeyringUnavailable:
            in_memory_key = key
            where = "no OS keyring here, so its throwaway key is passed in memory only"
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
        f"The model is simulated by a local sandbox at {server.base_url}; profile "
        f"'{DEMO_PROFILE}' points at it and {where}. Running suite '{DEMO_SUITE}' "
        f"× {repeat} (concurrency {concurrency})."
    )
    return server, spec, note
