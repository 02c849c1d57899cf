"""Per-launch pinning: ``driftdesk exec NAME -- claude|codex ...`` starts the client on the
profile for that process only, whatever the user's own settings files say, and writes nothing.

- Claude Code gets ``--settings`` (above the user, project and local settings files) with the
  profile's ``env`` block and an ``apiKeyHelper`` running ``driftdesk key NAME``; the key
  variables are blanked there (a settings file's ANTHROPIC_API_KEY would beat the helper), and
  the same base URL / model go in the process environment too, which beats every file.
- Codex gets ``-c`` overrides: ``model``, ``model_provider`` and a provider table whose
  ``auth`` command runs ``driftdesk key NAME`` (Codex's own project files cannot set a provider).

The key never enters the client's environment or arguments: the client asks the helper.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from driftdesk.providers import locations
from driftdesk.providers.errors import SwitchError
from driftdesk.providers.profiles import KEY_VARIABLES, Profile

PINNED_PROVIDER_ID = "driftdesk-pinned"
CLIENTS = ("claude", "codex")


def pinned_client(argv: Sequence[str]) -> str | None:
    """ "claude" or "codex" when ``argv`` starts one of them (by the command's name)."""
    name = Path(argv[0]).name if argv else ""
    return name if name in CLIENTS else None


def _toml(value: object) -> str:
    """A TOML value for a ``-c`` override (JSON strings and arrays are valid TOML)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def pin(
    profile: Profile, argv: Sequence[str], base: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The argument vector and environment that start ``argv``'s client pinned to ``profile``."""
    client = pinned_client(argv)
    env = dict(os.environ if base is None else base)
    for protocol_variables in KEY_VARIABLES.values():
        for name in protocol_variables.values():
            env.pop(name, None)
    helper = locations.key_helper_argv(profile.name)
    if client == "claude":
        if profile.protocol != "anthropic":
            raise SwitchError(
                f"Claude Code speaks the Anthropic protocol; profile {profile.name!r} is "
                f"{profile.protocol!r}"
            )
        from driftdesk.providers.targets import claude_env_values

        values = {k: v for k, v in claude_env_values(profile).items() if v is not None}
        env.update(values)
        settings_env: dict[str, str] = {
            **values,
            "ANTHROPIC_API_KEY": "",
            "ANTHROPIC_AUTH_TOKEN": "",
        }
        key_command = (
            "printf no-key" if profile.no_key else locations.key_helper_shell(profile.name)
        )
        settings = {"env": settings_env, "apiKeyHelper": key_command}
        return [argv[0], "--settings", json.dumps(settings), *argv[1:]], env
    if client == "codex":
        if profile.protocol != "openai":
            raise SwitchError(
                f"Codex speaks the OpenAI Responses API; profile {profile.name!r} is "
                f"{profile.protocol!r}"
            )
        table: dict[str, object] = {
            "name": f"driftdesk: {profile.name}",
            "base_url": profile.base_url,
            "wire_api": "responses",
        }
        if profile.headers:
            table["http_headers"] = dict(profile.headers)
        if not profile.no_key:
            table["auth"] = {"command": helper[0], "args": helper[1:]}
        overrides = {
            "model": _toml(profile.model),
            "model_provider": _toml(PINNED_PROVIDER_ID),
            f"model_providers.{PINNED_PROVIDER_ID}": _toml(table),
        }
        flags = [part for key, value in overrides.items() for part in ("-c", f"{key}={value}")]
        return [argv[0], *flags, *argv[1:]], env
    raise SwitchError(f"{argv[0]!r} is not a client driftdesk pins (claude, codex)")
