"""Where driftdesk keeps its own files. Honours HOME and the XDG variables (via platformdirs)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "driftdesk"


def config_dir() -> Path:
    """``$DRIFTDESK_CONFIG_DIR``, else the XDG config dir (``~/.config/driftdesk``)."""
    override = os.environ.get("DRIFTDESK_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir(APP))


def data_dir() -> Path:
    """Backups, write history and other state that is ours (``~/.local/share/driftdesk``)."""
    override = os.environ.get("DRIFTDESK_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir(APP))


def cache_dir() -> Path:
    """What is ours and can be rebuilt from what it copies (``~/.cache/driftdesk``)."""
    return Path(platformdirs.user_cache_dir(APP))


def config_file() -> Path:
    return config_dir() / "config.toml"


def runs_dir() -> Path:
    """Where a new run goes, for the CLI and the TUI alike: ``$DRIFTDESK_RUNS_DIR``, else
    ``./runs`` (so ``driftdesk report runs/<id>`` finds what either face started). A rerun of an
    earlier run's tasks goes beside that run instead (``rerun_dir``)."""
    override = os.environ.get("DRIFTDESK_RUNS_DIR")
    return Path(override) if override else Path.cwd() / "runs"


def rerun_dir(source_run: Path) -> Path:
    """Where a rerun of ``source_run``'s tasks goes: beside it, wherever it is."""
    return Path(source_run).resolve().parent
