"""driftdesk.secrets: a key is shown masked, and scrubbed from any text we keep."""

from __future__ import annotations

import pytest

from driftdesk.secrets import key_like_spans, mask_key, redact


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        (None, "(none)"),
        ("", "(none)"),
        ("12345678", "…••••"),  # 8 characters or fewer: nothing of it shown
        ("123456789", "12…6789"),
        ("sk-abcdefghij7f3a", "sk-…7f3a"),
        ("gw_Live/Key-proxy-0123456789abcdef", "gw…cdef"),
    ],
)
def test_a_key_is_shown_masked(key: str | None, shown: str) -> None:
    assert mask_key(key) == shown


def test_redact_masks_the_given_secrets_and_anything_that_looks_like_a_key() -> None:
    given = "gw_Live/Key-proxy-0123456789abcdef"
    text = (
        f"called with {given}; Authorization: Bearer tok_ABCDEFGH12345678; "
        "x-api-key: 'abcdefgh.12345678', and sk-proj-0123456789abcdef in a log; short sk-ab"
    )
    out = redact(text, [given, None, "abc"])  # None and a too-short one are ignored
    assert out == (
        "called with gw…cdef; Authorization: Bearer …redacted; "
        "x-api-key: '…redacted', and sk-proj…redacted in a log; short sk-ab"
    )
    assert redact("abc", ["abc"]) == "abc"  # 3 characters: never a secret to look for
    assert redact("a wxyz b", ["wxyz"]) == "a …•••• b"  # 4 are


def test_key_like_spans_are_where_redact_would_scrub() -> None:
    text = "Bearer tok_ABCDEFGH12345678 then sk-proj-0123456789abcdef"
    spans = key_like_spans(text)
    assert [text[a:b] for a, b in sorted(spans)] == ["tok_ABCDEFGH12345678", "-0123456789abcdef"]
