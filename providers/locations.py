"""Where the targets' config files live, and the command that hands them a key.

Honours ``HOME``, ``CLAUDE_CONFIG_DIR`` and ``CODEX_HOME`` as Claude Code and Codex do.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

CLAUDE_SCOPES = ("user", "project", "local")
CODEX_SCOPES = ("user", "project")


def claude_config_dir() -> Path:
    override = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(override).expanduser() if override else Path.home() / ".claude"


def codex_home() -> Path:
    override = os.environ.get("CODEX_HOME")
    return Path(override).expanduser() if override else Path.home() / ".codex"


def claude_settings_path(scope: str = "user", project_dir: Path | None = None) -> Path:
    """``user``: ~/.claude/settings.json; ``project``: .claude/settings.json (shared with the
    team); ``local``: .claude/settings.local.json (this machine only) — Claude Code's own scopes."""
    project = Path(project_dir) if project_dir else Path.cwd()
    if scope == "user":
        return claude_config_dir() / "settings.json"
    if scope == "project":
        return project / ".claude" / "settings.json"
    if scope == "local":
        return project / ".claude" / "settings.local.json"
    raise ValueError(f"unknown Claude Code scope {scope!r}: expected one of {CLAUDE_SCOPES}")


def codex_config_path(scope: str = "user", project_dir: Path | None = None) -> Path:
    if scope == "user":
        return codex_home() / "config.toml"
    if scope == "project":
        return (Path(project_dir) if project_dir else Path.cwd()) / ".codex" / "config.toml"
    raise ValueError(f"unknown Codex scope {scope!r}: expected one of {CODEX_SCOPES}")


def env_file_path(env_file: Path | str | None = None, project_dir: Path | None = None) -> Path:
    if env_file:
        return Path(env_file).expanduser()
    return (Path(project_dir) if project_dir else Path.cwd()) / ".env"


def driftdesk_argv() -> list[str]:
    """An absolute command that runs this driftdesk, so it works outside the user's PATH.

    The installed console script if there is one, else this interpreter with ``-m driftdesk``.
    """
    found = shutil.which("driftdesk")
    if found:
        return [str(Path(found).resolve())]
    sibling = Path(sys.executable).parent / "driftdesk"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return [str(sibling.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "driftdesk"]


def key_helper_argv(profile_name: str) -> list[str]:
    """``driftdesk key NAME`` as an argument vector (Codex ``auth.command`` + ``args``)."""
    return [*driftdesk_argv(), "key", profile_name]


def key_helper_shell(profile_name: str) -> str:
    """``driftdesk key NAME`` as a shell command line (Claude Code ``apiKeyHelper``)."""
    return shlex.join(key_helper_argv(profile_name))
