"""The demo's simulated endpoint, for `driftdesk demo` and for resuming a demo run later.

A demo run's profile (``demo-sandbox``) lives only while the demo runs and its sandbox dies
with it, so the printed `driftdesk resume RUN` would find neither. ``resume_run`` recognises
such a run and starts a sandbox like the demo's for the resume (``demo_stand_in``): the same
suite, simulated model and injected faults, a new port.

``prepare_demo`` sets up `driftdesk demo` itself: the sandbox and the run spec of the demo's
run, with its in-memory profile. That profile lives only in the process: it is never saved
among the user's profiles (it cannot overwrite a profile the user named ``sandbox``, and it
does not outlive the demo pointing at a dead port), and its throwaway key (the sandbox accepts
any) is handed to the engine in memory (``RunSpec.api_key``), never written to the keyring or a
file. The workbench calls it in a worker thread (starting a server may block).

The short nightly history of ``driftdesk demo --history`` is ``reruns.demo_history``'s.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, FaultRates, SandboxServer
from driftdesk.rundir import RunManifest

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
    typed = RunManifest.from_json(manifest)
    return (
        typed.profile == DEMO_PROFILE
        and typed.model == SIM_MODEL
        and manifest.get("protocol") == "openai"
        and host == "127.0.0.1"
    )


async def demo_stand_in(manifest: dict[str, Any]) -> tuple[SandboxServer, Profile, str] | None:
    """For a demo run whose profile is gone (the demo's profile and sandbox lived only while
    the demo ran): a new sandbox like it, its profile and the resume's notice; None for any
    other run. The caller stops the sandbox."""
    if not is_demo_run(manifest):
        return None
    server = await asyncio.to_thread(start_demo_sandbox)
    profile = demo_profile(server)
    note = (
        f"a demo run: resumed against a new simulated sandbox at {profile.base_url} "
        "(no network, no key)"
    )
    return server, profile, note


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
