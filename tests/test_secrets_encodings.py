"""The key in a common encoding (base64 padded or not, inside a longer blob, base64url,
URL-encoded, hex) is masked by the one ``redact`` every writer uses, and by the recording's
value redactor, which calls it."""

from __future__ import annotations

import base64
import contextlib
import json
import random
import re
import urllib.parse

import pytest

from driftdesk.reruns.recording import ValueRedactor
from driftdesk.secrets import mask_key, redact

KEY = "gw/Live+Key-0123456789abcdef?x=1"  # "/", "+" and "?": every encoding differs from it
RAW = KEY.encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


ENCODINGS = {
    "base64": _b64(RAW),
    "base64 without padding": _b64(RAW).rstrip("="),
    "base64 inside a blob, offset 1": _b64(b"{" + RAW + b"}"),
    "base64 inside a blob, offset 2": _b64(b'k="' + RAW + b'"\n'),
    "base64url": _b64url(b"ab" + RAW),
    "base64url without padding": _b64url(RAW).rstrip("="),
    "url-encoded": urllib.parse.quote(KEY, safe=""),
    "url-encoded, form": urllib.parse.quote_plus(KEY),
    "hex": RAW.hex(),
    "hex, upper-case": RAW.hex().upper(),
}


def _recoverable(text: str) -> bool:
    """Does decoding any run of ``text`` in one of the encodings give the key back?"""
    for word in text.replace('"', " ").split():
        candidates = [urllib.parse.unquote_plus(word)]
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            for trim in range(4):  # a blob cut anywhere: try its starts
                piece = word[trim:]
                with contextlib.suppress(ValueError):
                    candidates.append(decode(piece + "=" * (-len(piece) % 4)).decode("latin-1"))
        with contextlib.suppress(ValueError):
            candidates.append(bytes.fromhex(word).decode("latin-1"))
        if any(KEY in candidate for candidate in candidates):
            return True
    return False


def test_each_encoding_here_gives_the_key_back() -> None:
    assert len(ENCODINGS) == 10
    for name, shape in ENCODINGS.items():
        assert shape != KEY and KEY not in shape, name
        assert _recoverable(f"content: {shape} end"), name


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_redact_masks_the_key_in_each_encoding(name: str) -> None:
    text = f"the model said: {ENCODINGS[name]} and stopped"
    out = redact(text, [KEY])
    assert not _recoverable(out), out
    assert "gw…?x=1" in out  # masked, not dropped
    assert out.startswith("the model said: ") and out.endswith(" and stopped")


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_the_transcript_redactor_masks_the_key_in_each_encoding(name: str) -> None:
    redactor = ValueRedactor([KEY])
    record = {"response": {"text": f"here it is: {ENCODINGS[name]}", "n": 1}}
    dumped = json.dumps(record, ensure_ascii=False)
    assert redactor.suspect(dumped)  # the cheap pre-test lets it through to the walk
    cleaned = redactor.value(record)
    assert not _recoverable(cleaned["response"]["text"]), cleaned
    assert cleaned["response"]["n"] == 1


def test_ordinary_text_is_left_alone() -> None:
    text = "base64 of something else: " + _b64(b"an ordinary sentence, nothing secret in it")
    assert redact(text, [KEY]) == text
    assert redact("a wxyz b", ["wxyz"]) == "a …•••• b"  # short secrets: verbatim only


# Keys of each length modulo 3 (so the key's last base64 character is whole, or carries 2 or
# 4 bits of what follows), each with a "+" and a "/" in its base64 at every byte offset (so
# base64url differs from base64 wherever the key sits).
KEYS_BY_REMAINDER = [
    "f?q~+>Tc>W.~vk?/q6kDnQUz?~SWZH",
    "rDz??j-jYZQFNc.>C84.>dt?~TjY>-r",
    "7tf?e>spAD?x6r?R2.~~mF6nVkW7QZFQ",
]


