"""The key in a common encoding (base64 padded or not, inside a longer blob, base64url,
URL-encoded, hex) is masked by the one ``redact`` every writer uses, and by the recording's
value redactor, which calls it."""

from __future__ import annotations

import base64
import contextlib
import json
import urllib.parse

import pytest

from driftdesk.reruns.recording import ValueRedactor
from driftdesk.secrets import redact

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
