"""Showing and scrubbing secrets. A key is shown masked, and scrubbed from any text we keep."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Bearer tokens and provider-style keys that may appear in error bodies or logs. Each pattern
# keeps its group 1 (the prefix) and loses the rest. Written in the syntax Python's ``re``
# (ASCII mode) and RE2 share: the JSONL import applies the same patterns in DuckDB's
# ``regexp_replace`` (a Python function in SQL would need numpy).
KEY_PATTERN_SOURCES = (
    r"\b(sk-[A-Za-z0-9_\-]{4})[A-Za-z0-9_\-]{8,}",
    r"(?i)(bearer\s+)[A-Za-z0-9_\-\.=]{8,}",
    r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9_\-\.]{8,}",
)
REDACTED = "…redacted"  # what stands after a kept prefix
_KEY_PATTERNS = [re.compile(source, re.ASCII) for source in KEY_PATTERN_SOURCES]


def mask_key(key: str | None) -> str:
    """``sk-abc...7f3a`` style: enough to recognise a key, never enough to use it."""
    if not key:
        return "(none)"
    if len(key) <= 8:
        return "…" + "•" * 4
    prefix = key[:3] if key.startswith("sk-") else key[:2]
    return f"{prefix}…{key[-4:]}"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove the given secrets verbatim, then anything that looks like a key."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, mask_key(secret))
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def key_like_spans(text: str) -> list[tuple[int, int]]:
    """Where ``redact`` would scrub ``text``: (start, end) of each key-like value, without the
    prefix it keeps ("Bearer ", "x-api-key: ", "sk-abcd")."""
    spans = []
    for pattern in _KEY_PATTERNS:
        for match in pattern.finditer(text):
            spans.append((match.end(1), match.end()))
    return spans
