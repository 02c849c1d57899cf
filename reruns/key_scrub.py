"""Masking the real key in what the metering proxy passes on (reruns/proxy.py) and what the
call recordings keep (reruns/recording.py). ``Passthrough`` is what of a 200 answer goes to the
agent (decoded, bounded, scrubbed); ``scrubbed_error_body`` is an error body's.

``KeyScrubber`` masks the key in bytes, in every shape one JSON or URL decoding turns into it.
``StreamScrubber`` masks it in an SSE stream whose events carry it in pieces: it reads each
event's text fields (Chat Completions deltas, Responses ``*.delta`` events, Messages
``content_block`` deltas: answer text, tool-call arguments, reasoning; which fields those are
is ``driftdesk.wire.stream_text``'s) and scrubs each field's
text joined across events, as the agent will join it. A field's text that ends with the start
of the key (more of it than the mask shows) is held back until the next piece says whether the
key follows; held text is never more than the key's length less one character. A start of the
key that the field's end (its protocol boundary, or the stream's) leaves incomplete is withheld,
as a body cut inside the key loses that start: released, it would hand the agent all of the key
but its last characters.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import zlib
from typing import Any

from driftdesk.secrets import mask_key, redact
from driftdesk.wire.stream_text import NOT_TEXT, list_index, text_places

# JSON's two-character escapes; any character may also be written \uXXXX.
_JSON_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _hex(value: int, digits: int) -> str:
    """A regex for ``value`` in hex, each letter digit in either case: ``2d`` -> ``2[dD]``."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{value:0{digits}x}")


def _utf16(code: int) -> list[int]:
    if code <= 0xFFFF:
        return [code]
    code -= 0x10000
    return [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]


def _char_pattern(char: str) -> tuple[str, int]:
    """A regex for every shape one key character may reach us in, and the longest shape's
    length in bytes: itself in either letter case, a JSON ``\\uXXXX`` escape (a surrogate pair
    past U+FFFF; hex in either case), its short JSON escape, URL-encoded. Letter case is spelt
    out rather than left to ``re.IGNORECASE``, which makes the scan several times slower."""
    shapes: dict[str, int] = {}  # regex: the bytes it matches
    for variant in {char, char.lower(), char.upper()}:
        if len(variant) != 1:  # "ß".upper() == "SS": not one character of the key
            continue
        encoded = variant.encode("utf-8", "surrogatepass")
        shapes[re.escape(variant)] = len(encoded)
        units = _utf16(ord(variant))
        shapes["".join(r"\\u" + _hex(unit, 4) for unit in units)] = 6 * len(units)
        if variant in _JSON_SHORT_ESCAPES:
            shapes[re.escape(_JSON_SHORT_ESCAPES[variant])] = 2
        if variant == " ":
            shapes[r"\+"] = 1
        shapes["".join("%" + _hex(byte, 2) for byte in encoded)] = 3 * len(encoded)
    longest_first = sorted(shapes, key=lambda shape: shapes[shape], reverse=True)
    return "(?:" + "|".join(longest_first) + ")", max(shapes.values())


def _compiled(pattern: str) -> re.Pattern[bytes]:
    return re.compile(pattern.encode("utf-8", "surrogatepass"))