def _inside(prefix: int, key: str) -> tuple[str, int, int]:
    """base64 of ``key`` after ``prefix`` bytes and before one more, and the span of the
    characters whose six bits all come from the key's bytes."""
    raw = key.encode()
    blob = _b64(b"abcde"[:prefix] + raw + b"}")  # "}": its first bits are not all zero
    first_bit, end_bit = 8 * prefix, 8 * (prefix + len(raw))
    pure = [i for i in range(len(blob)) if first_bit <= 6 * i and 6 * i + 6 <= end_bit]
    return blob, pure[0], pure[-1] + 1


def test_the_keys_here_have_each_remainder_and_both_base64_only_characters() -> None:
    assert sorted(len(key) % 3 for key in KEYS_BY_REMAINDER) == [0, 1, 2]
    for key in KEYS_BY_REMAINDER:
        for prefix in range(3):
            blob, start, end = _inside(prefix, key)
            assert "+" in blob[start:end] and "/" in blob[start:end], (key, prefix)


@pytest.mark.parametrize("key", KEYS_BY_REMAINDER)
@pytest.mark.parametrize("prefix", range(6))
@pytest.mark.parametrize("url_safe", [False, True])
def test_a_key_inside_a_blob_loses_exactly_the_characters_made_of_it_alone(
    key: str, prefix: int, url_safe: bool
) -> None:
    blob, start, end = _inside(prefix, key)
    if url_safe:
        blob = blob.replace("+", "-").replace("/", "_")
    expected = blob[:start] + mask_key(key) + blob[end:]
    assert redact(f"a {blob} b", [key]) == f"a {expected} b"


@pytest.mark.parametrize("key", [k for k in KEYS_BY_REMAINDER if len(k) % 3])
@pytest.mark.parametrize("url_safe", [False, True])
def test_a_whole_padded_or_unpadded_encoding_is_masked_whole(key: str, url_safe: bool) -> None:
    # Not its core first, which would leave the last character and the padding behind.
    whole = (base64.urlsafe_b64encode if url_safe else base64.b64encode)(key.encode()).decode()
    assert whole.endswith("=")
    for shape in (whole, whole.rstrip("=")):
        assert redact(f"a {shape} b", [key]) == f"a {mask_key(key)} b", shape


def test_an_encoding_of_eight_characters_is_looked_for_and_a_shorter_one_is_not() -> None:
    masked = "a …•••• b"
    assert redact("a 7778797a b", ["wxyz"]) == masked  # hex of a 4-character key
    assert redact("a 7778797A b", ["wxyz"]) == masked
    assert redact("a d3h5eg== b", ["wxyz"]) == masked  # its base64, padded
    # "abcde": base64 "YWJjZGU=" (8, masked), unpadded "YWJjZGU" (7, ordinary text).
    assert redact("a YWJjZGU= b", ["abcde"]) == "a …•••• b"
    assert redact("a YWJjZGU b", ["abcde"]) == "a YWJjZGU b"


def test_a_key_with_a_lone_surrogate_is_masked_in_each_shape() -> None:
    # A key read from a non-UTF-8 environment variable holds its bad bytes as surrogates.
    key = "sec\udcffret-value"
    raw = key.encode("utf-8", "surrogatepass")
    url_encoded = urllib.parse.quote(key, safe="", errors="surrogatepass")
    for shape in (key, raw.hex(), _b64(raw), url_encoded):
        assert redact(f"a {shape} b", [key]) == "a se…alue b", shape


def test_a_key_with_a_space_and_a_slash_is_masked_url_encoded_either_way() -> None:
    # quote() keeps "/" unless told not to, and quote_plus() writes the space as "+": each
    # form is a shape of its own.
    key = "pass word/0123456789"
    for shape in ("pass%20word%2F0123456789", "pass+word%2F0123456789"):
        assert redact(f"a {shape} b", [key]) == "a pa…6789 b", shape


