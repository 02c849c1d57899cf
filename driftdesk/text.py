"""How every face writes counts: one token format and plurals that agree with their number."""

from __future__ import annotations


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 task``, ``2 tasks``, ``0 tasks`` (``plural_form`` for irregular nouns)."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


def tokens(count: int | None) -> str:
    """Token counts as exact numbers with thousands separators (``13,199``), everywhere; an
    unknown count (``None``: nothing reported it) is ``unknown``, never 0."""
    return "unknown" if count is None else f"{count:,}"


def article(word: str) -> str:
    """``an appworld file``, ``a tau-bench file``: the article by the word's first sound."""
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word
