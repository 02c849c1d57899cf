"""Errors as the workbench shows them: plain sentences, no exception class names, no CLI flags.

The cores' messages are written for the command line too ("... (use --target claude)"); in the
workbench the same fact is said without the advice that only applies to a shell.
"""

from __future__ import annotations

import re

from driftdesk.secrets import redact

# "(use --target claude …)", "(see --help)": advice in parentheses that names a CLI flag
_FLAG_ADVICE = re.compile(r"\s*\([^()]*\s--[a-z][^()]*\)")
# "; fix: driftdesk profile edit x --base-url …", ": driftdesk doctor x": a shell command
_COMMAND_ADVICE = re.compile(r"[;:,]?\s*(?:fix(?: it)?(?: with)?:?\s*)?`?driftdesk [a-z][^;]*$")


def plain_error(error: BaseException | str | None) -> str:
    """One readable sentence for a failure (keys redacted)."""
    if error is None:
        return "Something went wrong."
    text = redact(str(error)).strip()
    text = _FLAG_ADVICE.sub("", text)
    text = _COMMAND_ADVICE.sub("", text).strip()
    if not text:
        return "Something went wrong."
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
