"""Edit a few keys of a JSON document in place, leaving every other byte as it was.

Rewriting ``settings.json`` through ``json.loads``/``json.dumps`` loses key order details,
indentation style, numbers as written (``1.0``, ``1e3``), escapes and the final newline — the
classic way provider switchers break users' files. Instead we validate the whole text with the
stdlib parser, then locate the members of the objects we own with the stdlib scanner
(``scanstring`` for keys, ``raw_decode`` for values, which report end offsets) and splice new
text into exactly those spans.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonEditError(ValueError):
    """The document does not parse, or does not have the shape we must edit."""


@dataclass(frozen=True)
class Member:
    key: str
    key_start: int  # offset of the opening quote of the key
    value_start: int
    value_end: int  # one past the value's last character


@dataclass(frozen=True)
class ObjectSpan:
    start: int  # offset of "{"
    end: int  # one past "}"
    members: tuple[Member, ...]

    def find(self, key: str) -> Member | None:
        # JSON parsers keep the last duplicate; so do we.
        found = [m for m in self.members if m.key == key]
        return found[-1] if found else None


def _skip_ws(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    assert match is not None
    return match.end()


def scan_object(text: str, start: int) -> ObjectSpan:
    """The members of the object whose ``{`` is at ``start``."""
    if text[start : start + 1] != "{":
        raise JsonEditError(f"expected an object at offset {start}")
    members: list[Member] = []
    pos = _skip_ws(text, start + 1)
    if text[pos : pos + 1] == "}":
        return ObjectSpan(start, pos + 1, ())
    while True:
        if text[pos : pos + 1] != '"':
            raise JsonEditError(f"expected a key at offset {pos}")
        key, after_key = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        colon = _skip_ws(text, after_key)
        if text[colon : colon + 1] != ":":
            raise JsonEditError(f"expected ':' at offset {colon}")
        value_start = _skip_ws(text, colon + 1)
        try:
            _, value_end = _DECODER.raw_decode(text, value_start)
        except json.JSONDecodeError as exc:
            raise JsonEditError(str(exc)) from exc
        except RecursionError:
            raise JsonEditError(NESTED_TOO_DEEP) from None
        members.append(Member(key, pos, value_start, value_end))
        pos = _skip_ws(text, value_end)
        char = text[pos : pos + 1]
        if char == "}":
            return ObjectSpan(start, pos + 1, tuple(members))
        if char != ",":
            raise JsonEditError(f"expected ',' or '}}' at offset {pos}")
        pos = _skip_ws(text, pos + 1)


NESTED_TOO_DEEP = "nested too deeply for driftdesk to edit safely (thousands of levels)"


def parse_document(text: str) -> tuple[dict[str, Any], ObjectSpan]:
    """Validate ``text`` as a JSON object; return its value and the top-level span."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonEditError(f"not valid JSON: {exc}") from exc
    except RecursionError:
        raise JsonEditError(NESTED_TOO_DEEP) from None
    if not isinstance(value, dict):
        raise JsonEditError(f"the top level is a {type(value).__name__}, expected an object")
    return value, scan_object(text, _skip_ws(text, 0))


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[line_start:pos])
    return match.group(0) if match else ""


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _indent_unit(text: str) -> str:
    """The file's indentation step (two spaces, four, a tab...), guessed from its lines."""
    indents = [m.group(1) for m in re.finditer(r"\n([ \t]+)\S", text)]
    if not indents:
        return "  "
    if all(i.startswith("\t") for i in indents):
        return "\t"
    return min(indents, key=len) or "  "


def dump_value(value: Any) -> str:
    """A new value as we write it: compact, unicode as-is (like most editors)."""
    return json.dumps(value, ensure_ascii=False)


def set_member(text: str, obj: ObjectSpan, key: str, value_text: str) -> str:
    """Set ``key`` in ``obj`` to the JSON ``value_text``: replace its value, or append a member."""
    existing = obj.find(key)
    if existing is not None:
        return text[: existing.value_start] + value_text + text[existing.value_end :]
    key_text = dump_value(key)
    if obj.members:
        last = obj.members[-1]
        first = obj.members[0]
        # Reuse what separates the first member from its predecessor ("\n    ", " " or "").
        prefix_start = obj.start + 1
        separator = text[prefix_start : first.key_start]
        multiline = "\n" in separator
        colon_sep = text[_after_key(text, first) : first.value_start]
        if multiline:
            sep = _newline(text) + _line_indent(text, first.key_start)
        else:
            sep = " " if separator or ", " in text[obj.start : obj.end] else ""
        insertion = "," + sep + key_text + colon_sep + value_text
        return text[: last.value_end] + insertion + text[last.value_end :]
    # Empty object: expand it in the file's style.
    outer = _line_indent(text, obj.start)
    if "\n" in text:
        unit = _indent_unit(text)
        nl = _newline(text)
        new_obj = "{" + nl + outer + unit + key_text + ": " + value_text + nl + outer + "}"
    else:
        new_obj = "{" + key_text + ": " + value_text + "}"
    return text[: obj.start] + new_obj + text[obj.end :]


def _after_key(text: str, member: Member) -> int:
    _, end = json.decoder.scanstring(text, member.key_start + 1)  # type: ignore[attr-defined]
    return int(end)


def nested_value_text(text: str, parent: ObjectSpan, values: dict[str, Any]) -> str:
    """A new object member value, indented one step deeper than ``parent``'s members."""
    if "\n" not in text[parent.start : parent.end]:
        return "{" + ", ".join(f"{dump_value(k)}: {dump_value(v)}" for k, v in values.items()) + "}"
    unit = _indent_unit(text)
    member_indent = (
        _line_indent(text, parent.members[0].key_start)
        if parent.members
        else _line_indent(text, parent.start) + unit
    )
    inner = member_indent + unit
    lines = [f"{inner}{dump_value(k)}: {dump_value(v)}" for k, v in values.items()]
    nl = _newline(text)
    return "{" + nl + ("," + nl).join(lines) + nl + member_indent + "}"


def remove_member(text: str, obj: ObjectSpan, key: str) -> str:
    """Remove every ``key`` member of ``obj`` together with one adjoining comma."""
    for member in reversed([m for m in obj.members if m.key == key]):
        index = obj.members.index(member)
        if index > 0:
            # Drop from the end of the previous value through this value: ",\n  "key": v".
            start = obj.members[index - 1].value_end
            end = member.value_end
        elif len(obj.members) > 1:
            # First of several: drop this member, its comma, and the whitespace up to the next.
            start = member.key_start
            end = obj.members[1].key_start
        else:
            # The only member: the object becomes "{}".
            text = text[: obj.start] + "{}" + text[obj.end :]
            obj = scan_object(text, obj.start)
            continue
        text = text[:start] + text[end:]
        obj = scan_object(text, obj.start)
    return text
