"""Showing and scrubbing secrets. A key is shown masked, and scrubbed from any text we keep."""

from __future__ import annotations

import base64
import bisect
import functools
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any

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
# What each pattern's match must contain, lower-cased: most text holds none of them, and one
# substring test is far cheaper than a case-insensitive scan of the text.
_KEY_PATTERN_WORDS = ("sk-", "bearer", "x-api-key")


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


# --- finding a secret however it is written ---------------------------------------------------
#
# Text is looked at in two views besides itself: ``squeezed`` (every whitespace character
# removed: line breaks of ``base64``/``xxd -p`` output, a wrapped line) and ``decoded`` (the
# squeezed text with each JSON escape, at any depth, and each run of URL escapes decoded; an
# escaped line break or space removed too). Each view is searched for the secret's shapes
# written without whitespace: the secret itself (and, URL-form, with "+" for its spaces), its
# hex in either case, base64 and base64url whole and at each of the three alignments. A shape
# found is mapped back to the characters of the text it came from, which are masked.

_ASCII_SPACE = dict.fromkeys((c for c in range(128) if chr(c).isspace()), None)
_SPACES = re.compile(r"\s+")
# A JSON escape at any depth (its backslash written 1, 2, 4... times) or a run of URL escapes.
_ESCAPED = re.compile(r"\\+(?:u[0-9a-fA-F]{4}|.)|%[0-9a-fA-F]{2}(?:%[0-9a-fA-F]{2})*", re.DOTALL)


def _escapes(text: str) -> Iterator[re.Match[str]]:
    """Each escape (``_ESCAPED``) in ``text``, left to right. Found by ``str.find`` and matched
    where it stands: in text with few escapes (most), many times cheaper than a regex scan."""
    find = text.find
    backslash, percent = find("\\"), find("%")
    while backslash >= 0 or percent >= 0:
        at = percent if backslash < 0 or 0 <= percent < backslash else backslash
        match = _ESCAPED.match(text, at)
        end = match.end() if match else at + 1
        if match:
            yield match
        if backslash >= 0 and backslash < end:
            backslash = find("\\", end)
        if percent >= 0 and percent < end:
            percent = find("%", end)


def _squeezed(text: str) -> str:
    # The same characters either way: translate (its ASCII fast path) is several times cheaper
    # than split and join on long text, and several times dearer on a short line.
    if len(text) > 512 and text.isascii():
        return text.translate(_ASCII_SPACE)
    return "".join(text.split())


def _percent_decoded(run: str) -> tuple[str, str]:
    """A run of URL escapes decoded (a lone surrogate of a key's bad byte as itself), and the
    error handler that decoded it (which also says how many bytes each character was)."""
    raw = bytes.fromhex(run.replace("%", ""))
    try:
        return raw.decode("utf-8", "surrogatepass"), "surrogatepass"
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape"), "surrogateescape"


def _unescaped(unit: str) -> str:
    """One JSON escape, at any depth, as its character ("" for a space or line break)."""
    tail = unit.lstrip("\\")
    if not tail:  # backslashes at the very end
        return "\\"
    if len(tail) == 5 and tail[0] == "u":
        tail = chr(int(tail[1:], 16))
    elif tail in "nrtbf":
        return ""
    return "" if tail.isspace() else tail


def _decoded_unit(match: re.Match[str]) -> str:
    unit = match.group()
    if unit[0] == "%":
        return "".join(_percent_decoded(unit)[0].split())
    return _unescaped(unit)


# Escapes as common as "\\n" or '\\"' in JSON text, decoded once, not once per occurrence.
_DECODED_UNITS: dict[str, str] = {}


def _decoded(squeezed: str) -> str:
    if "\\" not in squeezed and "%" not in squeezed:
        return squeezed
    parts = []
    done = 0
    known = _DECODED_UNITS
    for match in _escapes(squeezed):
        unit = match.group()
        decoded = known.get(unit)
        if decoded is None:
            decoded = _decoded_unit(match)
            if len(unit) <= 8 and len(known) < 4096:
                known[unit] = decoded
        parts += [squeezed[done : match.start()], decoded]
        done = match.end()
    parts.append(squeezed[done:])
    return "".join(parts)


class _View:
    """A view of a text (``squeezed`` or ``decoded``) that knows where each of its characters
    came from: built only when a shape was found (rarely), by the same rules as the fast
    functions above."""

    def __init__(self, text: str, decode: bool) -> None:
        self.starts: list[int] = []  # per segment: its first character in the view
        self.spans: list[tuple[int, int, bool]] = []  # its source (start, end), linear or whole
        parts: list[str] = []
        at = 0  # the view's length so far
        done = 0  # the source consumed so far
        for match in _escapes(text) if decode else _SPACES.finditer(text):
            if match.start() > done:  # plain characters, one for one
                at = self._add(parts, text[done : match.start()], done, match.start(), at, True)
            done = match.end()
            if not decode:
                continue  # whitespace: nothing in the view
            unit = match.group()
            if unit[0] == "%":  # each character of the run is its own piece of the source
                where = match.start()
                chars, errors = _percent_decoded(unit)
                for char in chars:
                    size = 3 * len(char.encode("utf-8", errors))
                    if not char.isspace():
                        at = self._add(parts, char, where, where + size, at, False)
                    where += size
            else:
                char = _unescaped(unit)
                if char:
                    at = self._add(parts, char, match.start(), match.end(), at, False)
        if done < len(text):
            self._add(parts, text[done:], done, len(text), at, True)
        self.text = "".join(parts)

    def _add(
        self, parts: list[str], piece: str, start: int, end: int, at: int, linear: bool
    ) -> int:
        parts.append(piece)
        self.starts.append(at)
        self.spans.append((start, end, linear))
        return at + len(piece)

    def source(self, first: int, last: int) -> tuple[int, int]:
        """The source characters that the view's ``first``..``last`` (inclusive) came from."""
        return self._of(first)[0], self._of(last)[1]

    def _of(self, index: int) -> tuple[int, int]:
        segment = bisect.bisect_right(self.starts, index) - 1
        start, end, linear = self.spans[segment]
        if linear:
            start += index - self.starts[segment]
            return start, start + 1
        return start, end


