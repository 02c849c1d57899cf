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
from driftdesk.secrets import key_like_spans, mask_key

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


# A reference to a variable (``$VAR``, ``${VAR}``, ``${VAR:-default}``), not the secret itself.
_REFERENCE = re.compile(r"^\$(\{[A-Za-z_][A-Za-z0-9_]*(:?[-=?+][^}]*)?\}|[A-Za-z_][A-Za-z0-9_]*)$")
# A file path: absolute, home-relative, dot-relative or a Windows drive path.
_PATH = re.compile(r"^(/|~/|\./|\.\./|[A-Za-z]:[\\/])\S*$")
# user:password@ in any URL, whatever name it is stored under.
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@\"']+:(?P<password>[^\s/@\"']+)@")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://\S+$")


def is_plain_value(value: str) -> bool:
    """A value stored under a secret-looking name that is still no secret: a variable reference,
    an empty string, a file path, or a URL carrying no credentials (no password, no key-like
    query parameter). Masking these would only garble the text."""
    from urllib.parse import parse_qsl, urlsplit

    stripped = value.strip()
    if not stripped or _REFERENCE.match(stripped) or _PATH.match(stripped):
        return True
    if _URL.match(stripped):
        try:
            parts = urlsplit(stripped)
            query = parse_qsl(parts.query, keep_blank_values=True)
        except ValueError:
            return False
        return parts.password is None and not any(_SECRET_NAME.search(k) for k, _ in query)
    return False


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
        elif (
            isinstance(node, str)
            and len(node) >= MIN_SECRET_LEN
            and is_secret_name(name, node)
            and not is_plain_value(node)
        ):
            found.append(SecretEntry(where, node))

    try:
        if kind == "claude":
            walk(json.loads(text.lstrip("\ufeff")) if text.strip() else {}, "", "")
        elif kind == "codex":
            import tomllib

            walk(tomllib.loads(text), "", "")
        else:
            found.extend(_env_entries(text))
    except (ValueError, RecursionError):  # JSONDecodeError and TOMLDecodeError are ValueErrors
        found = [
            SecretEntry(m.group("name"), m.group("value"))
            for m in _ASSIGNMENT.finditer(text)
            if not is_plain_value(m.group("value"))
        ]
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
        if is_secret_name(key, "x") and len(value) >= MIN_SECRET_LEN and not is_plain_value(value)
    ]


@dataclass
class MaskedValue:
    """One distinct secret string masked in a copy: ``spans`` are (start, end) in the masked
    text where ``shown`` stands for ``value`` (exactly as the file held it)."""

    where: str
    value: str
    shown: str
    spans: list[tuple[int, int]]

    def __repr__(self) -> str:  # never the value
        return f"MaskedValue({self.where!r}, {self.shown!r}, {len(self.spans)} spans)"


def mask_exact(kind: str, text: str) -> tuple[str, list[MaskedValue]]:
    """``text`` with every key-like value masked (``sk-…7f3a``), and each masked value with the
    places it stood, so ``unmask`` can give the exact text back."""
    where_of: dict[str, str] = {}
    for entry in sorted(secret_entries(kind, text), key=lambda e: len(e.value), reverse=True):
        # As written in the file: JSON and TOML strings may escape characters of the value.
        for form in (
            entry.value,
            json.dumps(entry.value, ensure_ascii=False)[1:-1],
            json.dumps(entry.value)[1:-1],
        ):
            where_of.setdefault(form, entry.where)
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= a or start >= b for a, b in taken)

    found: list[tuple[int, int, str]] = []  # (start, end, where)
    for form in sorted(where_of, key=len, reverse=True):  # a key containing another wins
        position = text.find(form)
        while position != -1:
            end = position + len(form)
            if free(position, end):
                taken.append((position, end))
                found.append((position, end, where_of[form]))
            position = text.find(form, end)
    for start, end in key_like_spans(text):
        if end - start >= 4 and free(start, end):
            taken.append((start, end))
            found.append((start, end, "(a value that looks like a key or bearer token)"))
    for match in _URL_PASSWORD.finditer(text):
        start, end = match.span("password")
        if end - start >= 4 and free(start, end):
            taken.append((start, end))
            found.append((start, end, "(the password in a URL)"))
    out: list[str] = []
    by_value: dict[str, MaskedValue] = {}
    cursor = shift = 0
    for start, end, where in sorted(found):
        value = text[start:end]
        shown = mask_key(value)
        out.append(text[cursor:start])
        out.append(shown)
        masked = by_value.setdefault(value, MaskedValue(where, value, shown, []))
        masked.spans.append((start + shift, start + shift + len(shown)))
        shift += len(shown) - len(value)
        cursor = end
    out.append(text[cursor:])
    return "".join(out), list(by_value.values())


def unmask(masked_text: str, values: list[MaskedValue]) -> str:
    """The exact text ``mask_exact`` masked, from the masked text and the values."""
    spans = sorted(((s, e, v.shown, v.value) for v in values for s, e in v.spans), reverse=True)
    text = masked_text
    for start, end, shown, value in spans:
        if text[start:end] != shown:
            raise ValueError(f"the masked copy does not hold {shown!r} at {start}")
        text = text[:start] + value + text[end:]
    return text


def mask_secrets(kind: str, text: str) -> tuple[str, list[dict[str, str]]]:
    """``text`` with every key-like value masked, and what was masked (``{"where", "shown_as"}``)."""
    masked_text, values = mask_exact(kind, text)
    return masked_text, [{"where": v.where, "shown_as": v.shown} for v in values]
