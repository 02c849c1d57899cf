"""Task ids as one line of text that ``run --tasks`` reads back.

A task id is whatever a suite or an imported file says: a newline in one printed raw by
``driftdesk tasks`` made a phantom task of its second half, and a comma split it in the
README's ``driftdesk tasks RUN --failed | paste -sd,`` recipe. ``quote`` writes an id as
``terminal.printable`` shows it (control characters and bidi overrides as ``\\xNN`` /
``\\uNNNN``, newline ``\\n``, tab ``\\t``), and also escapes what would otherwise be ambiguous:
a backslash (``\\\\``), a comma (``\\x2c``) and whitespace at either end (``\\x20``), which
``--tasks`` strips. ``parse_list`` reads a comma-separated list of quoted ids back. An id
without any of these characters is printed as is.
"""

from __future__ import annotations

import re

from driftdesk.terminal import printable

_ESCAPE = re.compile(r"\\(\\|n|t|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")
_EDGE_SPACE = re.compile(r"^\s+|\s+$")


def quote(task_id: str) -> str:
    """``task_id`` on one line, with no comma and no edge whitespace, reversibly."""
    text = task_id.replace("\\", "\\\\").replace(",", "\\x2c")
    text = _EDGE_SPACE.sub(lambda m: "".join(map(_code, m.group())), text)
    return printable(text, keep_newlines=False)


def _code(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def unquote(text: str) -> str:
    """The id ``quote`` wrote as ``text``; a backslash starting no escape stays as it is."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code == "\\":
            return "\\"
        if code in ("n", "t"):
            return "\n" if code == "n" else "\t"
        return chr(int(code[1:], 16))

    return _ESCAPE.sub(one, text)


def parse_list(text: str) -> list[str]:
    """``a,b\\x2cc`` -> ["a", "b,c"]: split on commas, stripped, empty items dropped."""
    return [unquote(item.strip()) for item in text.split(",") if item.strip()]
