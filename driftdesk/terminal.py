"""Text from outside (task ids, error messages, file contents) made safe to show on a terminal.

A task id is whatever a suite or an imported result file says it is; printed raw, an id such as
``\\x1b]0;PWNED\\x07\\x1b[2J`` retitles the terminal window and clears the screen (and worse
sequences exist). ``printable`` is the one rule for every terminal output (report, tasks,
compare, run progress) and the TUI: control characters (C0 but newline and tab, DEL, C1) and
the bidirectional overrides that can make text read differently than it is are shown as
``\\xNN`` / ``\\uNNNN`` escapes, so they are visible and inert. A path is such text too (a
folder can be named anything): a byte of it that is no UTF-8 (read back as a lone surrogate,
which would reach the terminal raw, or stop the print) is shown as ``\\xNN``."""

from __future__ import annotations

import os
import re

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is no UTF-8, as os.fsdecode carries it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with every control character shown as an escape (newlines and tabs kept
    unless ``keep_newlines`` is false, e.g. for one cell of a table)."""
    escaped = _UNSAFE.sub(_escape, text)
    if not keep_newlines:
        escaped = escaped.replace("\n", "\\n").replace("\t", "\\t")
    return escaped


def printable_path(path: str | os.PathLike[str]) -> str:
    """A path as one inert line (what ``run``, ``resume``, ``import``... print of it)."""
    return printable(os.fspath(path), keep_newlines=False)


def json_printable(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) made inert on a terminal and still
    the same JSON: the characters ``printable`` escapes are left only inside its strings
    (JSON itself escapes C0), where they become ``\\uNNNN`` escapes of the same value."""
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