class _SecretShapes:
    """What ``redact`` looks for of one secret: its shapes written without whitespace (each at
    least ``_SHORTEST_ENCODED`` characters: shorter, they would match ordinary text), and the
    secret itself when it is shorter (looked for only as it is)."""

    def __init__(self, secret: str) -> None:
        raw = secret.encode("utf-8", "surrogatepass")
        whole = base64.b64encode(raw).decode("ascii")
        plain = {"".join(secret.split()), "".join(secret.replace(" ", "+").split())}
        encoded = {whole, whole.rstrip("="), *_base64_cores(raw)}
        encoded |= {shape.replace("+", "-").replace("/", "_") for shape in encoded}
        encoded |= {raw.hex(), raw.hex().upper()}
        self.needles = tuple(s for s in plain | encoded if len(s) >= _SHORTEST_ENCODED)
        self.exact = secret if len(secret) < _SHORTEST_ENCODED else None
        self.mask = mask_key(secret)

    def in_view(self, view: str) -> bool:
        return any(map(view.__contains__, self.needles))

    def spans(self, view: _View) -> list[tuple[int, int]]:
        found = []
        for needle in self.needles:
            at = view.text.find(needle)
            while at >= 0:
                found.append(view.source(at, at + len(needle) - 1))
                at = view.text.find(needle, at + 1)
        return found


secret_finder = functools.lru_cache(maxsize=256)(_SecretShapes)


def _masked(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with each span (merged where they meet) replaced by its mask."""
    out = []
    done = 0
    merged: list[list[Any]] = []
    for start, end, mask in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, mask])
    for start, end, mask in merged:
        out += [text[done:start], mask]
        done = end
    out.append(text[done:])
    return "".join(out)


def _spans(text: str, finders: list[_SecretShapes]) -> list[tuple[int, int, str]]:
    """Where ``text`` holds each secret, and the mask for it: the secret itself when short,
    then whatever its decoded view shows and, when decoding changed anything, its squeezed
    view (decoding may hide a secret written as it is: after a backslash, or holding "%XX")."""
    spans = []
    for finder in finders:
        if finder.exact is not None:
            at = text.find(finder.exact)
            while at >= 0:
                spans.append((at, at + len(finder.exact), finder.mask))
                at = text.find(finder.exact, at + 1)
    squeezed = _squeezed(text)
    decoded = _decoded(squeezed)
    for fast, decode in ((decoded, True), (squeezed, False)):
        if not decode and fast == decoded:
            break
        present = [finder for finder in finders if finder.in_view(fast)]
        if not present:
            continue
        # Found: map the view back to the text (decoded is built on squeezed, on the text).
        outer = _View(text, decode=False)
        view = _View(outer.text, decode=True) if decode else outer
        for finder in present:
            for start, end in finder.spans(view):
                if decode:
                    start, end = outer.source(start, end - 1)
                spans.append((start, end, finder.mask))
    return spans


def secret_spans(text: str, secrets: Iterable[str | None]) -> list[tuple[int, int, str]]:
    """``(start, end, mask)`` of each place ``redact`` masks one of ``secrets`` in ``text``
    (spans may overlap): for a writer that must mask text it keeps in pieces."""
    finders = [secret_finder(s) for s in secrets if s and len(s) >= 4]
    return _spans(text, finders) if finders else []


def holds_secret(text: str, secrets: Iterable[str | None]) -> bool:
    """Whether ``redact`` would find one of ``secrets`` in ``text`` (a cheap test first)."""
    finders = [secret_finder(s) for s in secrets if s and len(s) >= 4]
    if not finders:
        return False
    if any(f.exact is not None and f.exact in text for f in finders):
        return True
    squeezed = _squeezed(text)
    decoded = _decoded(squeezed)
    return any(f.in_view(squeezed) or f.in_view(decoded) for f in finders)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove the given secrets, however written (verbatim, JSON-escaped at any depth,
    URL-encoded, hex, base64 or base64url at any alignment, each broken by whitespace or line
    breaks anywhere), then anything that looks like a key."""
    finders = [secret_finder(s) for s in secrets if s and len(s) >= 4]
    if finders:
        spans = _spans(text, finders)
        if spans:
            text = _masked(text, spans)
    lowered = text.lower()
    for word, pattern in zip(_KEY_PATTERN_WORDS, _KEY_PATTERNS, strict=True):
        if word in lowered:
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
