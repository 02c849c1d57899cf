"""Key-like values in a user's config file, found by the name they are stored under.

Used twice: a diff we print shows them masked, and a backup copy we keep holds them masked (a
key lives in the OS keyring only, never in a file driftdesk writes — backups included).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.providers import dotenv
from driftdesk.secrets import mask_key, redact

_SECRET_NAME = re.compile(r"(?i)(key|token|secret|passw|auth|credential|cookie)")
# Names that look secret but hold a command or a variable's name, not a secret.
_NOT_SECRET = {
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "env_key_instructions",
}
# These name an environment variable; a value that is no variable name is a key typed there.
_NAMES_A_VARIABLE = {"env_key", "bearer_token_env_var"}
_VARIABLE_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")  # variables are named in capitals
# Fallback for text that does not parse: `name = value` / `"name": "value"` with a secret name.
_ASSIGNMENT = re.compile(
    r"""(?P<name>[A-Za-z0-9_.\-]*(?:key|token|secret|passw|auth|credential|cookie)[A-Za-z0-9_.\-]*)"""
    r"""["']?\s*[:=]\s*["']?(?P<value>[^\s"',}]{8,})""",
    re.IGNORECASE,
)
MIN_SECRET_LEN = 8  # shorter values are flags and placeholders; masking them would garble text


@dataclass(frozen=True)
class SecretEntry:
    where: str  # e.g. "env.ANTHROPIC_API_KEY"; never the value
    value: str


def is_secret_name(name: str, value: str) -> bool:
    if name in _NAMES_A_VARIABLE:
        return not _VARIABLE_NAME.match(value)
    return name not in _NOT_SECRET and bool(_SECRET_NAME.search(name))


def secret_entries(kind: str, text: str) -> list[SecretEntry]:
    """Values stored under secret-looking names in a ``kind`` file ("claude" JSON, "codex" TOML,
    "env"). A file that does not parse is scanned line by line instead."""
    found: list[SecretEntry] = []

    def walk(node: Any, where: str, name: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{where}.{key}" if where else str(key), str(key))
        elif isinstance(node, list):
            for value in node:
                walk(value, where, name)
        elif isinstance(node, str) and len(node) >= MIN_SECRET_LEN and is_secret_name(name, node):
            found.append(SecretEntry(where, node))

    try:
        if kind == "claude":
            walk(json.loads(text.lstrip("\ufeff")) if text.strip() else {}, "", "")
        elif kind == "codex":
            import tomllib

            walk(tomllib.loads(text), "", "")
        else:
            found.extend(_env_entries(text))
    except ValueError:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        found = [SecretEntry(m.group("name"), m.group("value")) for m in _ASSIGNMENT.finditer(text)]
    # A command line like our own key helper is not a secret.
    return [e for e in found if "driftdesk" not in e.value]


def _env_entries(text: str) -> list[SecretEntry]:
    try:
        lines = dotenv.parse_env_lines(text, Path(".env"))
    except dotenv.EnvParseError as exc:
        raise ValueError(str(exc)) from exc
    return [
        SecretEntry(key, value)
        for key, value in dotenv.assigned_values(lines)
        if is_secret_name(key, "x") and len(value) >= MIN_SECRET_LEN
    ]


def mask_secrets(kind: str, text: str) -> tuple[str, list[dict[str, str]]]:
    """``text`` with every key-like value masked (``sk-…7f3a``), and what was masked
    (``{"where", "shown_as"}``). Anything ``redact`` recognises is scrubbed as well."""
    masked: list[dict[str, str]] = []
    # Longest first, so a key that contains another is replaced whole.
    entries = sorted(secret_entries(kind, text), key=lambda e: len(e.value), reverse=True)
    for entry in entries:
        shown = mask_key(entry.value)
        # As written in the file: JSON and TOML strings may escape characters of the value.
        for form in {entry.value, json.dumps(entry.value)[1:-1]}:
            text = text.replace(form, shown)
        masked.append({"where": entry.where, "shown_as": shown})
    scrubbed = redact(text)
    if scrubbed != text:
        masked.append({"where": "(values that look like keys or bearer tokens)", "shown_as": ""})
    return scrubbed, masked