# --- line-wrapped and twice-escaped shapes (issue 46, item 4) ---------------------------------

ENV_KEY = "sk-live-Wr4pped+Key/0123456789abcdefXYZ"  # "+" and "/": base64url differs too


def _env_file(lead: str) -> bytes:
    """A ``.env`` file with the key after ``lead`` (its length sets the base64 alignment)."""
    return f"# settings\nDEBUG=1\n{lead}OPENAI_API_KEY={ENV_KEY}\nREGION=eu-west-1\n".encode()


def _wrapped(text: str, width: int) -> str:
    """What ``base64`` (76 columns) or ``xxd -p`` (60 columns) prints: lines of ``width``."""
    return "\n".join(text[i : i + width] for i in range(0, len(text), width)) + "\n"


def wrapped_shapes(key: str = ENV_KEY) -> dict[str, str]:
    """The key in each encoding redaction must find, broken over lines as tools print them."""
    shapes = {}
    for lead in ("", "x", "xy"):  # the three base64 alignments
        data = _env_file(lead)
        shapes[f"base64 -w 76, offset {len(lead)}"] = _wrapped(_b64(data), 76)
        shapes[f"base64url wrapped, offset {len(lead)}"] = _wrapped(_b64url(data), 76)
        shapes[f"base64 wrapped at 64 with CRLF, offset {len(lead)}"] = _wrapped(
            _b64(data), 64
        ).replace("\n", "\r\n")
    data = _env_file("")
    shapes["xxd -p"] = _wrapped(data.hex(), 60)
    shapes["xxd -p, upper-case"] = _wrapped(data.hex().upper(), 60)
    shapes["hex in spaced pairs"] = " ".join(
        data.hex()[i : i + 2] for i in range(0, 2 * len(data), 2)
    )
    shapes["verbatim, wrapped"] = _wrapped(f"OPENAI_API_KEY={key} and more text after it", 24)
    shapes["url-encoded, wrapped"] = _wrapped("k=" + urllib.parse.quote(key, safe=""), 20)
    shapes["json-escaped once"] = key.replace("-", "\\u002d").replace("/", "\\/")
    shapes["json-escaped twice"] = key.replace("-", "\\\\u002d").replace("/", "\\\\\\/")
    shapes["json-escaped once, every character"] = "".join(f"\\u{ord(c):04x}" for c in key)
    shapes["json-escaped twice, upper-case hex"] = "".join(f"\\\\u{ord(c):04X}" for c in key)
    return shapes


