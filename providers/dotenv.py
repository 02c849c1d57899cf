"""``.env`` files, line by line: parse them keeping every byte, quote and unquote values.

Shared by the switch (which rewrites a few assignments in place) and the backup masking (which
finds key-like values); it imports nothing of ours but the error it raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from driftdesk.providers.errors import TargetParseError


class EnvParseError(TargetParseError):
    """A line that is not ``KEY=value``, a comment or blank; the file was left untouched."""


ENV_LINE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<export>export[ \t]+)?(?P<key>[A-Za-z_][A-Za-z0-9_.]*)"
    r"(?P<eq>[ \t]*=[ \t]*)(?P<value>.*?)(?P<eol>\r?\n)?$",
    re.DOTALL,
)


@dataclass
class EnvLine:
    text: str
    key: str | None = None
    export: bool = False


def parse_env_lines(text: str, path: Path) -> list[EnvLine]:
    """Split a .env file into lines, refusing one that is not ``KEY=value`` / comment / blank."""
    out: list[EnvLine] = []
    raw_lines = text.splitlines(keepends=True)
    index = 0
    while index < len(raw_lines):
        line = raw_lines[index]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            out.append(EnvLine(line))
            index += 1
            continue
        match = ENV_LINE.match(line)
        if not match:
            raise EnvParseError(
                f"{path}:{index + 1}: not a KEY=value line ({stripped[:40]!r}); "
                "driftdesk left the file untouched"
            )
        value = match.group("value")
        block = line
        quote = value[:1]
        # A quoted value may span lines (dotenv multi-line strings): keep them as one entry.
        if quote in ("'", '"') and not _closes(value[1:], quote):
            while True:
                index += 1
                if index >= len(raw_lines):
                    raise EnvParseError(
                        f"{path}: unterminated {quote} string in {match.group('key')}; "
                        "driftdesk left the file untouched"
                    )
                block += raw_lines[index]
                if _closes(raw_lines[index], quote):
                    break
        out.append(EnvLine(block, match.group("key"), bool(match.group("export"))))
        index += 1
    return out


def _closes(fragment: str, quote: str) -> bool:
    escaped = False
    for char in fragment:
        if escaped:
            escaped = False
        elif char == "\\" and quote == '"':
            escaped = True
        elif char == quote:
            return True
    return False


def env_quote(value: str, style: str = "") -> str:
    """Quote like the line we replace did (``"``, ``'`` or bare), when the value allows it."""
    if style == "'" and "'" not in value:
        return f"'{value}'"
    if style != '"' and re.fullmatch(r"[A-Za-z0-9_./:@%+,=-]*", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def split_env_comment(value: str) -> tuple[str, str]:
    """``"x" # note`` -> (``"x"``, `` # note``): the inline comment stays when we replace x."""
    quote = value[:1]
    if quote in ("'", '"'):
        escaped = False
        for index, char in enumerate(value[1:], start=1):
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                return value[: index + 1], value[index + 1 :]
        return value, ""
    match = re.search(r"\s+#", value)
    return (value[: match.start()], value[match.start() :]) if match else (value, "")


def env_unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        return inner.replace('\\"', '"').replace("\\\\", "\\") if value[0] == '"' else inner
    if " #" in value:
        value = value.split(" #", 1)[0].rstrip()
    return value


def assigned_values(lines: list[EnvLine]) -> list[tuple[str, str]]:
    """``(KEY, value)`` for every assignment, unquoted, its inline comment left out."""
    out = []
    for line in lines:
        match = ENV_LINE.match(line.text) if line.key else None
        if match and line.key:
            out.append((line.key, env_unquote(split_env_comment(match.group("value"))[0])))
    return out
