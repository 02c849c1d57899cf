"""CSV cells a spreadsheet would run: text from a file (a task id, an error kind) that starts
with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by Excel, LibreOffice and
Google Sheets as a formula (CSV injection: ``=HYPERLINK(…)``, ``=cmd|…``). Such a cell gets a
leading ``'``, which spreadsheets show as text (OWASP's advice); numbers are left alone."""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """``value``, or for text that a spreadsheet would evaluate, ``'`` + it."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