_ESCAPE = re.compile(r"\\+(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)


def _unescaped(text: str) -> str:
    """Every JSON escape, at any depth, as its character (a line break as nothing)."""

    def one(match: re.Match[str]) -> str:
        if match.group(1):
            return chr(int(match.group(1), 16))
        return "" if match.group(2) in "nrtbf" else match.group(2)

    return _ESCAPE.sub(one, text)


def key_recoverable(text: str, key: str = ENV_KEY) -> list[str]:
    """The encodings in which ``text`` still gives ``key`` back, after removing whitespace and
    line breaks (written or JSON-escaped), at any depth of JSON escaping: verbatim,
    URL-encoded, hex in either case, base64 or base64url at any alignment. Empty: none."""
    raw = key.encode("utf-8", "surrogatepass")
    found = []
    for view in (text, _unescaped(text)):
        squeezed = "".join(view.split())
        if key in squeezed or key in urllib.parse.unquote(squeezed):
            found.append("verbatim or url-encoded")
        if raw.hex() in squeezed.lower():
            found.append("hex")
        for run in re.findall(r"[A-Za-z0-9+/_=-]{8,}", squeezed):
            run = run.replace("-", "+").replace("_", "/").replace("=", "")
            for trim in range(4):
                piece = run[trim:]
                piece = piece[: len(piece) - len(piece) % 4]
                with contextlib.suppress(ValueError):
                    if raw in base64.b64decode(piece):
                        found.append("base64")
    return found


def test_each_wrapped_shape_here_gives_the_key_back() -> None:
    shapes = wrapped_shapes()
    assert len(shapes) == 18
    for name, shape in shapes.items():
        assert ENV_KEY not in shape, name
        assert key_recoverable(shape), name
    # Wrapped, no unbroken run holds the key's base64, hex or the key itself.
    assert all(_b64(ENV_KEY.encode())[4:-4] not in s for s in shapes.values())


@pytest.mark.parametrize("name", list(wrapped_shapes()))
@pytest.mark.parametrize("container", ["plain", "json"])
def test_redact_finds_the_key_wrapped_or_escaped(name: str, container: str) -> None:
    text = f"the tool printed:\n{wrapped_shapes()[name]}and then stopped"
    if container == "json":  # as a transcript or recording stores it: one level of escapes more
        text = json.dumps({"tool_result": text}, ensure_ascii=False)
    out = redact(text, [ENV_KEY])
    assert not key_recoverable(out), out
    assert mask_key(ENV_KEY) in out
    assert "the tool printed:" in out and "and then stopped" in out
    if container == "json":
        assert json.loads(out)["tool_result"].startswith("the tool printed:")


@pytest.mark.parametrize("name", list(wrapped_shapes()))
def test_the_recording_redactor_finds_the_key_wrapped_or_escaped(name: str) -> None:
    redactor = ValueRedactor([ENV_KEY])
    record = {"request": {"items": [{"type": "tool_result", "content": wrapped_shapes()[name]}]}}
    assert redactor.suspect(json.dumps(record, ensure_ascii=False))
    cleaned = redactor.value(record)
    assert not key_recoverable(json.dumps(cleaned, ensure_ascii=False)), cleaned


def test_wrapped_ordinary_text_is_left_alone() -> None:
    other = _wrapped(_b64(b"nothing secret in here at all, " * 8), 76)
    text = f"listing:\n{other}\nDEBUG=1 and sk-live is a prefix"
    assert redact(text, [ENV_KEY]) == text
    assert ValueRedactor([ENV_KEY]).value({"t": text}) == {"t": text}


def test_the_views_that_find_a_secret_and_those_that_place_it_agree() -> None:
    # The cheap views say whether a secret is there; the mapped ones say where. Built by the
    # same rules, they must spell the same text, or a secret found would not be masked.
    from driftdesk.secrets import _decoded, _squeezed, _View, holds_secret

    rng = random.Random(46)
    pieces = [" ", "\n", "\r\n", "\t", "\\n", "\\\\n", "\\u002d", "\\\\u002D", "\\/", "\\\\\\/",
              "%2F", "%E2%80%A6", "%ED%B3%BF", "%ff", "%0A", "\\", "\\\\", "\\u00", "%2", "+",
              "é", "…", "\u2028", "a", "Z", "9", "=", "-", "_"]  # fmt: skip
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        squeezed = _View(text, decode=False)
        assert squeezed.text == _squeezed(text), repr(text)
        assert _View(squeezed.text, decode=True).text == _decoded(squeezed.text), repr(text)
        # And around a shape of the key, whatever surrounds it, redaction leaves none.
        shape = rng.choice(list(wrapped_shapes().values()))
        out = redact(text + shape + text, [ENV_KEY])
        assert not holds_secret(out, [ENV_KEY]) and not key_recoverable(out), repr(text)


def test_key_like_values_are_found_in_any_letter_case_of_their_label() -> None:
    # Each key-like pattern runs only when its label is in the text (any case): a cheap test
    # that must never skip a match.
    text = "BEARER tok_ABCDEFGH12345678, X-Api-Key: abcdefgh.12345678, sk-proj-0123456789abcdef"
    assert redact(text) == "BEARER …redacted, X-Api-Key: …redacted, sk-proj…redacted"
