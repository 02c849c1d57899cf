"""Text from outside (task ids, error messages, file contents) made safe to show on a terminal.

A task id is whatever a suite or an imported result file says it is; printed raw, an id such as
``\\x1b]0;PWNED\\x07\\x1b[2J`` retitles the terminal window and clears the screen (and worse
sequences exist). ``printable`` is the one rule for every terminal output (report, tasks,
compare, run progress) and the TUI: control characters (C0 but newline and tab, DEL, C1) and
the bidirectional overrides that can make text read differently than it is are shown as
``\\xNN`` / ``\\uNNNN`` escapes, so they are visible and inert."""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with every control character shown as an escape (newlines and tabs kept
    unless ``keep_newlines`` is false, e.g. for one cell of a table)."""
    escaped = _UNSAFE.sub(_escape, text)
    if not keep_newlines:
        escaped = escaped.replace("\n", "\\n").replace("\t", "\\t")
    return escaped
