"""What changed between two versions of a config file, by key name and never by value.

Used for the one-line summary of each write in a file's history, and to tell which keys drifted
since driftdesk's last write (``status``).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from driftdesk.providers import dotenv


def flatten(kind: str, text: str | None) -> dict[str, Any] | None:
    """Dotted key -> value of a ``kind`` file ("claude" JSON, "codex" TOML, "env"); None if it
    does not parse. Lists are compared whole."""
    if text is None:
        return {}
    try:
        if kind == "claude":
            tree = json.loads(text.lstrip("\ufeff")) if text.strip() else {}
        elif kind == "codex":
            tree = tomllib.loads(text)
        else:
            lines = dotenv.parse_env_lines(text, Path(".env"))
            return {key: value for key, value in dotenv.assigned_values(lines)}
    except (ValueError, RecursionError):
        return None
    out: dict[str, Any] = {}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict) and (node or not where):
            for key, value in node.items():
                walk(value, f"{where}.{key}" if where else str(key))
        else:
            out[where] = node

    walk(tree, "")
    return out


def changed_keys(
    kind: str, old: str | None, new: str | None
) -> tuple[list[str], list[str], list[str]] | None:
    """(added, changed, removed) key names, or None when either side does not parse."""
    before, after = flatten(kind, old), flatten(kind, new)
    if before is None or after is None:
        return None
    added = [k for k in after if k not in before]
    changed = [k for k in after if k in before and before[k] != after[k]]
    removed = [k for k in before if k not in after]
    return added, changed, removed


def summarize(kind: str, old: str | None, new: str | None) -> str:
    """ "set a, b; removed c" (names only), "created", "deleted" or "N lines changed"."""
    if old is None and new is not None:
        return "created"
    if new is None:
        return "deleted"
    keys = changed_keys(kind, old, new)
    if keys is None:
        old_lines, new_lines = (old or "").splitlines(), new.splitlines()
        differing = sum(a != b for a, b in zip(old_lines, new_lines, strict=False))
        return f"{differing + abs(len(old_lines) - len(new_lines))} lines changed"
    added, changed, removed = keys
    parts = []
    if added or changed:
        parts.append("set " + ", ".join(added + changed))
    if removed:
        parts.append("removed " + ", ".join(removed))
    return "; ".join(parts) or "formatting only"
