"""The proxy's key scrubbing at its edges: the shapes each key character may take, a key with
characters past U+FFFF or a lone surrogate, a body cut inside a key, an answer held back across
chunks, and the error body's encodings. Bodies are written byte by byte; where the proxy is
involved it runs over loopback against a provider that echoes what it is told to."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.parse
import zlib
from pathlib import Path

import pytest
import test_proxy_escaped_keys as escaped_keys
from test_proxy_escaped_keys import REAL, SHAPES, EchoingProvider, _answer

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.key_scrub import MAX_HELD_LINE, KeyScrubber, Passthrough
from driftdesk.reruns.proxy import MeteringProxy

# The provider that echoes what it is told to and a proxy in front of it: those tests' fixtures.
provider = escaped_keys.provider
proxy = escaped_keys.proxy


def test_a_key_with_a_lone_surrogate_is_scrubbed_and_the_proxy_starts_with_it(
    tmp_path: Path,
) -> None:
    # A key read from a non-UTF-8 environment variable holds its bad byte as a surrogate.
    key = "sec\udcffret-value-0123"
    scrubber = KeyScrubber(key)
    escaped = b'{"m": "sec\\udcffret-value-0123"}'
    assert json.loads(escaped)["m"] == key
    assert scrubber.scrub(escaped) == b'{"m": "se\xe2\x80\xa60123"}'
    meter = MeteringProxy(
        run_id="r",
        upstream_base_url="http://127.0.0.1:9/v1",
        protocol="openai",
        real_key=key,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
    )
    assert meter.run_key != key


async def test_a_compressed_error_body_cut_at_the_bound_inside_the_key_drops_its_start(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    # Small on the wire, 64 KiB and more once decoded: the decoding stops at the bound, inside
    # the key (7 escaped characters and half of the 8th before it), as a read cut there would.
    provider.status = 401
    provider.encoding = "gzip"
    shape = SHAPES["every character"].encode()
    head = b'{"m": "'
    decoded = head + b"x" * (64 * 1024 - len(head) - 46) + shape + b'"}' + b" " * 4096
    provider.body = gzip.compress(decoded)
    assert len(provider.body) < 4096
    status, body = await _answer(proxy)
    assert status == 401
    assert shape[:24] not in body  # "gw_L", escaped: four characters of the key
    assert body.endswith(b"x")


# A key with a character of each UTF-8 length (é: 2 bytes, €: 3, 𝄞 and the plane edges: 4),
# U+FFFF (the last that is one JSON \u escape), a space, a slash and a letter case to swap.
WIDE = "Gw é€/𝄞\U00010000\U0010ffff\uffff-key0123"


def _shape(char: str, kind: str) -> str:
    """``char`` written as ``kind`` says, by hand (no json or urllib helper)."""
    encoded = char.encode("utf-8")
    if kind == "swapped case":
        return char.swapcase()
    if kind in ("\\u", "\\U"):
        code = ord(char)
        units = (
            [code]
            if code <= 0xFFFF
            else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
        )
        return "".join(("\\u%04x" if kind == "\\u" else "\\u%04X") % unit for unit in units)
    if kind in ("%XX", "%xx"):
        return "".join(("%%%02X" if kind == "%XX" else "%%%02x") % byte for byte in encoded)
    if kind == "short":
        return {"/": "\\/", " ": "+"}.get(char, char)
    return char


KINDS = ["swapped case", "\\u", "\\U", "%XX", "%xx", "short"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_past_ascii_is_masked_with_every_character_in_one_shape(kind: str) -> None:
    shape = "".join(_shape(c, kind) for c in WIDE)
    assert shape != WIDE
    body = b'{"error": "bad key: ' + shape.encode() + b'"}'
    message = json.loads(body)["error"].removeprefix("bad key: ")
    assert urllib.parse.unquote_plus(message).lower() == WIDE.lower()  # the key, decoded
    assert KeyScrubber(WIDE).scrub(body) == b'{"error": "bad key: Gw\xe2\x80\xa60123"}'


def test_only_the_key_is_masked_not_a_near_miss() -> None:
    scrubber = KeyScrubber(WIDE)
    for near in (
        WIDE[:-1],  # one character short
        WIDE.replace("-", "+"),  # "+" stands for a space only
        WIDE.replace("€", "%E2%82"),  # a character's bytes cut short
        WIDE.replace("𝄞", "\\ud834"),  # half a surrogate pair
    ):
        body = b"k=" + near.encode() + b";"
        assert scrubber.scrub(body) == body, near
        assert not scrubber.found(near)


def test_a_key_ending_in_a_percent_sign_is_masked_with_its_whole_escape() -> None:
    # "%" also starts "%25": the longer shape is tried first, so nothing of it is left over.
    scrubber = KeyScrubber("pct-0123456789%")
    assert scrubber.scrub(b"k=pct-0123456789%25;") == b"k=pc\xe2\x80\xa6789%;"
    assert scrubber.scrub(b"k=pct-0123456789\\u0025;") == b"k=pc\xe2\x80\xa6789%;"


def test_a_key_with_characters_whose_upper_case_is_two_is_masked() -> None:
    # "ß".upper() == "SS": not a shape of one key character, skipped and the others kept.
    # Which variant comes first depends on string hashing, so many such characters are used.
    key = "key-ßﬀﬁﬂﬃﬄﬅﬆŉǰΐΰևẖẗẘẙẚ-0123"
    scrubber = KeyScrubber(key)
    assert scrubber.scrub(b"k=" + key.encode() + b";") == b"k=ke\xe2\x80\xa60123;"
    assert (
        scrubber.scrub(b"k=" + key.upper().encode() + b";") == b"k=" + key.upper().encode() + b";"
    )


def test_the_held_back_bytes_are_the_longest_shape_less_one() -> None:
    # Per character, its longest shape in bytes: \uXXXX (6), two of them past U+FFFF (12), or
    # %XX per UTF-8 byte when that is longer (€: 9).
    longest = {"G": 6, "w": 6, " ": 6, "é": 6, "€": 9, "/": 6, "𝄞": 12, "\U00010000": 12}
    longest |= {"\U0010ffff": 12, "\uffff": 9, "-": 6, "k": 6, "e": 6, "y": 6}
    longest |= {digit: 6 for digit in "0123"}
    scrubber = KeyScrubber(WIDE)
    assert scrubber.longest == sum(longest[c] for c in WIDE) == 132
    passthrough = Passthrough(scrubber, sse=False, encoding="", limit=10_000)
    assert passthrough.feed(b"x" * 1000) == b"x" * (1000 - 131)
    assert passthrough.flush() == b"x" * 131


def test_no_key_masks_nothing_and_holds_nothing_back() -> None:
    scrubber = KeyScrubber("")
    assert scrubber.scrub(b"any body") == b"any body"
    assert not scrubber.found("any header")
    assert scrubber.without_partial_tail(b"any body") == b"any body"
    assert Passthrough(scrubber, sse=False, encoding="", limit=100).feed(b"abc") == b"abc"


def test_a_start_of_the_key_at_the_cut_is_dropped_from_four_characters() -> None:
    assert KeyScrubber("abcd").without_partial_tail(b"x ab\\u0063d") == b"x "
    assert KeyScrubber("abc").without_partial_tail(b"x abc") == b"x abc"  # never a start
    scrubber = KeyScrubber(WIDE)
    # cut inside the 5th character's escape, its hex in upper case; or inside its %XX
    assert scrubber.without_partial_tail(b"x Gw \\u00E9\\u20A") == b"x "
    assert scrubber.without_partial_tail(b"x Gw \xc3\xa9%E") == b"x "


def test_a_whole_key_just_before_the_cut_is_masked_not_taken_for_a_start() -> None:
    # Only a tail as long as the key's longest shape is looked at: a start of the key is
    # never longer. A whole escaped key before a cut escape is masked like anywhere else.
    scrubber = KeyScrubber(REAL)
    body = b"x " + SHAPES["every character"].encode() + b"\\u00"
    assert scrubber.without_partial_tail(body) == body
    assert scrubber.scrub(body) == b"x gw\xe2\x80\xa6cdef\\u00"


def test_a_header_value_with_a_byte_that_is_not_utf8_is_looked_at() -> None:
    # aiohttp gives such a byte as a lone surrogate (surrogateescape).
    scrubber = KeyScrubber(REAL)
    assert not scrubber.found("v\udcff")
    assert scrubber.found("v\udcff " + REAL)


async def test_an_error_body_labelled_gzip_that_is_zlib_is_withheld(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    # Read as what it says it is, or not at all: a zlib stream is no gzip body.
    provider.status = 401
    provider.encoding = "gzip"
    provider.body = zlib.compress(b'{"error": "bad key: ' + REAL.encode() + b'"}')
    assert (await _answer(proxy)) == (401, b"")


async def test_an_error_body_with_a_blank_content_encoding_is_read_as_plain(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    provider.status = 401
    provider.encoding = " "  # sent as an empty value
    provider.body = b'{"error": "bad key: ' + REAL.encode() + b'"}'
    assert (await _answer(proxy)) == (401, b'{"error": "bad key: gw\xe2\x80\xa6cdef"}')


async def test_an_error_body_with_the_key_base64_or_hex_encoded_is_masked(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    # Not a shape the byte scrubber knows: the text redaction after it masks these.
    provider.status = 401
    encoded = base64.b64encode(REAL.encode()) + b" " + REAL.encode().hex().encode()
    provider.body = b'{"error": "bad key: ' + encoded + b'"}'
    status, body = await _answer(proxy)
    assert (status, body) == (401, b'{"error": "bad key: gw\xe2\x80\xa6cdef gw\xe2\x80\xa6cdef"}')


@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_an_answer_is_decoded_one_byte_past_its_limit_and_no_further(encoding: str) -> None:
    # One byte past the limit is what says an answer is too large; a small gzip body that
    # would inflate to 10 MB is never inflated whole.
    answer = b"\0" * 10_000_000
    passthrough = Passthrough(KeyScrubber(""), sse=False, encoding=encoding, limit=1000)
    out = passthrough.feed(gzip.compress(answer) if encoding else answer)
    assert (len(out), passthrough.too_large) == (1001, True)


def test_an_answer_of_exactly_its_limit_is_not_too_large() -> None:
    passthrough = Passthrough(KeyScrubber(""), sse=False, encoding="gzip", limit=1000)
    assert passthrough.feed(gzip.compress(b"y" * 1000)) == b"y" * 1000
    assert passthrough.flush() == b""
    assert not passthrough.too_large


def test_an_sse_stream_goes_out_in_whole_lines() -> None:
    passthrough = Passthrough(KeyScrubber(REAL), sse=True, encoding="", limit=10_000)
    assert passthrough.feed(b"data: a\n\ndata: b") == b"data: a\n\n"  # nothing of the next
    assert passthrough.flush() == b"data: b"


def test_an_sse_line_is_held_whole_up_to_its_bound_and_past_it_passed_on() -> None:
    scrubber = KeyScrubber(REAL)
    held = Passthrough(scrubber, sse=True, encoding="", limit=2 * MAX_HELD_LINE)
    assert held.feed(b"x" * MAX_HELD_LINE) == b""
    longer = Passthrough(scrubber, sse=True, encoding="", limit=2 * MAX_HELD_LINE)
    out = longer.feed(b"x" * (MAX_HELD_LINE + 1))
    assert len(out) == MAX_HELD_LINE + 1 - (scrubber.longest - 1)
