"""Showing and scrubbing secrets. A key is shown masked, and scrubbed from any text we keep."""

from __future__ import annotations

import base64
import functools
import re
import urllib.parse
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


# An encoded shape shorter than this is not looked for: it would match ordinary text.
_SHORTEST_ENCODED = 8


def _base64_cores(raw: bytes) -> list[str]:
    """The base64 characters that depend on ``raw`` alone, at each of the three byte offsets it
    may sit at inside a longer encoded blob (so padded, unpadded or embedded, each holds one)."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        first = -(-8 * offset // 6)  # the first character with no bits of the zero prefix
        last = 8 * (offset + len(raw)) // 6  # past the last one wholly made of ``raw``'s bits
        cores.append(encoded[first:last])
    return cores


def _shapes(secret: str) -> tuple[str, ...]:
    """``secret`` and its common encodings, longest first (a longer one is replaced whole before
    a shorter one inside it): base64 (padded, unpadded, inside a longer blob), base64url,
    URL-encoded (``%XX`` and ``+``), hex in either case."""
    raw = secret.encode("utf-8", "surrogatepass")
    whole = base64.b64encode(raw).decode("ascii")
    encoded = {whole, whole.rstrip("="), *_base64_cores(raw)}
    encoded |= {shape.replace("+", "-").replace("/", "_") for shape in encoded}  # base64url
    encoded |= {  # a lone surrogate (a bad byte of an environment variable) as its bytes
        urllib.parse.quote(secret, safe="", errors="surrogatepass"),
        urllib.parse.quote_plus(secret, errors="surrogatepass"),
        raw.hex(),
        raw.hex().upper(),
    }
    shapes = {shape for shape in encoded if len(shape) >= _SHORTEST_ENCODED} - {secret}
    return (secret, *sorted(shapes, key=len, reverse=True))


# Cached: each line a writer redacts asks again for the same few secrets' shapes. Applied by
# hand, not as a decorator, so that mutation testing (which skips decorated functions) reaches
# ``_shapes``.
secret_shapes = functools.lru_cache(maxsize=256)(_shapes)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove the given secrets, verbatim or in a common encoding (``secret_shapes``), then
    anything that looks like a key."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            # A substring test per shape first: most text holds none, and ``in`` is cheap.
            found = [shape for shape in secret_shapes(secret) if shape in text]
            if found:
                masked = mask_key(secret)
                for shape in found:
                    text = text.replace(shape, masked)
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