class KeyScrubber:
    """Masks a key in bytes, in every shape a careless upstream may echo it: verbatim, with any
    mix of its characters JSON-escaped (``\\uXXXX`` of any of them, upper- or lower-case hex,
    ``\\/``) or URL-encoded, in any letter case. One JSON or URL decoding of what is left can
    never give the key back."""

    _SHORTEST_PARTIAL = 4  # key characters: a shorter start of the key at a cut end is kept

    def __init__(self, key: str) -> None:
        # Whole shapes the recorder looks for first (a cheap substring test) before it scrubs.
        self.shapes = tuple(
            sorted(
                {
                    key,
                    key.replace("/", "\\/"),
                    urllib.parse.quote(key, safe="", errors="surrogatepass"),
                    urllib.parse.quote_plus(key, errors="surrogatepass"),
                }
            )
        )
        per_char = [_char_pattern(c) for c in key]
        groups = [pattern for pattern, _ in per_char]
        # The start of the key (some characters, any shapes) at the very end of a cut body.
        partial = ""
        for group in reversed(groups[self._SHORTEST_PARTIAL :]):
            partial = f"(?:{group}{partial})?"
        # It may end inside one character's escape too ("\\u00", "%2").
        cut_escape = r"(?:\\(?:u[0-9a-fA-F]{0,3})?|%[0-9a-fA-F]?)?"
        partial = "".join(groups[: self._SHORTEST_PARTIAL]) + partial + cut_escape + r"\Z"
        never = "(?!)"  # stands for no key: an empty pattern would match everywhere
        self._pattern = _compiled("".join(groups) if key else never)
        self._partial_tail = _compiled(partial if len(key) >= self._SHORTEST_PARTIAL else never)
        self._mask = mask_key(key).encode()
        # The most bytes one shape of the key can take: a stream holds back one less than this.
        self.longest = max(sum(size for _, size in per_char), 1)
        # What of the key its mask shows ("sk-", two characters, or none of a short key): a
        # stream may let that much of a start of the key go before it knows; from one more
        # character on, it holds the text back.
        visible = len(self._mask.split("…".encode())[0]) if key else 0
        held = ""
        for group in reversed(groups[visible + 1 : len(key) - 1]):
            held = f"(?:{group}{held})?"
        held = "".join(groups[: visible + 1]) + held + cut_escape + r"\Z"
        self._held_start = _compiled(held if len(key) > visible + 1 else never)
        self._mask_rest = self._mask[visible:]

    def scrub(self, data: bytes) -> bytes:
        return self._pattern.sub(self._mask, data)

    def found(self, text: str) -> bool:
        return self._pattern.search(text.encode("utf-8", "surrogateescape")) is not None

    def stream(self) -> StreamScrubber:
        """A scrubber for one SSE stream's events (its own state)."""
        return StreamScrubber(self)

    def scrub_piece(self, field: TextField, piece: str) -> str:
        """The part of ``piece`` (the next text of ``field``) that can go out now: the key
        masked where ``field``'s text so far completes it, and a start of it held back."""
        new = field.held + piece.encode("utf-8", "surrogatepass")
        base = len(field.sent)
        window = field.sent + new
        out = bytearray()
        at = base
        # Mostly there is no key: one search says so, cheaper than setting up finditer.
        first = self._pattern.search(window)
        for match in self._pattern.finditer(window, first.start()) if first else ():
            if match.end() <= base:
                continue
            if match.start() < base:
                # The key began in text already sent (no more of it than the mask shows).
                gone = window[match.start() : base]
                out += self._mask[len(gone) :] if self._mask.startswith(gone) else self._mask_rest
            else:
                out += window[at : match.start()] + self._mask
            at = match.end()
        # A start of the key is no longer than its longest shape: look only that far back.
        start = self._held_start.search(window, max(len(window) - self.longest, 0))
        keep = max(at, start.start()) if start else len(window)
        out += window[at:keep]
        field.held = window[keep:]
        field.sent = (field.sent + out)[-self.longest :]
        try:
            return out.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:  # a cut inside a character: never expected, never fatal
            return out.decode("utf-8", "replace")

    def without_partial_tail(self, data: bytes) -> bytes:
        """``data`` less a start of the key it ends with (a body cut at a bound)."""
        match = self._partial_tail.search(data, max(len(data) - self.longest, 0))
        return data[: match.start()] if match else data


class TextField:
    """One text field of a stream (a choice's content, a tool call's arguments, a content
    block's text...): the end of what went out (to find a key begun there) and what is held."""

    __slots__ = ("held", "sent")

    def __init__(self) -> None:
        self.sent = b""
        self.held = b""


# Built once: json.dumps with arguments builds an encoder per call (half its cost here).
_UTF8_EVENT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_ASCII_EVENT = json.JSONEncoder(separators=(",", ":"))


def _dumped(event: dict[str, Any]) -> bytes:
    try:
        return _UTF8_EVENT.encode(event).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a \\uXXXX escape: keep it escaped
        return _ASCII_EVENT.encode(event).encode("ascii")


class StreamScrubber:
    """Scrubs one SSE stream, whole lines at a time, across its events (see the module's
    docstring). Every JSON event goes out re-encoded from what was read of it, so the agent
    parses exactly what was scrubbed (a duplicate key cannot hide a second value)."""

    def __init__(self, scrubber: KeyScrubber) -> None:
        self._scrubber = scrubber
        self._fields: dict[tuple[Any, ...], TextField] = {}
        self._mid_line = False  # the last line was passed on before its end (too long to hold)

    def lines(self, data: bytes, *, ends_mid_line: bool = False) -> bytes:
        """``data``: whole lines (the last one may lack its newline only at the stream's end
        or past the held-line bound, ``ends_mid_line``)."""
        parts = data.split(b"\n")
        start = 0
        if self._mid_line:  # the rest of a line already partly sent: passed on as it is
            start = 1
        for i in range(start, len(parts)):
            part = parts[i]
            if part.startswith(b"data:"):
                parts[i] = self._line(part)
        self._mid_line = ends_mid_line or (self._mid_line and len(parts) == 1)
        return b"\n".join(parts)

    def _line(self, line: bytes) -> bytes:
        payload = line[5:].strip()
        if not payload.startswith(b"{"):
            return line
        try:
            event = json.loads(payload)
        except ValueError:  # the meter says it is no event of the protocol
            return line
        if not isinstance(event, dict):
            return line
        self._event(event)
        return b"data: " + _dumped(event) + (b"\r" if line.endswith(b"\r") else b"")

    def _feed(self, where: tuple[Any, ...], piece: str) -> str:
        field = self._fields.get(where)
        if field is None:
            field = self._fields[where] = TextField()
        return self._scrubber.scrub_piece(field, piece)

    def _final(self, where: tuple[Any, ...]) -> None:
        """The fields under ``where`` are complete: what they hold is withheld."""
        size = len(where)
        for key in [key for key in self._fields if key[:size] == where]:
            del self._fields[key]

    def _event(self, event: dict[str, Any]) -> None:
        for place in text_places(event):
            if place.kind == "walk":
                assert place.holder is not None
                self._walk(place.holder, place.where)
            elif place.kind == "piece":
                assert place.holder is not None
                place.holder[place.key] = self._feed(place.where, place.holder[place.key])
            elif place.kind == "final":
                self._final(place.where)
            else:  # the end of the stream's answer
                self._fields.clear()

    def _walk(self, value: dict[str, Any], where: tuple[Any, ...]) -> None:
        """Scrub every text in a delta: a tool call in a list is known by its ``index``."""
        for name, item in value.items():
            if isinstance(item, str):
                if name not in NOT_TEXT and (item or (*where, name) in self._fields):
                    value[name] = self._feed((*where, name), item)
            elif isinstance(item, dict):
                self._walk(item, (*where, name))
            elif isinstance(item, list):
                for position, entry in enumerate(item):
                    if isinstance(entry, dict):
                        self._walk(entry, (*where, name, list_index(entry, position)))


