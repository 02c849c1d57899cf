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


def config_file() -> Path:
    return config_dir() / "config.toml"
