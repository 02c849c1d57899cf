"""``driftdesk exec``: run a command with a profile's endpoint, model and key in its environment.

The key exists only in that child's environment (never in ours, a file, or the output). The
child's exit code is passed through; signals we receive are forwarded to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

from driftdesk.providers.keys import get_key, refuse_in_run_child
from driftdesk.providers.profiles import KEY_VARIABLES, Profile

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT)
# What a keyless profile hands an OpenAI-style tool: the openai SDK refuses to start without
# some key, and a keyless endpoint ignores it.
NO_KEY_PLACEHOLDER = "no-key"


def profile_env(
    profile: Profile, key: str | None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment that points a tool at ``profile``: base URL, model, and the key in the
    variable that makes the SDK send the profile's header (``key`` None: a keyless profile)."""
    env = dict(os.environ if base is None else base)
    variables = KEY_VARIABLES.get(profile.protocol, {})
    for name in variables.values():
        env.pop(name, None)
    if key is not None:
        env[variables[profile.auth]] = key
    elif profile.protocol == "openai":
        env["OPENAI_API_KEY"] = NO_KEY_PLACEHOLDER
    if profile.protocol == "anthropic":
        env["ANTHROPIC_BASE_URL"] = profile.base_url
        env["ANTHROPIC_MODEL"] = profile.model
        for size in ("haiku", "sonnet", "opus"):
            model = getattr(profile, f"{size}_model")
            if model:
                env[f"ANTHROPIC_DEFAULT_{size.upper()}_MODEL"] = model
    else:
        env["OPENAI_BASE_URL"] = profile.base_url
        env["OPENAI_MODEL"] = profile.model
    return env


def _terminal_foreground() -> bool:
    """Are we in the terminal's foreground process group (so the tty signals everyone)?"""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            return os.tcgetpgrp(stream.fileno()) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            continue
    return False


def run_with_profile(profile: Profile, argv: Sequence[str]) -> int:
    """Run ``argv`` with the profile's variables; return its exit code (128+N if killed by N).

    Claude Code and Codex (recognised by the command's name) are pinned instead: started on the
    profile through their own flags, the key fetched by them through ``driftdesk key``."""
    from driftdesk.providers import pinning

    if pinning.pinned_client(argv):
        refuse_in_run_child()
        if not profile.no_key:
            get_key(profile.name)  # a missing key is reported now, not by the client's helper
        argv, env = pinning.pin(profile, argv)
    else:
        env = profile_env(profile, None if profile.no_key else get_key(profile.name))
    try:
        child = subprocess.Popen(list(argv), env=env)
    except FileNotFoundError:
        print(f"driftdesk: error: command not found: {argv[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"driftdesk: error: not executable: {argv[0]}", file=sys.stderr)
        return 126
    del env

    def forward(signum: int, _frame: object) -> None:
        # Ctrl+C / Ctrl+\ at a terminal already reach the child (same process group): sending
        # them again would look like a second keypress ("press again to force quit").
        if signum in TERMINAL_SIGNALS and _terminal_foreground():
            return
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code