# --- what the proxy passes on -------------------------------------------------------------------

# Content encodings an answer may come in that the proxy decodes (to scrub and meter it).
DECODABLE = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
MAX_HELD_LINE = 1024 * 1024  # an SSE line longer than this is passed on without waiting for its end


class Passthrough:
    """What goes to the agent from a 200 answer: decoded (bounded), scrubbed of the key even
    when it straddles two chunks. An SSE stream is passed on in whole lines, each event at once,
    its events' text scrubbed across events too (``StreamScrubber``); other bodies hold back a
    key's length."""

    def __init__(self, scrubber: KeyScrubber, sse: bool, encoding: str, limit: int) -> None:
        self._scrubber = scrubber
        self._events = scrubber.stream() if sse else None
        self._held = b""
        self._inflate = zlib.decompressobj(DECODABLE[encoding]) if encoding else None
        self._budget = limit
        self.too_large = False

    def _decoded(self, chunk: bytes) -> bytes:
        # Plain or inflated, the agent gets at most ``limit`` bytes of one answer.
        if self._inflate is None:
            out = chunk[: self._budget + 1]
        else:
            out = self._inflate.decompress(chunk, self._budget + 1)
        if len(out) > self._budget:
            self.too_large = True
        self._budget -= len(out)
        return out

    def feed(self, chunk: bytes) -> bytes:
        data = self._held + self._decoded(chunk)
        if self._events is None:
            data = self._scrubber.scrub(data)
            cut = max(len(data) - (self._scrubber.longest - 1), 0)
            self._held = data[cut:]
            return data[:cut]
        cut = data.rfind(b"\n") + 1
        out = self._events.lines(self._scrubber.scrub(data[:cut])) if cut else b""
        rest = data[cut:]
        if len(rest) > MAX_HELD_LINE:
            # A line this long is passed on without waiting for its end (its events unread).
            rest = self._scrubber.scrub(rest)
            keep = len(rest) - (self._scrubber.longest - 1)
            out += self._events.lines(rest[:keep], ends_mid_line=True)
            rest = rest[keep:]
        self._held = rest
        return out

    def flush(self) -> bytes:
        rest = self._held
        if self._inflate is not None and not self.too_large:
            rest += self._inflate.flush()
        self._held = b""
        rest = self._scrubber.scrub(rest)
        return self._events.lines(rest) if self._events is not None and rest else rest


def scrubbed_error_body(
    scrubber: KeyScrubber, key: str, raw: bytes, truncated: bool, encoding: str, limit: int
) -> bytes:
    """An error body without ``key`` (masked), decoded first if it was compressed (up to
    ``limit`` bytes); withheld (empty) when its ``encoding`` cannot be read."""
    if encoding in ("gzip", "x-gzip", "deflate"):
        try:
            wbits = 16 + zlib.MAX_WBITS if "gzip" in encoding else zlib.MAX_WBITS
            raw = zlib.decompressobj(wbits).decompress(raw, limit)
            # decoded up to the bound: cut there like a read would be
            truncated = truncated or len(raw) >= limit
        except zlib.error:
            raw = b""
    elif encoding not in ("", "identity"):
        raw = b""  # cannot read it, so cannot scrub it: withhold it
    if not raw:
        return b""
    if truncated:  # a body cut at the bound may end with the start of the key: drop it
        raw = scrubber.without_partial_tail(raw)
    scrubbed = scrubber.scrub(raw)
    return redact(scrubbed.decode("utf-8", "surrogateescape"), [key]).encode(
        "utf-8", "surrogateescape"
    )
